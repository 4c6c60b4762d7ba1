/* xptrace — the collectors' optional lookups (see xpt_api.h). */
#include "xpt_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "xpt_msg.h"

typedef xpti_result_t (*xpt_register_stream_cb_fn)(uint8_t, xpti_stream_callback_api_t);
typedef const char *(*xpt_name_fn)(uint8_t);
typedef uint32_t (*xpt_meta_count_fn)(const xpti_trace_event_data_t *);
typedef xpti_result_t (*xpt_meta_at_fn)(const xpti_trace_event_data_t *, uint32_t, uint32_t *,
                                        int32_t *);
typedef xptrace_stamp_t *(*xpt_stamp_fn)(void);

/* Filled once, before any use (pthread_once). */
static struct {
  xpt_register_stream_cb_fn register_stream_cb;
  xpt_name_fn stream_name, tool_name;
  xpt_meta_count_fn meta_count;
  xpt_meta_at_fn meta_at;
  xpt_stamp_fn thread_stamp;
} xpt_api_fn;
static pthread_once_t xpt_api_once = PTHREAD_ONCE_INIT;

/* RTLD_DEFAULT from a collector searches the global scope and then the
 * collector's own dependencies, the dispatcher among them: the one whose
 * other functions the collector calls. */
#define XPT_API_LOOKUP(field, name)                                                         \
  do {                                                                                      \
    void *sym = dlsym(RTLD_DEFAULT, name);                                                  \
    memcpy(&xpt_api_fn.field, &sym, sizeof sym);                                            \
  } while (0)

static void xpt_api_resolve(void) {
  XPT_API_LOOKUP(register_stream_cb, "xptiRegisterStreamCallback");
  XPT_API_LOOKUP(stream_name, "xptiLookupStreamName");
  XPT_API_LOOKUP(tool_name, "xptiLookupToolName");
  XPT_API_LOOKUP(meta_count, "xptiMetadataCount");
  XPT_API_LOOKUP(meta_at, "xptiMetadataAt");
  XPT_API_LOOKUP(thread_stamp, "xptraceThreadStamp");
}

static inline void xpt_api_ready(void) { pthread_once(&xpt_api_once, xpt_api_resolve); }

/* ---- names remembered where the dispatcher has no lookup ---------------- */

static _Atomic(const char *) xpt_api_streams[256];
static _Atomic(const char *) xpt_api_tools[256];

void xpt_api_note_stream(uint8_t stream, const char *name) {
  if (!name || atomic_load_explicit(&xpt_api_streams[stream], memory_order_acquire))
    return;
  char *table = NULL; /* the dispatcher's copy lives as long as the process */
  if (xptiRegisterString(name, &table) == XPTI_INVALID_STRING_ID || !table)
    return;
  const char *none = NULL;
  atomic_compare_exchange_strong(&xpt_api_streams[stream], &none, table);
}

const char *xpt_api_stream_name(uint8_t stream) {
  xpt_api_ready();
  const char *name = xpt_api_fn.stream_name ? xpt_api_fn.stream_name(stream) : NULL;
  return name ? name : atomic_load_explicit(&xpt_api_streams[stream], memory_order_acquire);
}

uint16_t xpt_api_user_type(const char *tool, uint8_t id) {
  uint16_t type = xptiRegisterUserDefinedTracePoint(tool, id);
  if (type != XPTI_INVALID_TRACE_TYPE && XPTI_TOOL_ID(type))
    atomic_store_explicit(&xpt_api_tools[XPTI_TOOL_ID(type)], tool, memory_order_release);
  return type;
}

const char *xpt_api_tool_name(uint8_t tool) {
  xpt_api_ready();
  const char *name = xpt_api_fn.tool_name ? xpt_api_fn.tool_name(tool) : NULL;
  return name ? name : atomic_load_explicit(&xpt_api_tools[tool], memory_order_acquire);
}

/* ---- stream callbacks over per-type ones ------------------------------- */

/* Intel's callbacks carry no stream id: one trampoline per stream, each
 * registered for that stream only, gives it back. */
static _Atomic(xpti_stream_callback_api_t) xpt_api_cb[256];

static inline void xpt_api_forward(uint8_t stream, uint16_t type,
                                   xpti_trace_event_data_t *parent,
                                   xpti_trace_event_data_t *event, uint64_t instance,
                                   const void *user_data) {
  xpti_stream_callback_api_t cb = atomic_load_explicit(&xpt_api_cb[stream], memory_order_acquire);
  if (cb)
    cb(stream, type, parent, event, instance, user_data);
}

#define XPT_TRAMP(hi, lo)                                                                   \
  static void xpt_api_tramp_##hi##_##lo(uint16_t type, xpti_trace_event_data_t *parent,     \
                                         xpti_trace_event_data_t *event, uint64_t instance, \
                                         const void *user_data) {                           \
    xpt_api_forward((uint8_t)((hi) * 16 + (lo)), type, parent, event, instance, user_data); \
  }
#define XPT_TRAMP16(hi)                                                                     \
  XPT_TRAMP(hi, 0) XPT_TRAMP(hi, 1) XPT_TRAMP(hi, 2) XPT_TRAMP(hi, 3) XPT_TRAMP(hi, 4)     \
  XPT_TRAMP(hi, 5) XPT_TRAMP(hi, 6) XPT_TRAMP(hi, 7) XPT_TRAMP(hi, 8) XPT_TRAMP(hi, 9)     \
  XPT_TRAMP(hi, 10) XPT_TRAMP(hi, 11) XPT_TRAMP(hi, 12) XPT_TRAMP(hi, 13)                  \
  XPT_TRAMP(hi, 14) XPT_TRAMP(hi, 15)
XPT_TRAMP16(0) XPT_TRAMP16(1) XPT_TRAMP16(2) XPT_TRAMP16(3) XPT_TRAMP16(4) XPT_TRAMP16(5)
XPT_TRAMP16(6) XPT_TRAMP16(7) XPT_TRAMP16(8) XPT_TRAMP16(9) XPT_TRAMP16(10) XPT_TRAMP16(11)
XPT_TRAMP16(12) XPT_TRAMP16(13) XPT_TRAMP16(14) XPT_TRAMP16(15)

#define XPT_ROW(hi)                                                                         \
  xpt_api_tramp_##hi##_0, xpt_api_tramp_##hi##_1, xpt_api_tramp_##hi##_2,                   \
      xpt_api_tramp_##hi##_3, xpt_api_tramp_##hi##_4, xpt_api_tramp_##hi##_5,               \
      xpt_api_tramp_##hi##_6, xpt_api_tramp_##hi##_7, xpt_api_tramp_##hi##_8,               \
      xpt_api_tramp_##hi##_9, xpt_api_tramp_##hi##_10, xpt_api_tramp_##hi##_11,             \
      xpt_api_tramp_##hi##_12, xpt_api_tramp_##hi##_13, xpt_api_tramp_##hi##_14,            \
      xpt_api_tramp_##hi##_15,
static const xpti_tracepoint_callback_api_t xpt_api_tramps[256] = {
    XPT_ROW(0) XPT_ROW(1) XPT_ROW(2) XPT_ROW(3) XPT_ROW(4) XPT_ROW(5) XPT_ROW(6) XPT_ROW(7)
    XPT_ROW(8) XPT_ROW(9) XPT_ROW(10) XPT_ROW(11) XPT_ROW(12) XPT_ROW(13) XPT_ROW(14)
    XPT_ROW(15)};

static _Atomic bool xpt_api_said;

/* Every predefined type (tool 0), every type of xptrace's tool, and
 * those of the tools registered before it (ids are given in order, by
 * Intel's dispatcher as by ours): a later tool's types cannot be known
 * through Intel's API. */
enum { XPT_API_EARLIER_TOOLS = 32 };

static void xpt_api_register_tool(uint8_t stream, uint8_t tool) {
  for (unsigned n = 0x80; n < 0x100; n++)
    xptiRegisterCallback(stream, (uint16_t)(tool << 8 | n), xpt_api_tramps[stream]);
}

static xpti_result_t xpt_api_subscribe_types(uint8_t stream) {
  xpti_result_t first = XPTI_RESULT_SUCCESS;
  for (uint16_t type = 1; type < 0x80; type++) {
    xpti_result_t r = xptiRegisterCallback(stream, type, xpt_api_tramps[stream]);
    if (type == 1)
      first = r;
  }
  uint16_t ours = xpt_api_user_type(XPTRACE_TOOL_NAME, 0);
  uint8_t tool = ours == XPTI_INVALID_TRACE_TYPE ? 0 : (uint8_t)XPTI_TOOL_ID(ours);
  if (!tool)
    return first;
  xpt_api_register_tool(stream, tool);
  for (unsigned t = 1; t < tool && t <= XPT_API_EARLIER_TOOLS; t++)
    xpt_api_register_tool(stream, (uint8_t)t);
  return first;
}

xpti_result_t xpt_api_subscribe(uint8_t stream, const char *name, xpti_stream_callback_api_t cb) {
  xpt_api_ready();
  xpt_api_note_stream(stream, name);
  if (xpt_api_fn.register_stream_cb)
    return xpt_api_fn.register_stream_cb(stream, cb);
  /* once per process, whichever collector comes first (keys are shared) */
  if (!atomic_exchange(&xpt_api_said, true))
    xpt_msg_once("xpt-api-stream-callback",
                 "xpti: the dispatcher has no xptiRegisterStreamCallback (not xptrace's): "
                 "xptrace's collectors do not see the user-defined types of tools registered "
                 "after the first stream's start");
  xpti_stream_callback_api_t none = NULL;
  if (!atomic_compare_exchange_strong(&xpt_api_cb[stream], &none, cb) && none != cb)
    return XPTI_RESULT_DUPLICATE; /* one collector callback per stream */
  return xpt_api_subscribe_types(stream);
}

/* ---- metadata ---------------------------------------------------------- */

/* Intel's map (xpt_api_map.cpp): count and the index-th pair. */
XPT_API_HIDDEN uint32_t xpt_api_map_count(const void *map);
XPT_API_HIDDEN bool xpt_api_map_at(const void *map, uint32_t index, uint32_t *key, int32_t *value);

uint32_t xpt_api_metadata_count(const xpti_trace_event_data_t *event) {
  xpt_api_ready();
  if (xpt_api_fn.meta_count)
    return xpt_api_fn.meta_count(event);
  const void *map = xptiQueryMetadata((xpti_trace_event_data_t *)event);
  return map ? xpt_api_map_count(map) : 0;
}

xpti_result_t xpt_api_metadata_at(const xpti_trace_event_data_t *event, uint32_t index,
                                  uint32_t *key_id, int32_t *value_id) {
  xpt_api_ready();
  if (xpt_api_fn.meta_at)
    return xpt_api_fn.meta_at(event, index, key_id, value_id);
  const void *map = xptiQueryMetadata((xpti_trace_event_data_t *)event);
  return map && xpt_api_map_at(map, index, key_id, value_id) ? XPTI_RESULT_SUCCESS
                                                              : XPTI_RESULT_NOTFOUND;
}

/* ---- the per-thread stamp ----------------------------------------------- */

/* seq 1, stamped 0: a published stamp of another collector never appears
 * here, so this collector reads the clock itself. */
static __thread xptrace_stamp_t xpt_api_own_stamp = {.seq = 1};

xptrace_stamp_t *xpt_api_thread_stamp(void) {
  xpt_api_ready();
  return xpt_api_fn.thread_stamp ? xpt_api_fn.thread_stamp() : &xpt_api_own_stamp;
}
