/* Unit tests of every dispatcher function, good and bad input. */
#include <string.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"
#include "xptrace/xptrace_protocol.h"

/* xptrace's extension (xptrace/xptrace_protocol.h): the words notification
 * reads first, which a direct recorder's producer reads too. */

static xpti_stream_callback_api_t sole_of(uint8_t stream) {
  xpti_stream_callback_api_t cb;
  __atomic_load((xpti_stream_callback_api_t *)xptraceStreamSoleListener(stream), &cb,
                __ATOMIC_ACQUIRE);
  return cb;
}

static bool enabled_word(void) {
  return __atomic_load_n((const bool *)xptraceTraceEnabledWord(), __ATOMIC_RELAXED);
}

static int calls_a, calls_b, order[8], norder;
static void cb_a(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e, uint64_t i,
                 const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  calls_a++;
  if (norder < 8)
    order[norder++] = 'a';
}
static void cb_b(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e, uint64_t i,
                 const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  calls_b++;
  if (norder < 8)
    order[norder++] = 'b';
}

static int every_calls, every_order_pos;
static uint8_t every_stream_seen;
static uint16_t every_type_seen;
static void cb_every(uint8_t stream, uint16_t t, xpti_trace_event_data_t *p,
                     xpti_trace_event_data_t *e, uint64_t i, const void *u) {
  (void)p, (void)e, (void)i, (void)u;
  every_calls++;
  every_stream_seen = stream;
  every_type_seen = t;
  every_order_pos = norder;
  if (norder < 8)
    order[norder++] = 'E';
}

static void test_stream_callbacks(void) {
  uint8_t s = xptiRegisterStream("unit.every");
  CHECK_EQ(xptiRegisterStreamCallback(s, NULL), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiRegisterStreamCallback(233, cb_every), XPTI_RESULT_INVALIDARG);
  CHECK(!xptiCheckTraceEnabled(s, XPTI_TRACE_SIGNAL));
  CHECK_EQ(xptiRegisterStreamCallback(s, cb_every), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiRegisterStreamCallback(s, cb_every), XPTI_RESULT_DUPLICATE);
  CHECK(xptiCheckTraceEnabled(s, XPTI_TRACE_SIGNAL));
  CHECK(xptiCheckTraceEnabled(s, 0));
  xpti_payload_t p = xpti_payload_make("every", "every.c", 1, 1, NULL);
  xpti_trace_event_data_t *e = xptiMakeEvent(NULL, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  /* a user-defined type made after registration still arrives */
  uint16_t late = xptiRegisterUserDefinedTracePoint("lateTool", XPTI_TRACE_POINT_BEGIN(5));
  CHECK_EQ(xptiNotifySubscribers(s, late, NULL, e, 1, NULL), XPTI_RESULT_SUCCESS);
  CHECK_EQ(every_calls, 1);
  CHECK_EQ(every_stream_seen, s);
  CHECK_EQ(every_type_seen, late);
  /* per-type callbacks run first */
  norder = 0;
  CHECK(sole_of(s) == cb_every);
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_SIGNAL, cb_a), XPTI_RESULT_SUCCESS);
  CHECK(sole_of(s) == NULL); /* two listeners: no direct path */
  xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, e, 2, NULL);
  CHECK(norder == 2 && order[0] == 'a' && order[1] == 'E');
  CHECK_EQ(every_calls, 2);
  CHECK_EQ(xptiUnregisterStreamCallback(s, cb_every), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiUnregisterStreamCallback(s, cb_every), XPTI_RESULT_DUPLICATE);
  xptiNotifySubscribers(s, late, NULL, e, 3, NULL);
  CHECK_EQ(every_calls, 2);
  CHECK_EQ(xptiRegisterStreamCallback(s, cb_every), XPTI_RESULT_UNDELETE);
  /* the per-type one still runs beside it, first; alone again, it is the
   * stream's only callback (the dispatcher's one-load path) */
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, e, 5, NULL);
  CHECK(norder == 2 && order[0] == 'a' && order[1] == 'E');
  CHECK_EQ(every_calls, 3);
  CHECK_EQ(xptiUnregisterCallback(s, XPTI_TRACE_SIGNAL, cb_a), XPTI_RESULT_SUCCESS);
  CHECK(sole_of(s) == cb_every);
  CHECK(enabled_word() == xptiTraceEnabled());
  xptiForceSetTraceEnabled(false);
  CHECK(!enabled_word());
  xptiForceSetTraceEnabled(true);
  CHECK(enabled_word());
  norder = 0;
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, e, 6, NULL), XPTI_RESULT_SUCCESS);
  CHECK(norder == 1 && order[0] == 'E' && every_type_seen == XPTI_TRACE_SIGNAL);
  CHECK_EQ(every_calls, 4);
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, NULL, 7, NULL),
           XPTI_RESULT_INVALIDARG); /* still checked first */
  CHECK_EQ(every_calls, 4);
  CHECK_EQ(xptiUnregisterStream("unit.every"), XPTI_RESULT_SUCCESS);
  CHECK(sole_of(s) == NULL);
  xptiNotifySubscribers(s, late, NULL, e, 4, NULL);
  CHECK_EQ(every_calls, 4);
  CHECK(!xptiCheckTraceEnabled(s, 0));
}

/* One per-type callback is called through the page's sole pointer: it
 * must follow every change of the list and of the stream-wide ones. */
static void test_sole_per_type(void) {
  uint8_t s = xptiRegisterStream("unit.sole");
  xpti_payload_t p = xpti_payload_make("sole", "sole.c", 1, 1, NULL);
  xpti_trace_event_data_t *e = xptiMakeEvent(NULL, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  calls_a = calls_b = every_calls = 0;
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_SUCCESS);
  norder = 0;
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 1, NULL), XPTI_RESULT_SUCCESS);
  CHECK(norder == 1 && order[0] == 'a');
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_b), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 2, NULL);
  CHECK(norder == 2 && order[0] == 'a' && order[1] == 'b');
  CHECK_EQ(xptiUnregisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 3, NULL);
  CHECK(norder == 1 && order[0] == 'b');
  CHECK_EQ(xptiRegisterStreamCallback(s, cb_every), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 4, NULL);
  CHECK(norder == 2 && order[0] == 'b' && order[1] == 'E');
  CHECK_EQ(xptiUnregisterStreamCallback(s, cb_every), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 5, NULL);
  CHECK(norder == 1 && order[0] == 'b');
  /* another type of the same page is not this one's */
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_END, NULL, e, 6, NULL);
  CHECK_EQ(norder, 0);
  CHECK_EQ(xptiUnregisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_b), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 7, NULL);
  CHECK_EQ(norder, 0);
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_UNDELETE);
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 8, NULL);
  CHECK(norder == 1 && order[0] == 'a');
  /* a user-defined type (page 1 and up) has its sole pointer on its page */
  uint16_t mine = xptiRegisterUserDefinedTracePoint("unit.sole.tool", 3);
  CHECK(mine >= 256);
  CHECK_EQ(xptiRegisterCallback(s, mine, cb_b), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, mine, NULL, e, 10, NULL);
  CHECK(norder == 1 && order[0] == 'b');
  CHECK_EQ(xptiRegisterCallback(s, mine, cb_a), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, mine, NULL, e, 11, NULL);
  CHECK(norder == 2 && order[0] == 'b' && order[1] == 'a');
  CHECK_EQ(xptiUnregisterCallback(s, mine, cb_b), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, mine, NULL, e, 12, NULL);
  CHECK(norder == 1 && order[0] == 'a');
  /* the predefined type with the same low byte is not it */
  norder = 0;
  xptiNotifySubscribers(s, (uint16_t)(mine & 0xff), NULL, e, 13, NULL);
  CHECK_EQ(norder, 0);
  CHECK_EQ(xptiUnregisterStream("unit.sole"), XPTI_RESULT_SUCCESS);
  norder = 0;
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 9, NULL);
  xptiNotifySubscribers(s, mine, NULL, e, 14, NULL);
  CHECK_EQ(norder, 0);
}

/* One stamp per notification: the first collector publishes it, a later
 * one of the same notification finds it; the next notification does not. */
static int stamp_reused;
static void cb_stamp_first(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                           xpti_trace_event_data_t *event, uint64_t instance, const void *ud) {
  (void)stream, (void)type, (void)parent, (void)event, (void)ud;
  xptrace_stamp_t *st = xptraceThreadStamp();
  if (instance == 1) { /* the second notification is left unstamped */
    st->stamped = st->seq;
    st->stamp = 1234;
    st->clock = XPTRACE_STAMP_TSC;
  }
}
static void cb_stamp_later(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                           xpti_trace_event_data_t *event, uint64_t instance, const void *ud) {
  (void)stream, (void)type, (void)parent, (void)event, (void)instance, (void)ud;
  xptrace_stamp_t *st = xptraceThreadStamp();
  stamp_reused = st->stamped == st->seq && st->stamp == 1234 && st->clock == XPTRACE_STAMP_TSC;
}

static void test_stamp(void) {
  xptrace_stamp_t *st = xptraceThreadStamp();
  CHECK(st != NULL);
  uint8_t s = xptiRegisterStream("unit.stamp");
  CHECK_EQ(xptiRegisterStreamCallback(s, cb_stamp_first), XPTI_RESULT_SUCCESS);
  xpti_payload_t p = xpti_payload_make("stamp", "stamp.c", 1, 1, NULL);
  xpti_trace_event_data_t *e = xptiMakeEvent(NULL, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  uint64_t seq = st->seq;
  xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, e, 1, NULL); /* one listener: its path */
  CHECK_EQ(st->seq, seq + 1);
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, NULL, 1, NULL), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(st->seq, seq + 1); /* refused: not a notification */
  CHECK_EQ(xptiRegisterStreamCallback(s, cb_stamp_later), XPTI_RESULT_SUCCESS);
  xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, e, 1, NULL);
  CHECK_EQ(st->seq, seq + 2);
  CHECK_EQ(stamp_reused, 1);
  xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, e, 2, NULL); /* stamped by none */
  CHECK_EQ(stamp_reused, 0);
  CHECK_EQ(xptiUnregisterStream("unit.stamp"), XPTI_RESULT_SUCCESS);
}

static void test_strings(void) {
  char *copy = (char *)1;
  CHECK_EQ(xptiRegisterString(NULL, &copy), XPTI_INVALID_STRING_ID);
  CHECK(copy == NULL);
  char buf[32];
  strcpy(buf, "hello");
  uint32_t id = xptiRegisterString(buf, &copy);
  CHECK(id != XPTI_INVALID_STRING_ID);
  CHECK(copy && copy != buf && !strcmp(copy, "hello"));
  strcpy(buf, "changed"); /* the table keeps its own copy */
  CHECK(!strcmp(xptiLookupString(id), "hello"));
  CHECK_EQ(xptiRegisterString("hello", &copy), id);
  CHECK(xptiRegisterString("", &copy) != XPTI_INVALID_STRING_ID);
  /* Intel's semantics: both arguments are required */
  CHECK_EQ(xptiRegisterString("hello", NULL), XPTI_INVALID_STRING_ID);
  copy = buf;
  CHECK_EQ(xptiRegisterString(NULL, &copy), XPTI_INVALID_STRING_ID);
  CHECK(copy == NULL);
  CHECK(xptiLookupString(XPTI_INVALID_STRING_ID) == NULL);
  CHECK(xptiLookupString(123456789) == NULL);
}

static void test_objects(void) {
  int64_t v = -42;
  int32_t id = xptiRegisterObject((const char *)&v, sizeof v, XPTI_METADATA_SIGNED_INTEGER);
  CHECK(id >= 0);
  xpti_object_data_t o = xptiLookupObject(id);
  CHECK_EQ(o.size, sizeof v);
  CHECK_EQ(o.type, XPTI_METADATA_SIGNED_INTEGER);
  CHECK(o.data && !memcmp(o.data, &v, sizeof v));
  CHECK_EQ(xptiRegisterObject((const char *)&v, sizeof v, XPTI_METADATA_SIGNED_INTEGER), id);
  CHECK(xptiRegisterObject((const char *)&v, sizeof v, XPTI_METADATA_BINARY) != id);
  CHECK_EQ(xptiRegisterObject(NULL, 4, 0), XPTI_INVALID_OBJECT_ID);
  o = xptiLookupObject(-1);
  CHECK(o.data == NULL && o.size == 0);
  o = xptiLookupObject(1 << 30);
  CHECK(o.data == NULL);
}

static void test_events(void) {
  CHECK(xptiMakeEvent("x", NULL, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL) == NULL);
  xpti_payload_t empty = xpti_payload_make(NULL, NULL, 0, 0, NULL);
  CHECK(xptiMakeEvent(NULL, &empty, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL) == NULL);
  CHECK_EQ(xptiRegisterPayload(NULL), XPTI_INVALID_UID);
  CHECK_EQ(xptiRegisterPayload(&empty), XPTI_INVALID_UID);

  char name[16] = "fn", file[16] = "file.c";
  xpti_payload_t p = xpti_payload_make(name, file, 10, 2, NULL);
  uint64_t inst = 0;
  xpti_trace_event_data_t *e = xptiMakeEvent("fn", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE,
                                             &inst);
  CHECK(e != NULL);
  CHECK_EQ(inst, 1);
  CHECK(e->unique_id != 0);
  /* the caller's payload is left as it was (Intel's: threads may share it);
   * xptiRegisterPayload is what registers it */
  CHECK_EQ(p.internal, 0);
  CHECK(!(p.flags & XPTI_PAYLOAD_REGISTERED));
  CHECK_EQ(xptiRegisterPayload(&p), e->unique_id);
  CHECK_EQ(p.internal, e->unique_id);
  CHECK(p.flags & XPTI_PAYLOAD_REGISTERED);
  CHECK_EQ(e->event_type, XPTI_EVENT_ALGORITHM);
  CHECK_EQ(e->activity_type, XPTI_ACTIVITY_ACTIVE);
  CHECK(e->flags & XPTI_EVENT_UID_AVAILABLE);
  CHECK(e->flags & XPTI_EVENT_PAYLOAD_AVAILABLE);
  /* same content through other buffers: same event, next instance */
  char name2[16] = "fn", file2[16] = "file.c";
  xpti_payload_t p2 = xpti_payload_make(name2, file2, 10, 2, NULL);
  strcpy(name, "zz");
  strcpy(file, "zz");
  CHECK(xptiMakeEvent("fn", &p2, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst) == e);
  CHECK_EQ(inst, 2);
  CHECK_EQ(xptiRegisterPayload(&p2), e->unique_id);
  const xpti_payload_t *q = xptiQueryPayload(e);
  CHECK(q && !strcmp(q->name, "fn") && !strcmp(q->source_file, "file.c"));
  CHECK_EQ(q->line_no, 10);
  CHECK_EQ(q->column_no, 2);
  CHECK(q == xptiQueryPayloadByUID(e->unique_id));
  CHECK(xptiFindEvent(e->unique_id) == e);
  CHECK(xptiFindEvent(0) == NULL);
  CHECK(xptiFindEvent(e->unique_id + 1000000) == NULL);
  CHECK(xptiQueryPayload(NULL) == NULL);
  CHECK(xptiQueryPayloadByUID(0) == NULL);
  /* each key component distinguishes */
  xpti_payload_t v1 = xpti_payload_make("fn", "file.c", 11, 2, NULL);
  xpti_payload_t v2 = xpti_payload_make("fn", "file.c", 10, 3, NULL);
  xpti_payload_t v3 = xpti_payload_make("fn", "other.c", 10, 2, NULL);
  xpti_payload_t v4 = xpti_payload_make("gn", "file.c", 10, 2, NULL);
  uint64_t u1 = xptiRegisterPayload(&v1), u2 = xptiRegisterPayload(&v2);
  uint64_t u3 = xptiRegisterPayload(&v3), u4 = xptiRegisterPayload(&v4);
  CHECK(u1 != e->unique_id && u2 != e->unique_id && u3 != e->unique_id && u4 != e->unique_id);
  CHECK(u1 != u2 && u1 != u3 && u1 != u4 && u2 != u3 && u2 != u4 && u3 != u4);
  /* code pointer only, and name + code pointer */
  xpti_payload_t c1 = xpti_payload_make(NULL, NULL, 0, 0, (void *)test_events);
  xpti_payload_t c2 = xpti_payload_make(NULL, NULL, 0, 0, (void *)test_strings);
  CHECK(xptiRegisterPayload(&c1) != XPTI_INVALID_UID);
  CHECK(xptiRegisterPayload(&c1) != xptiRegisterPayload(&c2));
  /* name fallback */
  xpti_trace_event_data_t *ce = xptiMakeEvent("named", &c1, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, NULL);
  CHECK(ce && xptiQueryPayload(ce)->name && !strcmp(xptiQueryPayload(ce)->name, "named"));
  /* one buffer reused with new text is a new trace point (cache by content) */
  char reused[16] = "alpha";
  xpti_payload_t r1 = xpti_payload_make(reused, "reuse.c", 5, 5, NULL);
  xpti_trace_event_data_t *ra = xptiMakeEvent(NULL, &r1, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  strcpy(reused, "beta");
  xpti_payload_t r2 = xpti_payload_make(reused, "reuse.c", 5, 5, NULL);
  xpti_trace_event_data_t *rb = xptiMakeEvent(NULL, &r2, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  CHECK(ra && rb && ra != rb);
  CHECK(!strcmp(xptiQueryPayload(rb)->name, "beta"));
  strcpy(reused, "alpha");
  CHECK(xptiMakeEvent(NULL, &r1, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL) == ra);
  /* release resets instance counting */
  xptiReleaseEvent(e);
  xptiMakeEvent("fn", &p2, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst);
  CHECK_EQ(inst, 1);
  xptiReleaseEvent(NULL);

  /* metadata */
  int32_t v = 7;
  int32_t obj = xptiRegisterObject((const char *)&v, sizeof v, XPTI_METADATA_SIGNED_INTEGER);
  CHECK_EQ(xptiAddMetadata(e, "k1", obj), XPTI_RESULT_SUCCESS);
  {
    /* a key again: the new value replaces the old (Intel's), DUPLICATE said */
    int32_t w = 8;
    int32_t obj2 = xptiRegisterObject((const char *)&w, sizeof w, XPTI_METADATA_SIGNED_INTEGER);
    int32_t got = -1;
    CHECK_EQ(xptiAddMetadata(e, "k1", obj2), XPTI_RESULT_DUPLICATE);
    CHECK_EQ(xptiLookupMetadata(e, "k1", &got), XPTI_RESULT_SUCCESS);
    CHECK_EQ(got, obj2);
    CHECK_EQ(xptiMetadataCount(e), 1);
    CHECK_EQ(xptiAddMetadata(e, "k1", obj), XPTI_RESULT_DUPLICATE);
    CHECK_EQ(xptiLookupMetadata(e, "k1", &got), XPTI_RESULT_SUCCESS);
    CHECK_EQ(got, obj);
  }
  CHECK_EQ(xptiAddMetadata(NULL, "k1", obj), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiAddMetadata(e, NULL, obj), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiAddMetadata(e, "k2", 99999), XPTI_RESULT_INVALIDARG);
  for (int i = 0; i < 10; i++) {
    char key[16];
    snprintf(key, sizeof key, "m%d", i);
    CHECK_EQ(xptiAddMetadata(e, key, obj), XPTI_RESULT_SUCCESS);
  }
  CHECK_EQ(xptiMetadataCount(e), 11);
  uint32_t kid;
  int32_t vid;
  CHECK_EQ(xptiMetadataAt(e, 0, &kid, &vid), XPTI_RESULT_SUCCESS);
  CHECK(!strcmp(xptiLookupString(kid), "k1") && vid == obj);
  CHECK_EQ(xptiMetadataAt(e, 10, &kid, &vid), XPTI_RESULT_SUCCESS);
  CHECK(!strcmp(xptiLookupString(kid), "m9"));
  CHECK_EQ(xptiMetadataAt(e, 11, &kid, &vid), XPTI_RESULT_NOTFOUND);
  CHECK_EQ(xptiMetadataAt(NULL, 0, &kid, &vid), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiLookupMetadata(e, "m3", &vid), XPTI_RESULT_SUCCESS);
  CHECK_EQ(vid, obj);
  CHECK_EQ(xptiLookupMetadata(e, "nope", &vid), XPTI_RESULT_NOTFOUND);
  CHECK_EQ(xptiLookupMetadata(NULL, "m3", &vid), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiMetadataCount(NULL), 0);
  /* a caller's copy of an event reaches the same metadata */
  xpti_trace_event_data_t copy = *e;
  CHECK_EQ(xptiMetadataCount(&copy), 11);
  /* an event the framework never made */
  xpti_trace_event_data_t foreign;
  memset(&foreign, 0, sizeof foreign);
  CHECK_EQ(xptiAddMetadata(&foreign, "k", obj), XPTI_RESULT_INVALIDARG);
}

static void test_streams_callbacks(void) {
  CHECK_EQ(xptiRegisterStream(NULL), XPTI_INVALID_STREAM_ID);
  CHECK_EQ(xptiRegisterStream(""), XPTI_INVALID_STREAM_ID);
  uint8_t s = xptiRegisterStream("unit.stream");
  CHECK(s != XPTI_INVALID_STREAM_ID);
  CHECK_EQ(xptiRegisterStream("unit.stream"), s);
  CHECK(!strcmp(xptiLookupStreamName(s), "unit.stream"));
  CHECK(xptiLookupStreamName(200) == NULL);
  uint8_t s2 = xptiRegisterStream("unit.other");
  CHECK(s2 != s);

  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, NULL), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiRegisterCallback(s, 0, cb_a), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiRegisterCallback(250, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_INVALIDARG);
  CHECK(!xptiCheckTraceEnabled(s, 0));
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_DUPLICATE);
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_b), XPTI_RESULT_SUCCESS);
  CHECK(xptiCheckTraceEnabled(s, 0));
  CHECK(xptiCheckTraceEnabled(s, XPTI_TRACE_TASK_BEGIN));
  CHECK(!xptiCheckTraceEnabled(s, XPTI_TRACE_TASK_END));
  CHECK(!xptiCheckTraceEnabled(s2, 0));

  xpti_payload_t p = xpti_payload_make("cbtest", "cb.c", 1, 1, NULL);
  xpti_trace_event_data_t *e = xptiMakeEvent("cbtest", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 1, NULL), XPTI_RESULT_SUCCESS);
  CHECK_EQ(calls_a, 1);
  CHECK_EQ(calls_b, 1);
  CHECK(norder == 2 && order[0] == 'a' && order[1] == 'b');
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_TASK_END, NULL, e, 1, NULL), XPTI_RESULT_SUCCESS);
  CHECK_EQ(calls_a, 1);
  /* NULL event: invalid, except for types that carry user data only */
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, NULL, 1, NULL), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(calls_a, 1);
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, 1, "f"), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, 1, NULL), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_DIAGNOSTICS, NULL, NULL, 1, "d"), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiNotifySubscribers(251, XPTI_TRACE_TASK_BEGIN, NULL, e, 1, NULL), XPTI_RESULT_INVALIDARG);

  CHECK_EQ(xptiUnregisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiUnregisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_DUPLICATE);
  CHECK_EQ(xptiUnregisterCallback(s, XPTI_TRACE_TASK_END, cb_a), XPTI_RESULT_NOTFOUND);
  CHECK_EQ(xptiUnregisterCallback(s, XPTI_TRACE_TASK_BEGIN, NULL), XPTI_RESULT_INVALIDARG);
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 2, NULL);
  CHECK_EQ(calls_a, 1);
  CHECK_EQ(calls_b, 2);
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_a), XPTI_RESULT_UNDELETE);
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 3, NULL);
  CHECK_EQ(calls_a, 2);
  /* user-defined trace type on the same stream */
  uint16_t ud = xptiRegisterUserDefinedTracePoint("unitTool", XPTI_TRACE_POINT_BEGIN(3));
  CHECK_EQ(xptiRegisterCallback(s, ud, cb_a), XPTI_RESULT_SUCCESS);
  xptiNotifySubscribers(s, ud, NULL, e, 1, NULL);
  CHECK_EQ(calls_a, 3);

  CHECK_EQ(xptiUnregisterStream("unit.stream"), XPTI_RESULT_SUCCESS);
  CHECK(!xptiCheckTraceEnabled(s, 0));
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 4, NULL);
  CHECK_EQ(calls_a, 3);
  CHECK_EQ(calls_b, 3);
  CHECK_EQ(xptiUnregisterStream("never.seen"), XPTI_RESULT_NOTFOUND);
  CHECK_EQ(xptiUnregisterStream(NULL), XPTI_RESULT_INVALIDARG);

  /* tracing off: notification is FALSE and nothing runs */
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb_b), XPTI_RESULT_UNDELETE);
  xptiForceSetTraceEnabled(false);
  CHECK(!xptiTraceEnabled());
  CHECK(!xptiCheckTraceEnabled(s, XPTI_TRACE_TASK_BEGIN));
  CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, 5, NULL), XPTI_RESULT_FALSE);
  CHECK_EQ(calls_b, 3);
  xptiForceSetTraceEnabled(true);

  /* default stream */
  CHECK_EQ(xptiSetDefaultStreamID(s2), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiGetDefaultStreamID(), s2);
  CHECK_EQ(xptiSetDefaultStreamID(240), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiSetDefaultStreamID(0), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiGetDefaultStreamID(), s2);
  /* Intel's range: any id below 128, registered or not */
  CHECK_EQ(xptiSetDefaultStreamID(100), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiGetDefaultStreamID(), 100);
  CHECK_EQ(xptiSetDefaultStreamID(s2), XPTI_RESULT_SUCCESS);
}

static void test_user_defined(void) {
  uint16_t b = xptiRegisterUserDefinedTracePoint("myTest", XPTI_TRACE_POINT_BEGIN(0));
  uint16_t en = xptiRegisterUserDefinedTracePoint("myTest", XPTI_TRACE_POINT_END(0));
  uint16_t a = xptiRegisterUserDefinedTracePoint("myTest", XPTI_TRACE_POINT_BEGIN(1));
  uint16_t o = xptiRegisterUserDefinedTracePoint("otherTool", XPTI_TRACE_POINT_BEGIN(0));
  CHECK(XPTI_TOOL_ID(b) != 0);
  CHECK_EQ(XPTI_TOOL_ID(b), XPTI_TOOL_ID(en));
  CHECK(XPTI_TOOL_ID(o) != XPTI_TOOL_ID(b));
  CHECK_EQ(b & 0x80, 0x80);
  CHECK_EQ(XPTI_EXTRACT_USER_DEFINED_ID(b), 0);
  CHECK_EQ(XPTI_EXTRACT_USER_DEFINED_ID(en), 1);
  CHECK_EQ(XPTI_EXTRACT_USER_DEFINED_ID(a), 2);
  CHECK_EQ(b, (XPTI_TOOL_ID(b) << 8) | 0x80);
  CHECK(XPTI_TRACE_IS_BEGIN(b) && !XPTI_TRACE_IS_BEGIN(en));
  CHECK_EQ(xptiRegisterUserDefinedTracePoint("myTest", XPTI_TRACE_POINT_BEGIN(0)), b);
  CHECK(!strcmp(xptiLookupToolName(XPTI_TOOL_ID(b)), "myTest"));
  CHECK(xptiLookupToolName(0) == NULL);
  CHECK_EQ(xptiRegisterUserDefinedTracePoint(NULL, 1), 0);
  CHECK_EQ(xptiRegisterUserDefinedTracePoint("myTest", 128), 0);
  uint16_t ev = xptiRegisterUserDefinedEventType("myTest", XPTI_EVENT(0));
  CHECK_EQ(XPTI_TOOL_ID(ev), XPTI_TOOL_ID(b));
  CHECK_EQ(ev & 0xff, 0x80);
  xpti_payload_t p = xpti_payload_make("udev", "u.c", 1, 1, NULL);
  xpti_trace_event_data_t *e = xptiMakeEvent("udev", &p, ev, XPTI_ACTIVITY_ACTIVE, NULL);
  CHECK(e && e->event_type == ev);
}

static void test_ids_and_tls(void) {
  uint64_t a = xptiGetUniqueId(), b = xptiGetUniqueId();
  CHECK(a != 0 && b != 0 && a != b);
  CHECK_EQ(xptiGetUniversalId(), 0);
  xptiSetUniversalId(77);
  CHECK_EQ(xptiGetUniversalId(), 77);
  char *key = NULL;
  uint64_t val = 0;
  CHECK_EQ(xptiGetStashedTuple(&key, &val), XPTI_RESULT_NOTFOUND);
  CHECK_EQ(xptiStashTuple(NULL, 1), XPTI_RESULT_INVALIDARG);
  char k[8] = "corr";
  CHECK_EQ(xptiStashTuple(k, 5), XPTI_RESULT_SUCCESS);
  strcpy(k, "xx");
  CHECK_EQ(xptiGetStashedTuple(&key, &val), XPTI_RESULT_SUCCESS);
  CHECK(key && !strcmp(key, "corr") && val == 5); /* the key was copied */
  CHECK_EQ(xptiStashTuple("again", 6), XPTI_RESULT_SUCCESS); /* replaces, as Intel's */
  CHECK_EQ(xptiGetStashedTuple(&key, &val), XPTI_RESULT_SUCCESS);
  CHECK(key && !strcmp(key, "again") && val == 6);
  CHECK_EQ(xptiGetStashedTuple(NULL, &val), XPTI_RESULT_INVALIDARG);
  xptiUnstashTuple();
  CHECK_EQ(xptiGetStashedTuple(&key, &val), XPTI_RESULT_NOTFOUND);
}

static void test_life_cycle(void) {
  CHECK_EQ(xptiFrameworkInitialize(), XPTI_RESULT_SUCCESS);
  CHECK_EQ(xptiInitialize(NULL, 1, 0, "1.0"), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiInitialize("", 1, 0, "1.0"), XPTI_RESULT_INVALIDARG);
  CHECK_EQ(xptiInitialize("unit.life", 1, 0, "1.0"), XPTI_RESULT_SUCCESS);
  xptiFinalize("unit.life");
  xptiFinalize(NULL);
  CHECK_EQ(xptiFrameworkFinalize(), XPTI_RESULT_SUCCESS);
}

static void test_user_data_names(void) {
  xpti_function_with_args_t call = {7, "clFinish", NULL, NULL, NULL};
  CHECK(!strcmp(xpti_user_data_name(XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN, &call), "clFinish"));
  CHECK(!strcmp(xpti_user_data_name(XPTI_TRACE_FUNCTION_WITH_ARGS_END, &call), "clFinish"));
  CHECK(!strcmp(xpti_user_data_name(XPTI_TRACE_FUNCTION_BEGIN, "f"), "f"));
  CHECK(!strcmp(xpti_user_data_name(XPTI_TRACE_DIAGNOSTICS, "d"), "d"));
  CHECK(xpti_user_data_name(XPTI_TRACE_TASK_BEGIN, "x") == NULL); /* not a name by protocol */
  CHECK(xpti_user_data_name(XPTI_TRACE_FUNCTION_BEGIN, NULL) == NULL);
}

static void test_reset(void) {
  uint8_t s = xptiRegisterStream("reset.me");
  char *copy;
  uint32_t sid = xptiRegisterString("reset-string", &copy);
  xpti_payload_t p = xpti_payload_make("r", "r.c", 1, 1, NULL);
  uint64_t uid = xptiRegisterPayload(&p);
  const char *old = xptiLookupString(sid);
  /* stream 2 (the first after "xpti.framework") has a sole callback; after
   * the reset id 2 is a new stream that nobody listens to */
  CHECK(xptiLookupStreamName(2) != NULL);
  CHECK_EQ(xptiRegisterCallback(2, XPTI_TRACE_LOCK_END, cb_a), XPTI_RESULT_SUCCESS);
  CHECK(xptiCheckTraceEnabled(2, XPTI_TRACE_LOCK_END));
  xptiReset();
  CHECK(xptiLookupStreamName(s) == NULL);
  CHECK(xptiFindEvent(uid) == NULL);
  CHECK(!strcmp(old, "reset-string")); /* memory from before stays valid */
  /* ids start again, after "xpti.framework" (stream 1, string 0) */
  CHECK_EQ(xptiGetDefaultStreamID(), 1);
  CHECK(!strcmp(xptiLookupStreamName(1), XPTI_DEFAULT_STREAM_NAME));
  CHECK(xptiLookupStreamName(0) == NULL);
  CHECK_EQ(xptiRegisterStream("fresh"), 2);
  xpti_payload_t q = xpti_payload_make("r2", "r2.c", 2, 1, NULL);
  xpti_trace_event_data_t *e = xptiMakeEvent(NULL, &q, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  CHECK(e != NULL);
  norder = 0;
  CHECK_EQ(xptiNotifySubscribers(2, XPTI_TRACE_LOCK_END, NULL, e, 1, NULL), XPTI_RESULT_SUCCESS);
  CHECK_EQ(norder, 0);
  CHECK(!xptiCheckTraceEnabled(2, XPTI_TRACE_LOCK_END));
  CHECK_EQ(xptiRegisterString("fresh", &copy), 1);
}

int main(void) {
  /* no XPTI_SUBSCRIBERS: the dispatcher is linked directly and forced on */
  CHECK(!xptiTraceEnabled());
  /* no subscriber is no error (Intel's answer), and announces nothing */
  CHECK_EQ(xptiInitialize("off.stream", 1, 0, "1.0"), XPTI_RESULT_SUCCESS);
  xptiForceSetTraceEnabled(true);
  CHECK(xptiTraceEnabled());
  CHECK(xptiTraceTryToEnable());
  test_strings();
  test_objects();
  test_events();
  test_streams_callbacks();
  test_user_defined();
  test_stream_callbacks();
  test_sole_per_type();
  test_stamp();
  test_ids_and_tls();
  test_life_cycle();
  test_user_data_names();
  test_reset();
  return CHECK_DONE();
}
