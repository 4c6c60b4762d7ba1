// The C++-typed part of Intel's dispatcher ABI: the metadata map that
// xptiQueryMetadata returns, and the interface objects of
// xptiCreateTracepoint ... xptiLookupEvent.  Everything else is C.
// Binds to libstdc++: an Intel-built collector reads the map with the
// std::unordered_map code inlined from its own (libstdc++) headers.
#include <new>

#include "xpti/xpti_trace_framework.hpp"

#include "compat.h"

namespace {

// All views of one trace point; made once, live as long as its event.
struct objects;

struct payload_view final : xpti_payload_iface_t {
  xpti_trace_event_data_t *ev;
  explicit payload_view(xpti_trace_event_data_t *e) : ev(e) {}
  const xpti_payload_t *p() const { return ev->reserved.payload; }
  const char *name() const override { return p()->name; }
  const char *source_file() const override { return p()->source_file; }
  uint32_t line_no() const override { return p()->line_no; }
  uint32_t column_no() const override { return p()->column_no; }
  uint64_t payload_flags() const override { return p()->flags; }
  // uid.p1 is file id << 32 | name id; UINT32_MAX (absent) reads as -1
  int32_t name_string_id() const override { return (int32_t)(uint32_t)p()->uid.p1; }
  int32_t file_string_id() const override { return (int32_t)(uint32_t)(p()->uid.p1 >> 32); }
  uint64_t uid64() const override { return ev->unique_id; }
  bool is_valid() const override { return p()->flags != 0; }
  xpti_payload_t *payload_ref() override { return const_cast<xpti_payload_t *>(p()); }
};

// Iteration state is per object, as in Intel's: one iterating thread.
struct metadata_view final : xpti_metadata_t {
  xpti_trace_event_data_t *ev;
  uint32_t cursor = 0;
  explicit metadata_view(xpti_trace_event_data_t *e) : ev(e) {}
  xpti_result_t item(uint32_t i, char **key, int32_t &value) {
    uint32_t key_id;
    if (xptiMetadataAt(ev, i, &key_id, &value) != XPTI_RESULT_SUCCESS)
      return XPTI_RESULT_FALSE;
    if (key)
      *key = const_cast<char *>(xptiLookupString(key_id));
    return XPTI_RESULT_SUCCESS;
  }
  xpti_result_t first_item(char **key, int32_t &value) override {
    cursor = 0;
    return item(cursor, key, value);
  }
  xpti_result_t next_item(char **key, int32_t &value) override {
    return item(++cursor, key, value);
  }
  xpti_result_t add_item(const char *key, int32_t value) override {
    return xptiAddMetadata(ev, key, value);
  }
  size_t count() override { return xptiMetadataCount(ev); }
};

// The instance of this thread's latest xptiCreateTracepoint, so that
// instance() answers the caller's own visit (one object per trace point).
thread_local const objects *tls_last;
thread_local uint64_t tls_last_instance;

struct event_view final : xpti_trace_event_t {
  objects *o;
  explicit event_view(objects *owner) : o(owner) {}
  xpti_payload_iface_t *payload() override;
  xpti_metadata_t *metadata() override;
  uint64_t uid64() const override;
  uint64_t instance() const override;
  uint16_t event_type() const override;
  uint16_t activity_type() const override;
  uint64_t source_uid64() const override;
  uint64_t target_uid64() const override;
  uint64_t event_flags() const override;
  void set_activity_type(xpti::trace_activity_type_t type) override;
  void set_event_type(uint16_t type) override;
  xpti_payload_t *payload_ref() override;
  xpti_trace_event_data_t *event_ref() override;
};

struct tracepoint_view final : xpti_tracepoint_t {
  objects *o;
  explicit tracepoint_view(objects *owner) : o(owner) {}
  xpti_payload_iface_t *payload() override;
  xpti_metadata_t *metadata() override;
  xpti_trace_event_t *event() override;
  uint64_t uid64() const override;
  uint64_t instance() const override;
  xpti_trace_event_data_t *event_ref() override;
  xpti_payload_t *payload_ref() override;
};

struct objects {
  xpti_trace_event_data_t *ev;
  payload_view payload;
  metadata_view metadata;
  event_view event;
  tracepoint_view tracepoint;
  explicit objects(xpti_trace_event_data_t *e)
      : ev(e), payload(e), metadata(e), event(this), tracepoint(this) {}
  uint64_t instance() const {
    if (tls_last == this)
      return tls_last_instance;
    return __atomic_load_n(&ev->instance_id, __ATOMIC_RELAXED);
  }
};

xpti_payload_iface_t *event_view::payload() { return &o->payload; }
xpti_metadata_t *event_view::metadata() { return &o->metadata; }
uint64_t event_view::uid64() const { return o->ev->unique_id; }
uint64_t event_view::instance() const { return o->instance(); }
uint16_t event_view::event_type() const {
  return __atomic_load_n(&o->ev->event_type, __ATOMIC_RELAXED);
}
uint16_t event_view::activity_type() const {
  return __atomic_load_n(&o->ev->activity_type, __ATOMIC_RELAXED);
}
uint64_t event_view::source_uid64() const { return o->ev->source_id; }
uint64_t event_view::target_uid64() const { return o->ev->target_id; }
uint64_t event_view::event_flags() const { return o->ev->flags; }
void event_view::set_activity_type(xpti::trace_activity_type_t type) {
  __atomic_store_n(&o->ev->activity_type, (uint16_t)type, __ATOMIC_RELAXED);
}
void event_view::set_event_type(uint16_t type) {
  __atomic_store_n(&o->ev->event_type, type, __ATOMIC_RELAXED);
}
xpti_payload_t *event_view::payload_ref() { return o->payload.payload_ref(); }
xpti_trace_event_data_t *event_view::event_ref() { return o->ev; }

xpti_payload_iface_t *tracepoint_view::payload() { return &o->payload; }
xpti_metadata_t *tracepoint_view::metadata() { return &o->metadata; }
xpti_trace_event_t *tracepoint_view::event() { return &o->event; }
uint64_t tracepoint_view::uid64() const { return o->ev->unique_id; }
uint64_t tracepoint_view::instance() const { return o->instance(); }
xpti_trace_event_data_t *tracepoint_view::event_ref() { return o->ev; }
xpti_payload_t *tracepoint_view::payload_ref() { return o->payload.payload_ref(); }

objects *objects_of(const xpti_trace_event_data_t *ev) {
  return static_cast<objects *>(tracepoint_cxx_objects(ev));
}

objects *objects_of(const xpti_tracepoint_t *tp) {
  return static_cast<const tracepoint_view *>(tp)->o;
}

thread_local xpti_tracepoint_t *tls_scope;

} // namespace

extern "C" {

void *compat_map_new(void) { return new (std::nothrow) xpti::metadata_t(); }

bool compat_map_insert(void *map, uint32_t key, int32_t value) {
  try {
    (*static_cast<xpti::metadata_t *>(map))[(int32_t)key] = value; // a key again: Intel overwrites
    return true;
  } catch (...) {
    return false;
  }
}

void *compat_objects_new(xpti_trace_event_data_t *event) {
  return new (std::nothrow) objects(event);
}

XPTI_EXPORT_API xpti_tracepoint_t *xptiCreateTracepoint(const char *func_name,
                                                        const char *file_name, uint32_t line_no,
                                                        uint32_t column_no) {
  // Intel's placeholders: a trace point always has a name and a file, so
  // callers that dereference them (Intel's collectors print both) can.
  xpti_payload_t p(func_name ? func_name : "unknown", file_name ? file_name : "unknown-file",
                   (int)line_no, (int)column_no);
  uint64_t instance = 0;
  xpti_trace_event_data_t *ev = xptiMakeEvent(
      p.name, &p, (uint16_t)xptiGetDefaultEventType(), XPTI_ACTIVITY_ACTIVE, &instance);
  objects *o = ev ? objects_of(ev) : nullptr;
  if (!o)
    return nullptr;
  tls_last = o;
  tls_last_instance = instance;
  return &o->tracepoint;
}

XPTI_EXPORT_API xpti_result_t xptiDeleteTracepoint(xpti_tracepoint_t *tp) {
  return tp ? XPTI_RESULT_SUCCESS : XPTI_RESULT_INVALIDARG;
}

XPTI_EXPORT_API const xpti_payload_iface_t *xptiLookupPayload(uint64_t universal_id) {
  const xpti_trace_event_data_t *ev = xptiFindEvent(universal_id);
  objects *o = ev ? objects_of(ev) : nullptr;
  return o ? &o->payload : nullptr;
}

XPTI_EXPORT_API const xpti_trace_event_t *xptiLookupEvent(uint64_t universal_id) {
  const xpti_trace_event_data_t *ev = xptiFindEvent(universal_id);
  objects *o = ev ? objects_of(ev) : nullptr;
  return o ? &o->event : nullptr;
}

XPTI_EXPORT_API const xpti_tracepoint_t *xptiGetTracepointScopeData(void) { return tls_scope; }

XPTI_EXPORT_API xpti_result_t xptiSetTracepointScopeData(xpti_tracepoint_t *tp) {
  if (!tp)
    return XPTI_RESULT_INVALIDARG;
  tls_scope = tp;
  xptiSetUniversalId(objects_of(tp)->ev->unique_id); // Intel's layers read it
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API void xptiUnsetTracepointScopeData(void) {
  tls_scope = nullptr;
  xptiSetUniversalId(XPTI_INVALID_UID);
}

XPTI_EXPORT_API const xpti_tracepoint_t *xptiRegisterTracepointScope(const char *func_name,
                                                                     const char *file_name,
                                                                     uint32_t line_no,
                                                                     uint32_t column_no) {
  xpti_tracepoint_t *tp = xptiCreateTracepoint(func_name, file_name, line_no, column_no);
  if (tp)
    xptiSetTracepointScopeData(tp);
  return tp;
}

} // extern "C"
