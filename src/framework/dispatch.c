/* Streams, callbacks and notification. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "xptrace/xptrace_protocol.h"

/* Callbacks of one (stream, trace type): an append-only array published
 * with one release store; unregistering clears an entry's active flag. */
/* Entries hold either callback type, cast back at the call. */
typedef void (*any_fn_t)(void);
typedef struct cb_entry {
  _Atomic(any_fn_t) fn;
  _Atomic bool active;
} cb_entry_t;

typedef struct cb_list {
  uint32_t cap;
  _Atomic uint32_t count;
  _Atomic uint32_t active;
  cb_entry_t entry[];
} cb_list_t;

/* trace types are 16-bit: a page of 256 lists per high byte */
typedef struct cb_page {
  _Atomic(cb_list_t *) list[256];
  /* The list's one active callback when it has exactly one and the stream
   * no active stream-wide one: what notification calls after one load. */
  _Atomic(any_fn_t) sole[256];
} cb_page_t;

/* Per (stream, high byte of trace type): a power-of-two grid, so that
 * notification finds its page with a shift and one load.  512 KiB of
 * zeroed memory that the kernel maps only where used. */
static _Atomic(cb_page_t *) g_page[256][256];
/* The sole pointers of page 0 (every predefined trace type) again, per
 * stream: notification finds a predefined type's sole callback with one
 * load at stream << 8 | type, no page pointer first.  Another 512 KiB
 * mapped only where used; a stream's row is 2 KiB. */
static _Atomic(any_fn_t) g_sole0[256][256];

fw_state_t g_fw = {.lock = PTHREAD_MUTEX_INITIALIZER,
                   .default_stream = XPTI_INVALID_STREAM_ID,
                   .nstreams = 1}; /* id 0 is never a stream: Intel's headers read it as none */

static __thread xptrace_stamp_t tls_stamp __attribute__((tls_model("initial-exec")));

/* xptrace's extension for direct recorders (xptrace/xptrace_protocol.h):
 * the words notification reads first. */
XPTI_EXPORT_API const void *xptraceStreamSoleListener(uint8_t stream) {
  return (const void *)&g_fw.only[stream];
}

XPTI_EXPORT_API const void *xptraceTraceEnabledWord(void) { return (const void *)&g_fw.enabled; }

XPTI_EXPORT_API xptrace_stamp_t *xptraceThreadStamp(void) {
  /* Before the caller can publish a stamp (program order on this thread),
   * so a stamp is never matched to a later notification. */
  if (!atomic_load_explicit(&g_fw.stamps_used, memory_order_relaxed)) {
    atomic_store_explicit(&g_fw.stamps_used, true, memory_order_relaxed);
    atomic_fetch_or_explicit(&g_fw.gate, GATE_STAMPS, memory_order_relaxed);
  }
  return &tls_stamp;
}

/* ---- streams ----------------------------------------------------------- */

uint8_t stream_find(const char *table_name) {
  uint32_t n = atomic_load_explicit(&g_fw.nstreams, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load_explicit(&g_fw.stream[i].name, memory_order_acquire) == table_name)
      return (uint8_t)i;
  return XPTI_INVALID_STREAM_ID;
}

XPTI_EXPORT_API uint8_t xptiRegisterStream(const char *name) {
  const char *copy;
  if (!name || !*name || string_intern(name, &copy) == UINT32_MAX)
    return XPTI_INVALID_STREAM_ID;
  uint8_t id = stream_find(copy); /* interned: pointer equality is content equality */
  if (id != XPTI_INVALID_STREAM_ID)
    return id;
  pthread_mutex_lock(&g_fw.lock);
  id = stream_find(copy);
  if (id == XPTI_INVALID_STREAM_ID) {
    uint32_t n = atomic_load_explicit(&g_fw.nstreams, memory_order_relaxed);
    if (n < MAX_STREAMS) {
      atomic_store_explicit(&g_fw.stream[n].name, copy, memory_order_release);
      atomic_store_explicit(&g_fw.nstreams, n + 1, memory_order_release);
      id = (uint8_t)n;
    } else {
      static _Atomic bool said;
      report_once(&said, "xpti: more than %d streams; '%s' not registered", MAX_STREAMS, name);
    }
  }
  pthread_mutex_unlock(&g_fw.lock);
  return id;
}

static inline bool stream_registered(uint8_t id) {
  return atomic_load_explicit(&g_fw.stream[id].name, memory_order_acquire) != NULL;
}

XPTI_EXPORT_API const char *xptiLookupStreamName(uint8_t stream) {
  return atomic_load_explicit(&g_fw.stream[stream].name, memory_order_acquire);
}

XPTI_EXPORT_API uint8_t xptiGetDefaultStreamID(void) {
  return atomic_load_explicit(&g_fw.default_stream, memory_order_relaxed);
}

/* Intel's range (any id below 128, registered or not: a stream may be
 * registered after it is made the default), 0 excepted: never a stream. */
XPTI_EXPORT_API xpti_result_t xptiSetDefaultStreamID(uint8_t stream) {
  if (stream == 0 || (stream >= 128 && !stream_registered(stream)))
    return XPTI_RESULT_INVALIDARG;
  atomic_store_explicit(&g_fw.default_stream, stream, memory_order_relaxed);
  return XPTI_RESULT_SUCCESS;
}

/* ---- callbacks -------------------------------------------------------- */

static cb_list_t *list_of(uint8_t stream, uint16_t type) {
  cb_page_t *page = atomic_load_explicit(&g_page[stream][type >> 8], memory_order_acquire);
  return page ? atomic_load_explicit(&page->list[type & 0xff], memory_order_acquire) : NULL;
}

static cb_entry_t *entry_find(cb_list_t *l, any_fn_t cb) {
  uint32_t n = l ? atomic_load_explicit(&l->count, memory_order_relaxed) : 0;
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load_explicit(&l->entry[i].fn, memory_order_relaxed) == cb)
      return &l->entry[i];
  return NULL;
}

/* g_fw.lock held: the stream's only callback again after any change of its
 * callbacks. */
static void stream_refresh_only(stream_t *s) {
  xpti_stream_callback_api_t only = NULL;
  cb_list_t *every = atomic_load_explicit(&s->every, memory_order_relaxed);
  if (every && atomic_load(&s->active) == 1 && atomic_load(&every->active) == 1) {
    uint32_t n = atomic_load_explicit(&every->count, memory_order_relaxed);
    for (uint32_t i = 0; i < n && !only; i++)
      if (atomic_load_explicit(&every->entry[i].active, memory_order_relaxed))
        only = (xpti_stream_callback_api_t)atomic_load_explicit(&every->entry[i].fn,
                                                                memory_order_relaxed);
  }
  atomic_store_explicit(&g_fw.only[s - g_fw.stream], only, memory_order_release);
}

/* g_fw.lock held: the sole pointer of one list, from its entries; none while
 * the stream has an active stream-wide callback. */
static void page_refresh_sole(uint8_t stream, unsigned hi, cb_page_t *page, unsigned lo) {
  const stream_t *s = &g_fw.stream[stream];
  cb_list_t *every = atomic_load_explicit(&s->every, memory_order_relaxed);
  cb_list_t *l = atomic_load_explicit(&page->list[lo], memory_order_relaxed);
  any_fn_t sole = NULL;
  if (!(every && atomic_load_explicit(&every->active, memory_order_relaxed)) && l &&
      atomic_load_explicit(&l->active, memory_order_relaxed) == 1) {
    uint32_t n = atomic_load_explicit(&l->count, memory_order_relaxed);
    for (uint32_t i = 0; i < n && !sole; i++)
      if (atomic_load_explicit(&l->entry[i].active, memory_order_relaxed))
        sole = atomic_load_explicit(&l->entry[i].fn, memory_order_relaxed);
  }
  if (atomic_load_explicit(&page->sole[lo], memory_order_relaxed) != sole)
    atomic_store_explicit(&page->sole[lo], sole, memory_order_release);
  if (hi == 0 && atomic_load_explicit(&g_sole0[stream][lo], memory_order_relaxed) != sole)
    atomic_store_explicit(&g_sole0[stream][lo], sole, memory_order_release);
}

/* g_fw.lock held: after a change of stream-wide callbacks, every list's. */
static void stream_refresh_sole(uint8_t stream) {
  for (int hi = 0; hi < 256; hi++) {
    cb_page_t *page = atomic_load_explicit(&g_page[stream][hi], memory_order_relaxed);
    for (unsigned lo = 0; page && lo < 256; lo++)
      page_refresh_sole(stream, (unsigned)hi, page, lo);
  }
}

static void entry_set_active(stream_t *s, cb_list_t *l, cb_entry_t *e, bool active) {
  atomic_store_explicit(&e->active, active, memory_order_release);
  if (active) {
    atomic_fetch_add(&l->active, 1);
    atomic_fetch_add(&s->active, 1);
  } else {
    atomic_fetch_sub(&l->active, 1);
    atomic_fetch_sub(&s->active, 1);
  }
  stream_refresh_only(s);
}

/* Add cb to the list published at *where (g_fw.lock held): DUPLICATE if it is
 * active, UNDELETE if it comes back, else appended in registration order.
 * A full list is copied into a bigger one; a notification may still be
 * walking the old one, so it is retired, not freed. */
static xpti_result_t list_register(stream_t *s, _Atomic(cb_list_t *) *where, any_fn_t cb) {
  cb_list_t *l = atomic_load_explicit(where, memory_order_relaxed);
  cb_entry_t *e = entry_find(l, cb);
  if (e) {
    if (atomic_load_explicit(&e->active, memory_order_relaxed))
      return XPTI_RESULT_DUPLICATE;
    entry_set_active(s, l, e, true);
    return XPTI_RESULT_UNDELETE;
  }
  uint32_t n = l ? atomic_load_explicit(&l->count, memory_order_relaxed) : 0;
  if (!l || n == l->cap) {
    uint32_t cap = l ? l->cap * 2 : 4;
    cb_list_t *bigger = xcalloc(1, sizeof *bigger + cap * sizeof bigger->entry[0]);
    if (!bigger)
      return XPTI_RESULT_FAIL;
    bigger->cap = cap;
    for (uint32_t i = 0; i < n; i++) {
      atomic_init(&bigger->entry[i].fn, atomic_load(&l->entry[i].fn));
      atomic_init(&bigger->entry[i].active, atomic_load(&l->entry[i].active));
    }
    atomic_init(&bigger->count, n);
    atomic_init(&bigger->active, l ? atomic_load(&l->active) : 0);
    atomic_store_explicit(where, bigger, memory_order_release);
    if (l)
      retire(l);
    l = bigger;
  }
  atomic_store_explicit(&l->entry[n].fn, cb, memory_order_relaxed);
  atomic_store_explicit(&l->count, n + 1, memory_order_release);
  entry_set_active(s, l, &l->entry[n], true);
  return XPTI_RESULT_SUCCESS;
}

static xpti_result_t list_unregister(stream_t *s, cb_list_t *l, any_fn_t cb) {
  cb_entry_t *e = entry_find(l, cb);
  if (!e)
    return XPTI_RESULT_NOTFOUND;
  if (!atomic_load_explicit(&e->active, memory_order_relaxed))
    return XPTI_RESULT_DUPLICATE;
  entry_set_active(s, l, e, false);
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API xpti_result_t xptiRegisterCallback(uint8_t stream, uint16_t trace_type,
                                                   xpti_tracepoint_callback_api_t cb) {
  if (!cb || trace_type == 0 || !stream_registered(stream))
    return XPTI_RESULT_INVALIDARG;
  stream_t *s = &g_fw.stream[stream];
  xpti_result_t r = XPTI_RESULT_FAIL;
  pthread_mutex_lock(&g_fw.lock);
  cb_page_t *page = atomic_load_explicit(&g_page[stream][trace_type >> 8], memory_order_relaxed);
  if (!page && (page = xcalloc(1, sizeof *page)) != NULL)
    atomic_store_explicit(&g_page[stream][trace_type >> 8], page, memory_order_release);
  if (page) {
    r = list_register(s, &page->list[trace_type & 0xff], (any_fn_t)cb);
    page_refresh_sole(stream, trace_type >> 8, page, trace_type & 0xff);
  }
  pthread_mutex_unlock(&g_fw.lock);
  return r;
}

XPTI_EXPORT_API xpti_result_t xptiUnregisterCallback(uint8_t stream, uint16_t trace_type,
                                                     xpti_tracepoint_callback_api_t cb) {
  if (!cb || trace_type == 0 || !stream_registered(stream))
    return XPTI_RESULT_INVALIDARG;
  pthread_mutex_lock(&g_fw.lock);
  xpti_result_t r = list_unregister(&g_fw.stream[stream], list_of(stream, trace_type), (any_fn_t)cb);
  cb_page_t *page = atomic_load_explicit(&g_page[stream][trace_type >> 8], memory_order_relaxed);
  if (page)
    page_refresh_sole(stream, trace_type >> 8, page, trace_type & 0xff);
  pthread_mutex_unlock(&g_fw.lock);
  return r;
}

XPTI_EXPORT_API xpti_result_t xptiRegisterStreamCallback(uint8_t stream,
                                                         xpti_stream_callback_api_t cb) {
  if (!cb || !stream_registered(stream))
    return XPTI_RESULT_INVALIDARG;
  pthread_mutex_lock(&g_fw.lock);
  xpti_result_t r = list_register(&g_fw.stream[stream], &g_fw.stream[stream].every, (any_fn_t)cb);
  stream_refresh_sole(stream);
  pthread_mutex_unlock(&g_fw.lock);
  return r;
}

XPTI_EXPORT_API xpti_result_t xptiUnregisterStreamCallback(uint8_t stream,
                                                           xpti_stream_callback_api_t cb) {
  if (!cb || !stream_registered(stream))
    return XPTI_RESULT_INVALIDARG;
  pthread_mutex_lock(&g_fw.lock);
  stream_t *s = &g_fw.stream[stream];
  xpti_result_t r = list_unregister(s, atomic_load_explicit(&s->every, memory_order_relaxed),
                                    (any_fn_t)cb);
  stream_refresh_sole(stream);
  pthread_mutex_unlock(&g_fw.lock);
  return r;
}

static void list_deactivate_all(stream_t *s, cb_list_t *l) {
  uint32_t n = l ? atomic_load_explicit(&l->count, memory_order_relaxed) : 0;
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load_explicit(&l->entry[i].active, memory_order_relaxed))
      entry_set_active(s, l, &l->entry[i], false);
}

XPTI_EXPORT_API xpti_result_t xptiUnregisterStream(const char *name) {
  const char *copy;
  if (!name)
    return XPTI_RESULT_INVALIDARG;
  if (string_intern(name, &copy) == UINT32_MAX)
    return XPTI_RESULT_FAIL;
  uint8_t id = stream_find(copy);
  if (id == XPTI_INVALID_STREAM_ID)
    return XPTI_RESULT_NOTFOUND;
  stream_t *s = &g_fw.stream[id];
  pthread_mutex_lock(&g_fw.lock);
  bool had_callbacks = atomic_load(&s->active) != 0;
  list_deactivate_all(s, atomic_load_explicit(&s->every, memory_order_relaxed));
  for (int hi = 0; hi < 256 && had_callbacks; hi++) {
    cb_page_t *page = atomic_load_explicit(&g_page[id][hi], memory_order_relaxed);
    for (int lo = 0; page && lo < 256; lo++)
      list_deactivate_all(s, atomic_load_explicit(&page->list[lo], memory_order_relaxed));
  }
  stream_refresh_sole(id);
  pthread_mutex_unlock(&g_fw.lock);
  if (!had_callbacks)
    return XPTI_RESULT_NOTFOUND; /* Intel's answer for a stream nobody listens to */
  /* Intel finishes the stream for every subscriber; not again at exit */
  atomic_store(&s->finalized, atomic_load(&s->initialized));
  if (framework_ensure_init())
    stream_finish(copy);
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API bool xptiCheckTraceEnabled(uint8_t stream, uint16_t trace_type) {
  if (!atomic_load_explicit(&g_fw.enabled, memory_order_relaxed))
    return false;
  if (trace_type == 0)
    return atomic_load_explicit(&g_fw.stream[stream].active, memory_order_relaxed) != 0;
  cb_list_t *l = list_of(stream, trace_type);
  if (l && atomic_load_explicit(&l->active, memory_order_relaxed) != 0)
    return true;
  l = atomic_load_explicit(&g_fw.stream[stream].every, memory_order_acquire);
  return l && atomic_load_explicit(&l->active, memory_order_relaxed) != 0;
}

/* Types whose notification may carry only user data (no event). */
static inline bool event_optional(uint16_t type) {
  switch (type) {
  case XPTI_TRACE_FUNCTION_BEGIN:
  case XPTI_TRACE_FUNCTION_END:
  case XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN:
  case XPTI_TRACE_FUNCTION_WITH_ARGS_END:
  case XPTI_TRACE_MEM_ALLOC_BEGIN:
  case XPTI_TRACE_MEM_ALLOC_END:
  case XPTI_TRACE_MEM_RELEASE_BEGIN:
  case XPTI_TRACE_MEM_RELEASE_END:
  case XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT:
  case XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT:
  case XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE:
  case XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE:
  case XPTI_TRACE_OFFLOAD_ALLOC_ACCESSOR:
  case XPTI_TRACE_DIAGNOSTICS:
    return true;
  default:
    return false;
  }
}

static void call_list(const cb_list_t *l, uint16_t trace_type, xpti_trace_event_data_t *parent,
                      xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  uint32_t n = l ? atomic_load_explicit(&((cb_list_t *)l)->count, memory_order_acquire) : 0;
  for (uint32_t i = 0; i < n; i++) {
    const cb_entry_t *e = &l->entry[i];
    if (LIKELY(atomic_load_explicit(&e->active, memory_order_acquire)))
      ((xpti_tracepoint_callback_api_t)atomic_load_explicit(&e->fn, memory_order_relaxed))(
          trace_type, parent, event, instance, user_data);
  }
}

/* Anything but the stream's only callback or a type's sole one: out of
 * line, and reached by a tail call, so that the common paths save no
 * registers.  Stream-wide callbacks run after per-type ones. */
__attribute__((noinline)) static xpti_result_t
notify_slow(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
            xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  cb_list_t *l = list_of(stream, trace_type);
  cb_list_t *every = atomic_load_explicit(&g_fw.stream[stream].every, memory_order_acquire);
  if (!l && !every)
    return stream_registered(stream) ? XPTI_RESULT_SUCCESS : XPTI_RESULT_INVALIDARG;
  call_list(l, trace_type, parent, event, instance, user_data);
  uint32_t n = every ? atomic_load_explicit(&every->count, memory_order_acquire) : 0;
  for (uint32_t i = 0; i < n; i++) {
    const cb_entry_t *e = &every->entry[i];
    if (LIKELY(atomic_load_explicit(&e->active, memory_order_acquire)))
      ((xpti_stream_callback_api_t)atomic_load_explicit(&e->fn, memory_order_relaxed))(
          stream, trace_type, parent, event, instance, user_data);
  }
  return XPTI_RESULT_SUCCESS;
}

/* A user-defined type's sole callback (on its page), else the lists. */
__attribute__((noinline)) static xpti_result_t
notify_paged(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
             xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  /* g_page as one flat array: one index, no second scaling */
  unsigned at = (unsigned)stream << 8 | (unsigned)trace_type >> 8;
  cb_page_t *page = atomic_load_explicit(&(&g_page[0][0])[at], memory_order_acquire);
  if (UNLIKELY(!page))
    return notify_slow(stream, trace_type, parent, event, instance, user_data);
  any_fn_t sole = atomic_load_explicit(&page->sole[trace_type & 0xff], memory_order_acquire);
  if (UNLIKELY(!sole))
    return notify_slow(stream, trace_type, parent, event, instance, user_data);
  ((xpti_tracepoint_callback_api_t)sole)(trace_type, parent, event, instance, user_data);
  return XPTI_RESULT_SUCCESS;
}

/* The stream has no only callback: a predefined type's sole one, else the
 * rest.  Each path in a function of its own, reached by tail calls, so
 * that gcc shuffles no argument before it knows which order the call
 * needs (the per-type callback's are shifted by one register). */
__attribute__((noinline)) static xpti_result_t
notify_typed(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
             xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  if (LIKELY(trace_type < 256)) {
    any_fn_t sole = atomic_load_explicit(&g_sole0[stream][trace_type], memory_order_acquire);
    if (LIKELY(sole != NULL)) {
      ((xpti_tracepoint_callback_api_t)sole)(trace_type, parent, event, instance, user_data);
      return XPTI_RESULT_SUCCESS;
    }
  }
  return notify_paged(stream, trace_type, parent, event, instance, user_data);
}

/* The callbacks of one notification, once it passed the gate. */
__attribute__((always_inline)) static inline xpti_result_t
notify_go(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
          xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  xpti_stream_callback_api_t only = atomic_load_explicit(&g_fw.only[stream], memory_order_acquire);
  if (LIKELY(only != NULL)) {
    only(stream, trace_type, parent, event, instance, user_data);
    return XPTI_RESULT_SUCCESS;
  }
  return notify_typed(stream, trace_type, parent, event, instance, user_data);
}

/* notify_go again, out of line: notify_gated reaches it by a tail call
 * instead of inlining it, where gcc saved and shuffled registers for its
 * checks (stamps on, one per-type callback: 79 instructions inlined, 69
 * this way; one stream-wide callback: 70, 49). */
__attribute__((noinline)) static xpti_result_t
notify_go_out(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
              xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  return notify_go(stream, trace_type, parent, event, instance, user_data);
}

/* Off, no event, or stamps to count: out of the fast path. */
__attribute__((noinline)) static xpti_result_t
notify_gated(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
             xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  unsigned gate = atomic_load_explicit(&g_fw.gate, memory_order_relaxed);
  if (!(gate & GATE_ENABLED))
    return XPTI_RESULT_FALSE;
  if (!event && !(user_data && event_optional(trace_type)))
    return XPTI_RESULT_INVALIDARG;
  if (gate & GATE_STAMPS)
    ++tls_stamp.seq; /* a new notification: no collector has stamped it */
  return notify_go_out(stream, trace_type, parent, event, instance, user_data);
}

XPTI_EXPORT_API xpti_result_t xptiNotifySubscribers(uint8_t stream, uint16_t trace_type,
                                                    xpti_trace_event_data_t *parent,
                                                    xpti_trace_event_data_t *event,
                                                    uint64_t instance, const void *user_data) {
  /* one load and one test for on, stamps unused and an event given */
  if (UNLIKELY(atomic_load_explicit(&g_fw.gate, memory_order_relaxed) != GATE_ENABLED || !event))
    return notify_gated(stream, trace_type, parent, event, instance, user_data);
  return notify_go(stream, trace_type, parent, event, instance, user_data);
}

/* ---- tests ------------------------------------------------------------ */

XPTI_EXPORT_API void xptiReset(void) {
  pthread_mutex_lock(&g_fw.lock);
  for (int i = 0; i < 256; i++) {
    stream_t *s = &g_fw.stream[i];
    for (int hi = 0; hi < 256; hi++) {
      cb_page_t *page = atomic_exchange(&g_page[i][hi], NULL);
      if (page)
        retire(page); /* lists inside stay reachable only through it */
    }
    cb_list_t *every = atomic_exchange(&s->every, NULL);
    if (every)
      retire(every);
    atomic_store(&g_fw.only[i], NULL);
    for (int t = 0; t < 256; t++)
      if (atomic_load_explicit(&g_sole0[i][t], memory_order_relaxed))
        atomic_store(&g_sole0[i][t], NULL);
    atomic_store(&s->name, NULL);
    atomic_store(&s->active, 0);
    atomic_store(&s->initialized, 0);
    atomic_store(&s->finalized, 0);
  }
  atomic_store(&g_fw.nstreams, 1);
  atomic_store(&g_fw.default_stream, XPTI_INVALID_STREAM_ID);
  atomic_store(&g_fw.default_announced, false);
  pthread_mutex_unlock(&g_fw.lock);
  ids_reset();
  registry_reset();
  intern_reset(&g_objects);
  intern_reset(&g_strings);
  interop_reset();
  default_stream_register();
}
