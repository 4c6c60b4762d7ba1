// Code in Intel's C++ spellings, using only xpti_trace_framework.hpp, run
// on our dispatcher: every entry point of Intel's proxy table and the
// header's helpers (issue 12).
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>

#include "xpti/xpti_trace_framework.hpp"

static int failures;
#define EXPECT(c)                                                                            \
  do {                                                                                       \
    if (!(c)) {                                                                              \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #c);                  \
      ++failures;                                                                            \
    }                                                                                        \
  } while (0)

static int begins, ends, allocs;
static void cb(uint16_t type, xpti::trace_event_data_t *, xpti::trace_event_data_t *, uint64_t,
               const void *) {
  if (type == xpti::trace_task_begin || type == xpti::trace_function_begin)
    ++begins;
  else if (type == xpti::trace_task_end || type == xpti::trace_function_end)
    ++ends;
  else if (type == xpti::trace_offload_alloc_memory_object_construct)
    ++allocs;
}

int main() {
  xptiFrameworkInitialize();
  xptiForceSetTraceEnabled(true);
  EXPECT(xptiTraceEnabled());
  EXPECT(xptiInitialize("intel.cxx", 1, 0, "1.0") != xpti::result_t::XPTI_RESULT_FAIL);
  uint8_t sid = xptiRegisterStream("intel.cxx");
  EXPECT(sid != 0 && sid != (uint8_t)xpti::invalid_id);
  for (auto t : {xpti::trace_point_type_t::task_begin, xpti::trace_point_type_t::task_end,
                 xpti::trace_point_type_t::function_begin, xpti::trace_point_type_t::function_end,
                 xpti::trace_point_type_t::offload_alloc_memory_object_construct})
    EXPECT(xptiRegisterCallback(sid, (uint16_t)t, cb) == xpti::result_t::XPTI_RESULT_SUCCESS);
  EXPECT(xptiCheckTraceEnabled(sid));
  EXPECT(xptiCheckTraceEnabled(sid, (uint16_t)xpti::trace_point_type_t::task_begin));
  static_assert((uint16_t)xpti::trace_point_type_t::queue_destroy == 0x2b, "Intel's value");
  static_assert(sizeof(xpti::mem_alloc_data_t) == 40, "Intel's layout");
  static_assert(sizeof(xpti::payload_t) == 80 && sizeof(xpti::trace_event_data_t) == 128,
                "Intel's layout");

  // strings, objects, ids, stash
  char *table = nullptr;
  xpti::string_id_t s = xptiRegisterString("foo", &table);
  EXPECT(s != xpti::invalid_id && table && std::strcmp(xptiLookupString(s), "foo") == 0);
  int64_t big = 42;
  xpti::object_id_t o = xptiRegisterObject((const char *)&big, sizeof big, 2);
  xpti::object_data_t od = xptiLookupObject(o);
  EXPECT(od.size == sizeof big && od.type == 2);
  EXPECT(xptiGetUniqueId() != xptiGetUniqueId());
  xptiSetUniversalId(7);
  EXPECT(xptiGetUniversalId() == 7);
  xptiSetUniversalId(xpti::invalid_uid);
  {
    xpti::framework::stash_tuple st("k", 9);
    char *k = nullptr;
    uint64_t v = 0;
    EXPECT(xptiGetStashedTuple(&k, &v) == xpti::result_t::XPTI_RESULT_SUCCESS && v == 9);
  }
  EXPECT(xptiStashTuple("k2", 1) == xpti::result_t::XPTI_RESULT_SUCCESS);
  xptiUnstashTuple();
  uint16_t ut = xptiRegisterUserDefinedTracePoint("intel", 3);
  uint16_t ue = xptiRegisterUserDefinedEventType("intel", 3);
  EXPECT(XPTI_TOOL_ID(ut) != 0 && XPTI_EXTRACT_USER_DEFINED_ID(ue) == 3);

  // payloads and events, Intel's constructors and activity enum
  xpti::payload_t p("foo", "foo.cpp", 10, 2, (void *)0xdeadbeef);
  EXPECT(p.isValid() && (p.flags & (uint64_t)xpti::payload_flag_t::SourceFileAvailable));
  uint64_t uid = xptiRegisterPayload(&p);
  EXPECT(uid != xpti::invalid_uid && p.internal == uid);
  uint64_t inst = 0;
  xpti::trace_event_data_t *e =
      xptiMakeEvent("foo", &p, (uint16_t)xpti::trace_event_type_t::algorithm,
                    xpti::trace_activity_type_t::active, &inst);
  EXPECT(e && inst == 1 && xptiFindEvent(uid) == e);
  const xpti::payload_t *qp = xptiQueryPayload(e);
  EXPECT(qp && qp == xptiQueryPayloadByUID(uid) && std::strcmp(qp->name, "foo") == 0);
  xpti::uid_t u1 = qp->uid, u2 = qp->uid;
  EXPECT(u1 == u2 && !(u1 < u2) && u1.hash() == u2.hash());

  // metadata: both forms agree
  EXPECT(xpti::addMetadata(e, "int", 5) == xpti::result_t::XPTI_RESULT_SUCCESS);
  EXPECT(xpti::addMetadata(e, "str", std::string("hello")) == xpti::result_t::XPTI_RESULT_SUCCESS);
  xpti::metadata_t *md = xptiQueryMetadata(e);
  EXPECT(md && md->size() == 2 && md == xptiQueryMetadata(e));
  EXPECT(xpti::addMetadata(e, "flag", true) == xpti::result_t::XPTI_RESULT_SUCCESS);
  EXPECT(md->size() == 3 && xptiMetadataCount(e) == 3); // added after the map exists
  int seen = 0;
  for (auto &item : *md) {
    int32_t id = -1;
    EXPECT(xptiLookupMetadata(e, xptiLookupString(item.first), &id) ==
               xpti::result_t::XPTI_RESULT_SUCCESS &&
           id == item.second);
    std::string text = xpti::readMetadata(item);
    std::string key = xptiLookupString(item.first);
    seen += (key == "int" && text == "5") + (key == "str" && text == "hello") +
            (key == "flag" && text == "true");
    if (key == "int")
      EXPECT(xpti::getMetadata<int>(item).second == 5);
  }
  EXPECT(seen == 3);

  // scoped notification
  {
    xpti::framework::scoped_notify n("intel.cxx", xpti::trace_task_begin, nullptr, e, inst);
    EXPECT(begins == 1 && ends == 0);
  }
  EXPECT(ends == 1);
  int data = 1;
  EXPECT(xptiNotifySubscribers(sid, xpti::trace_offload_alloc_memory_object_construct, nullptr,
                               nullptr, 0, &data) == xpti::result_t::XPTI_RESULT_SUCCESS &&
         allocs == 1);

  // tracepoint objects
  xpti_tracepoint_t *tp = xptiCreateTracepoint("bar", "bar.cpp", 3, 4);
  xpti_tracepoint_t *tp2 = xptiCreateTracepoint("bar", "bar.cpp", 3, 4);
  EXPECT(tp && tp == tp2 && tp->instance() == 2); // one object per trace point
  EXPECT(tp->event_ref() && tp->event_ref()->unique_id == tp->uid64());
  EXPECT(std::strcmp(tp->payload_ref()->name, "bar") == 0);
  EXPECT(std::strcmp(tp->payload()->name(), "bar") == 0 && tp->payload()->line_no() == 3 &&
         tp->payload()->column_no() == 4 && tp->payload()->is_valid() &&
         std::strcmp(xptiLookupString(tp->payload()->name_string_id()), "bar") == 0 &&
         std::strcmp(xptiLookupString(tp->payload()->file_string_id()), "bar.cpp") == 0);
  EXPECT(tp->event_ref()->event_type == (uint16_t)xptiGetDefaultEventType());
  xpti_trace_event_t *te = tp->event();
  te->set_event_type((uint16_t)xpti::trace_event_type_t::graph);
  te->set_activity_type(xpti::trace_activity_type_t::overhead);
  EXPECT(te->event_type() == (uint16_t)xpti::trace_event_type_t::graph &&
         te->activity_type() == (uint16_t)xpti::trace_activity_type_t::overhead);
  EXPECT(te->uid64() == tp->uid64() && te->event_ref() == tp->event_ref() &&
         te->payload() == tp->payload() && te->metadata() == tp->metadata());
  xpti_metadata_t *m = tp->metadata();
  EXPECT(m->count() == 0);
  char *key = nullptr;
  int32_t val = 0;
  EXPECT(m->first_item(&key, val) == xpti::result_t::XPTI_RESULT_FALSE);
  EXPECT(m->add_item("a", o) == xpti::result_t::XPTI_RESULT_SUCCESS);
  EXPECT(m->add_item("b", o) == xpti::result_t::XPTI_RESULT_SUCCESS);
  EXPECT(m->first_item(&key, val) == xpti::result_t::XPTI_RESULT_SUCCESS && !std::strcmp(key, "a"));
  EXPECT(m->next_item(&key, val) == xpti::result_t::XPTI_RESULT_SUCCESS && !std::strcmp(key, "b"));
  EXPECT(m->next_item(&key, val) == xpti::result_t::XPTI_RESULT_FALSE);
  EXPECT(xptiQueryMetadata(tp->event_ref())->size() == 2);
  EXPECT(xptiLookupEvent(tp->uid64()) == te && xptiLookupPayload(tp->uid64()) == tp->payload());
  EXPECT(xptiLookupEvent(999999) == nullptr && xptiLookupPayload(0) == nullptr);
  EXPECT(xptiDeleteTracepoint(tp) == xpti::result_t::XPTI_RESULT_SUCCESS);
  EXPECT(xptiDeleteTracepoint(nullptr) == xpti::result_t::XPTI_RESULT_INVALIDARG);

  // defaults
  EXPECT(xptiGetDefaultStreamID() == 1);
  EXPECT(xptiGetDefaultEventType() == xpti::trace_event_type_t::algorithm);
  EXPECT(xptiSetDefaultEventType(xpti::trace_event_type_t::unknown_event) ==
         xpti::result_t::XPTI_RESULT_INVALIDARG);
  EXPECT(xptiGetDefaultTraceType() == xpti::trace_point_type_t::function_begin);
  EXPECT(xptiSetDefaultTraceType(xpti::trace_point_type_t::unknown_type) ==
         xpti::result_t::XPTI_RESULT_INVALIDARG);
  EXPECT(xptiSetDefaultStreamID(sid) == xpti::result_t::XPTI_RESULT_SUCCESS);

  // scopes
  EXPECT(!xptiCheckTracepointScopeNotification());
  xptiEnableTracepointScopeNotification(true);
  EXPECT(xptiCheckTracepointScopeNotification());
  EXPECT(xptiGetTracepointScopeData() == nullptr);
  int b0 = begins, e0 = ends;
  {
    xpti::framework::tracepoint_scope_t outer("scope.cpp", "outer", 1, 0, true);
    EXPECT(xptiGetTracepointScopeData() != nullptr && outer.traceEvent());
    EXPECT(xptiGetUniversalId() == outer.uid64() && outer.streamId() == sid);
    EXPECT(begins == b0 + 1); // self notification: function_begin
    {
      xpti::framework::tracepoint_scope_t inner(false); // inherits the outer one
      EXPECT(inner.uid64() == outer.uid64());
      inner.scopedNotify(xpti::trace_task_begin).addMetadata([&](xpti::trace_event_data_t *ev) {
        xpti::addMetadata(ev, "size", 3u);
      });
      EXPECT(begins == b0 + 2);
    }
    EXPECT(ends == e0 + 1);
  }
  EXPECT(ends == e0 + 2 && xptiGetTracepointScopeData() == nullptr &&
         xptiGetUniversalId() == xpti::invalid_uid);
  const xpti_tracepoint_t *rs = xptiRegisterTracepointScope("reg", "reg.cpp", 5, 0);
  EXPECT(rs && xptiGetTracepointScopeData() == rs);
  EXPECT(xptiSetTracepointScopeData(nullptr) == xpti::result_t::XPTI_RESULT_INVALIDARG);
  xptiUnsetTracepointScopeData();
  EXPECT(xptiGetTracepointScopeData() == nullptr);
  {
    xpti::framework::tracepoint_t t(&p);
    t.stream("intel.cxx").trace_type(xpti::trace_point_type_t::task_begin).notify();
    EXPECT(t.universal_id() == uid && t.payload() == qp && xptiGetUniversalId() == uid);
  }
  EXPECT(xptiGetUniversalId() == xpti::invalid_uid);

  // Intel's later names (issue 29): 128-bit keys, validity helpers,
  // flags, payload string ids, placeholders, hashable uids.
  {
    xpti::uid128_t none;
    EXPECT(!xpti::is_valid_uid(none) && none.p1 == 0 && none.uid64 == 0);
    // a default uid_t is zero, as Intel's (made over 0xff bytes: an
    // uninitialised one would keep them); braced initialisation still works
    alignas(xpti::uid_t) unsigned char raw[sizeof(xpti::uid_t)];
    std::memset(raw, 0xff, sizeof raw);
    xpti::uid_t *fresh = new (raw) xpti::uid_t;
    EXPECT(fresh->p1 == 0 && fresh->p2 == 0 && fresh->p3 == 0);
    xpti::uid_t braced = {1, 2, 3};
    EXPECT(braced.p1 == 1 && braced.p2 == 2 && braced.p3 == 3);
    xpti::uid128_t some;
    some.p1 = 1;
    some.instance = 1;
    EXPECT(xpti::is_valid_uid(some));
    xpti::payload_t named("cxx_names", "cxx.cpp", 7, 0);
    xpti::payload_t empty;
    EXPECT(xpti::is_valid_payload(&named) && !xpti::is_valid_payload(&empty) &&
           !xpti::is_valid_payload(nullptr));
    EXPECT(named.name_sid() == xpti::invalid_id && named.source_file_sid() == xpti::invalid_id);
    xpti_tracepoint_t *ntp = xptiCreateTracepoint(named.name, named.source_file, 7, 0);
    EXPECT(ntp != nullptr);
    const xpti::payload_t *reg = ntp ? ntp->payload_ref() : nullptr;
    EXPECT(reg && reg->name_sid() != xpti::invalid_id &&
           !std::strcmp(xptiLookupString((uint32_t)reg->name_sid()), "cxx_names") &&
           !std::strcmp(xptiLookupString((uint32_t)reg->source_file_sid()), "cxx.cpp"));
    xpti::trace_event_data_t *ev = ntp ? ntp->event_ref() : nullptr;
    EXPECT(xpti::is_valid_event(ev));
    EXPECT(ev && (ev->flags & (uint64_t)xpti::trace_event_flag_t::PayloadAvailable) &&
           (ev->flags & (uint64_t)xpti::trace_event_flag_t::UIDAvailable));
    // Nothing named: Intel's placeholders, never NULL.
    xpti_tracepoint_t *anon = xptiCreateTracepoint(nullptr, nullptr, 0, 0);
    EXPECT(anon != nullptr);
    const xpti::payload_t *ap = anon ? anon->payload_ref() : nullptr;
    EXPECT(ap && ap->name && !std::strcmp(ap->name, "unknown") && ap->source_file &&
           !std::strcmp(ap->source_file, "unknown-file") && ap->line_no == 0);
    EXPECT(XPTI_PACK32_RET64(2u, 3u) == ((uint64_t)2 << 32 | 3));
    std::unordered_map<xpti::uid_t, int> by_uid;
    by_uid[reg ? reg->uid : xpti::uid_t{}] = 1;
    EXPECT(by_uid.size() == 1);
    xpti::hash_t h;
    EXPECT(reg && h.combine_short(reg->uid) != h.combine_short(xpti::uid_t{}));
    xpti::offload_buffer_data_t buf;
    EXPECT(buf.dim == 0 && buf.element_type == nullptr);
  }

  xptiReleaseEvent(e);
  EXPECT(xptiUnregisterCallback(sid, xpti::trace_task_begin, cb) ==
         xpti::result_t::XPTI_RESULT_SUCCESS);
  EXPECT(xptiUnregisterStream("intel.cxx") == xpti::result_t::XPTI_RESULT_SUCCESS);
  EXPECT(xptiUnregisterStream("intel.cxx") == xpti::result_t::XPTI_RESULT_NOTFOUND);
  xptiFinalize("intel.cxx");
  xptiFrameworkFinalize();
  if (failures)
    return 1;
  std::puts("intel cxx ok");
  return 0;
}
