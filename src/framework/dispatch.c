/* Streams, callbacks, notification, subscribers and the framework's life. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "xptrace/xptrace_protocol.h"

#define MAX_STREAMS 255 /* id 255 is XPTI_INVALID_STREAM_ID */
#define MAX_SUBSCRIBERS 64
#define MAX_TOOLS 255

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

typedef struct stream {
  _Atomic(cb_list_t *) every; /* xptiRegisterStreamCallback: every trace type */
  _Atomic(const char *) name; /* string table copy; NULL = not registered */
  _Atomic uint32_t active;    /* active callbacks on the stream */
  _Atomic uint32_t initialized, finalized;
} stream_t;

typedef struct subscriber {
  void *handle;
  const char *path;
  xpti_trace_init_fn_t init;
  xpti_trace_finish_fn_t finish;
} subscriber_t;

/* Per (stream, high byte of trace type): a power-of-two grid, so that
 * notification finds its page with a shift and one load.  512 KiB of
 * zeroed memory that the kernel maps only where used. */
static _Atomic(cb_page_t *) g_page[256][256];
/* The sole pointers of page 0 (every predefined trace type) again, per
 * stream: notification finds a predefined type's sole callback with one
 * load at stream << 8 | type, no page pointer first (40 -> 27
 * instructions per notification, callgrind).  Another 512 KiB mapped only
 * where used; a stream's row is 2 KiB. */
static _Atomic(any_fn_t) g_sole0[256][256];

static struct {
  _Atomic bool enabled; /* the answer of xptiTraceEnabled */
  /* Some collector asked for xptraceThreadStamp: notifications count. */
  _Atomic bool stamps_used;
  /* Both of the above in one byte, for notification's one test:
   * GATE_ENABLED | GATE_STAMPS; the two flags stay for their readers. */
  _Atomic uint8_t gate;
  stream_t stream[256];
  /* Each stream's one active callback when it is stream-wide (a trace
   * collector's usual case): notification calls it after one load, at
   * an index scaled by 8 in one addressing mode (stream_t is 40 bytes). */
  _Atomic(xpti_stream_callback_api_t) only[256];
  _Atomic uint32_t nstreams;
  _Atomic uint8_t default_stream;
  pthread_mutex_t lock; /* registration of streams, callbacks, tools */
  subscriber_t sub[MAX_SUBSCRIBERS];
  int nsubs;
  bool env_disabled;
  _Atomic(const char *) tool[MAX_TOOLS + 1]; /* tool id -> name */
  _Atomic uint64_t next_unique_id;
  _Atomic bool default_announced; /* "xpti.framework" initialised */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .default_stream = XPTI_INVALID_STREAM_ID,
       .nstreams = 1}; /* id 0 is never a stream: Intel's headers read it as none */

#define GATE_ENABLED 1u
#define GATE_STAMPS 2u
static void set_enabled(bool on) {
  atomic_store(&g.enabled, on);
  if (on)
    atomic_fetch_or(&g.gate, GATE_ENABLED);
  else
    atomic_fetch_and(&g.gate, (uint8_t)~GATE_ENABLED);
}

static __thread uint64_t tls_universal_id __attribute__((tls_model("initial-exec")));
static __thread xptrace_stamp_t tls_stamp __attribute__((tls_model("initial-exec")));
static __thread const char *tls_stash_key __attribute__((tls_model("initial-exec")));
static __thread uint64_t tls_stash_value __attribute__((tls_model("initial-exec")));

void report_once(_Atomic bool *said, const char *fmt, ...) {
  if (said && atomic_exchange(said, true))
    return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if (n > (int)sizeof line - 2)
    n = (int)sizeof line - 2;
  line[n++] = '\n';
  fwrite(line, 1, (size_t)n, stderr);
}

/* ---- start-up -------------------------------------------------------- */

/* XPTI_SUBSCRIBERS is read once; each message about it is printed once,
 * however many times a path is listed or how many are over the limit. */
#define MAX_TRIED (2 * MAX_SUBSCRIBERS)
typedef struct load_state {
  const char *tried[MAX_TRIED]; /* paths attempted, to skip repeats */
  int ntried;
  size_t over;                  /* listed beyond MAX_SUBSCRIBERS */
  const char *first_over;
} load_state_t;

static void load_subscriber(char *path, void *ctx) {
  load_state_t *st = ctx;
  if (g.nsubs == MAX_SUBSCRIBERS) {
    if (st->over++ == 0)
      st->first_over = path;
    return;
  }
  for (int i = 0; i < st->ntried; i++)
    if (!strcmp(st->tried[i], path))
      return; /* listed twice: tried (and reported) once */
  if (st->ntried < MAX_TRIED)
    st->tried[st->ntried++] = path;
  /* Lazy: a subscriber built against a newer API that calls a function
   * we lack still loads, as with Intel's dispatcher. */
  void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    report_once(NULL, "xpti: cannot load subscriber '%s': %s", path, dlerror());
    return;
  }
  xpti_trace_init_fn_t init = (xpti_trace_init_fn_t)dlsym(h, "xptiTraceInit");
  xpti_trace_finish_fn_t finish = (xpti_trace_finish_fn_t)dlsym(h, "xptiTraceFinish");
  if (!init || !finish) {
    report_once(NULL, "xpti: subscriber '%s' lacks %s; not loaded", path,
                !init ? "xptiTraceInit" : "xptiTraceFinish");
    dlclose(h);
    return;
  }
  for (int i = 0; i < g.nsubs; i++)
    if (g.sub[i].handle == h) { /* the same library under another name */
      dlclose(h);
      return;
    }
  g.sub[g.nsubs++] = (subscriber_t){h, strdup(path), init, finish};
}

static void load_subscribers(const char *list) {
  char *copy = strdup(list);
  if (!copy)
    return;
  load_state_t st = {.ntried = 0};
  config_each_item(copy, load_subscriber, &st);
  if (st.over)
    report_once(NULL, "xpti: at most %d subscribers; %zu more not loaded, the first '%s'",
                MAX_SUBSCRIBERS, st.over, st.first_over);
  free(copy);
}

/* Streams whose subscribers' init or finish runs on this thread: a
 * subscriber that initializes or finalizes its stream from there
 * (directly or through another call) must not start them again (finish
 * recursed until the stack overflowed). */
enum { IN_STREAM_MAX = 8 };
typedef struct {
  const char *key[IN_STREAM_MAX];
  unsigned n;
} in_stream_t;
static __thread in_stream_t tls_in_init __attribute__((tls_model("initial-exec")));
static __thread in_stream_t tls_in_finish __attribute__((tls_model("initial-exec")));

/* Enters `stream` on `in`; false: already inside it on this thread. */
static bool in_stream_enter(in_stream_t *in, const char *stream, unsigned *depth) {
  const char *key = NULL;
  if (string_intern(stream, &key) == UINT32_MAX)
    key = NULL;
  for (unsigned i = 0; key && i < in->n && i < IN_STREAM_MAX; i++)
    if (in->key[i] == key)
      return false;
  *depth = in->n++;
  if (*depth < IN_STREAM_MAX)
    in->key[*depth] = key;
  return true;
}

static void finish_pending_streams(void);
static void finish_stream(const char *stream);

/* No lock held: subscribers register streams and callbacks from here. */
static void init_stream(uint32_t major, uint32_t minor, const char *version, const char *stream) {
  unsigned depth;
  if (!in_stream_enter(&tls_in_init, stream, &depth))
    return;
  for (int i = 0; i < g.nsubs; i++)
    g.sub[i].init(major, minor, version, stream);
  tls_in_init.n = depth;
}

/* Intel initialises its default stream "xpti.framework" (1.0.0) once,
 * just before the first other stream; xptiFinalize finishes it after the
 * first other stream it finishes (and at exit if never). */
static void announce_default_stream(uint8_t id) {
  uint8_t def = atomic_load(&g.default_stream);
  if (id != def && def != XPTI_INVALID_STREAM_ID && !atomic_exchange(&g.default_announced, true)) {
    atomic_fetch_add(&g.stream[def].initialized, 1);
    init_stream(1, 0, "1.0.0", atomic_load(&g.stream[def].name));
  }
}

static void framework_init_once(void) {
  const char *enable = getenv("XPTI_TRACE_ENABLE");
  int on = config_trace_enable(enable);
  if (on < 0)
    report_once(NULL, "xpti: XPTI_TRACE_ENABLE='%s' is not 1/true/0/false; tracing disabled",
                enable);
  g.env_disabled = on != 1;
  if (!g.env_disabled) {
    const char *subs = secure_getenv("XPTI_SUBSCRIBERS");
    if (subs)
      load_subscribers(subs);
  }
  set_enabled(!g.env_disabled && g.nsubs > 0);
  atexit(finish_pending_streams); /* runs before any library destructor */
}

/* Initialisation runs once, under g_init_lock, on the first thread that
 * asks.  Subscribers' constructors run inside it (dlopen) and may call
 * any API function: on the loading thread a call that needs the
 * subscribers answers its default instead of waiting for itself (what
 * pthread_once would do, forever).  Other threads wait for the load. */
enum { INIT_NONE, INIT_LOADING, INIT_DONE };
static _Atomic int g_init_state;
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool tls_loading __attribute__((tls_model("initial-exec")));

/* Set on a thread that gave up waiting for another's load. */
static __thread bool tls_gave_up __attribute__((tls_model("initial-exec")));

bool framework_ensure_init(void) {
  if (LIKELY(atomic_load_explicit(&g_init_state, memory_order_acquire) == INIT_DONE))
    return true;
  if (tls_loading || tls_gave_up)
    return false;
  /* Waiting for another thread's load, but not forever: a subscriber's
   * constructor may itself wait for this thread (one it started and
   * joins).  Past a second this thread answers as the loading one does
   * until the load is done. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 1;
  int rc;
  while ((rc = pthread_mutex_timedlock(&g_init_lock, &until)) == EINTR)
    ;
  if (rc != 0) {
    if (atomic_load_explicit(&g_init_state, memory_order_acquire) == INIT_DONE)
      return true;
    static _Atomic bool said;
    tls_gave_up = true;
    report_once(&said, "xpti: a thread waited 1 s for the subscribers to load (a subscriber's "
                      "constructor waiting for it?); it sees tracing off until they are loaded");
    return false;
  }
  if (atomic_load_explicit(&g_init_state, memory_order_relaxed) != INIT_DONE) {
    tls_loading = true;
    atomic_store(&g_init_state, INIT_LOADING);
    framework_init_once();
    atomic_store_explicit(&g_init_state, INIT_DONE, memory_order_release);
    tls_loading = false;
  }
  pthread_mutex_unlock(&g_init_lock);
  return true;
}

/* fork: the child gets every lock free and every table consistent.
 * prepare takes the registration locks in the order the code nests them
 * (see internal.h).  It does not wait for a subscriber load in another
 * thread: glibc runs prepare handlers holding its atfork lock, which that
 * load needs (a subscriber's constructor registering its own handlers,
 * dlclose of a refused library).  A child forked during such a load
 * finds the loader gone: it takes over a fresh init lock, with tracing
 * off, as the subscribers' state is unknown. */
static void fork_prepare(void) {
  pthread_mutex_lock(&g.lock);
  registry_fork_lock();
  tables_fork_lock();
}

static void fork_unlock(bool child) {
  tables_fork_unlock(child);
  registry_fork_unlock();
  pthread_mutex_unlock(&g.lock);
}

static void fork_parent(void) { fork_unlock(false); }

static void fork_child(void) {
  fork_unlock(true);
  if (tls_loading)
    return; /* forked from a constructor: this thread finishes the load */
  int state = atomic_load(&g_init_state);
  if (state != INIT_DONE) /* a lock another thread may have held */
    pthread_mutex_init(&g_init_lock, NULL);
  if (state == INIT_LOADING) {
    set_enabled(false);
    atomic_store(&g_init_state, INIT_DONE);
  }
}

/* Intel's default stream, id 1, before any subscriber can register one. */
static void default_stream_register(void) {
  uint8_t id = xptiRegisterStream(XPTI_DEFAULT_STREAM_NAME);
  atomic_store(&g.default_stream, id);
}

__attribute__((constructor)) static void framework_constructor(void) {
  intern_init(&g_strings);
  intern_init(&g_objects);
  registry_init();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  default_stream_register();
  framework_ensure_init();
}

XPTI_EXPORT_API xpti_result_t xptiFrameworkInitialize(void) {
  return framework_ensure_init() ? XPTI_RESULT_SUCCESS : XPTI_RESULT_FALSE;
}

XPTI_EXPORT_API xpti_result_t xptiFrameworkFinalize(void) {
  if (!framework_ensure_init())
    return XPTI_RESULT_FALSE;
  finish_pending_streams();
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API bool xptiTraceEnabled(void) {
  return atomic_load_explicit(&g.enabled, memory_order_relaxed);
}

XPTI_EXPORT_API bool xptiTraceTryToEnable(void) { return xptiTraceEnabled(); }

XPTI_EXPORT_API void xptiForceSetTraceEnabled(bool enabled) { set_enabled(enabled); }

/* xptrace's extension for direct recorders (xptrace/xptrace_protocol.h):
 * the words notification reads first. */
XPTI_EXPORT_API const void *xptraceStreamSoleListener(uint8_t stream) {
  return (const void *)&g.only[stream];
}

XPTI_EXPORT_API const void *xptraceTraceEnabledWord(void) { return (const void *)&g.enabled; }

XPTI_EXPORT_API xptrace_stamp_t *xptraceThreadStamp(void) {
  /* Before the caller can publish a stamp (program order on this thread),
   * so a stamp is never matched to a later notification. */
  if (!atomic_load_explicit(&g.stamps_used, memory_order_relaxed)) {
    atomic_store_explicit(&g.stamps_used, true, memory_order_relaxed);
    atomic_fetch_or_explicit(&g.gate, GATE_STAMPS, memory_order_relaxed);
  }
  return &tls_stamp;
}

/* ---- streams ----------------------------------------------------------- */

static uint8_t stream_find(const char *table_name) {
  uint32_t n = atomic_load_explicit(&g.nstreams, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load_explicit(&g.stream[i].name, memory_order_acquire) == table_name)
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
  pthread_mutex_lock(&g.lock);
  id = stream_find(copy);
  if (id == XPTI_INVALID_STREAM_ID) {
    uint32_t n = atomic_load_explicit(&g.nstreams, memory_order_relaxed);
    if (n < MAX_STREAMS) {
      atomic_store_explicit(&g.stream[n].name, copy, memory_order_release);
      atomic_store_explicit(&g.nstreams, n + 1, memory_order_release);
      id = (uint8_t)n;
    } else {
      static _Atomic bool said;
      report_once(&said, "xpti: more than %d streams; '%s' not registered", MAX_STREAMS, name);
    }
  }
  pthread_mutex_unlock(&g.lock);
  return id;
}

static inline bool stream_registered(uint8_t id) {
  return atomic_load_explicit(&g.stream[id].name, memory_order_acquire) != NULL;
}

XPTI_EXPORT_API const char *xptiLookupStreamName(uint8_t stream) {
  return atomic_load_explicit(&g.stream[stream].name, memory_order_acquire);
}

XPTI_EXPORT_API uint8_t xptiGetDefaultStreamID(void) {
  return atomic_load_explicit(&g.default_stream, memory_order_relaxed);
}

/* Intel's range (any id below 128, registered or not: a stream may be
 * registered after it is made the default), 0 excepted: never a stream. */
XPTI_EXPORT_API xpti_result_t xptiSetDefaultStreamID(uint8_t stream) {
  if (stream == 0 || (stream >= 128 && !stream_registered(stream)))
    return XPTI_RESULT_INVALIDARG;
  atomic_store_explicit(&g.default_stream, stream, memory_order_relaxed);
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

/* g.lock held: the stream's only callback again after any change of its
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
  atomic_store_explicit(&g.only[s - g.stream], only, memory_order_release);
}

/* g.lock held: the sole pointer of one list, from its entries; none while
 * the stream has an active stream-wide callback. */
static void page_refresh_sole(uint8_t stream, unsigned hi, cb_page_t *page, unsigned lo) {
  const stream_t *s = &g.stream[stream];
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

/* g.lock held: after a change of stream-wide callbacks, every list's. */
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

/* Add cb to the list published at *where (g.lock held): DUPLICATE if it is
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
  stream_t *s = &g.stream[stream];
  xpti_result_t r = XPTI_RESULT_FAIL;
  pthread_mutex_lock(&g.lock);
  cb_page_t *page = atomic_load_explicit(&g_page[stream][trace_type >> 8], memory_order_relaxed);
  if (!page && (page = xcalloc(1, sizeof *page)) != NULL)
    atomic_store_explicit(&g_page[stream][trace_type >> 8], page, memory_order_release);
  if (page) {
    r = list_register(s, &page->list[trace_type & 0xff], (any_fn_t)cb);
    page_refresh_sole(stream, trace_type >> 8, page, trace_type & 0xff);
  }
  pthread_mutex_unlock(&g.lock);
  return r;
}

XPTI_EXPORT_API xpti_result_t xptiUnregisterCallback(uint8_t stream, uint16_t trace_type,
                                                     xpti_tracepoint_callback_api_t cb) {
  if (!cb || trace_type == 0 || !stream_registered(stream))
    return XPTI_RESULT_INVALIDARG;
  pthread_mutex_lock(&g.lock);
  xpti_result_t r = list_unregister(&g.stream[stream], list_of(stream, trace_type), (any_fn_t)cb);
  cb_page_t *page = atomic_load_explicit(&g_page[stream][trace_type >> 8], memory_order_relaxed);
  if (page)
    page_refresh_sole(stream, trace_type >> 8, page, trace_type & 0xff);
  pthread_mutex_unlock(&g.lock);
  return r;
}

XPTI_EXPORT_API xpti_result_t xptiRegisterStreamCallback(uint8_t stream,
                                                         xpti_stream_callback_api_t cb) {
  if (!cb || !stream_registered(stream))
    return XPTI_RESULT_INVALIDARG;
  pthread_mutex_lock(&g.lock);
  xpti_result_t r = list_register(&g.stream[stream], &g.stream[stream].every, (any_fn_t)cb);
  stream_refresh_sole(stream);
  pthread_mutex_unlock(&g.lock);
  return r;
}

XPTI_EXPORT_API xpti_result_t xptiUnregisterStreamCallback(uint8_t stream,
                                                           xpti_stream_callback_api_t cb) {
  if (!cb || !stream_registered(stream))
    return XPTI_RESULT_INVALIDARG;
  pthread_mutex_lock(&g.lock);
  stream_t *s = &g.stream[stream];
  xpti_result_t r = list_unregister(s, atomic_load_explicit(&s->every, memory_order_relaxed),
                                    (any_fn_t)cb);
  stream_refresh_sole(stream);
  pthread_mutex_unlock(&g.lock);
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
  stream_t *s = &g.stream[id];
  pthread_mutex_lock(&g.lock);
  bool had_callbacks = atomic_load(&s->active) != 0;
  list_deactivate_all(s, atomic_load_explicit(&s->every, memory_order_relaxed));
  for (int hi = 0; hi < 256 && had_callbacks; hi++) {
    cb_page_t *page = atomic_load_explicit(&g_page[id][hi], memory_order_relaxed);
    for (int lo = 0; page && lo < 256; lo++)
      list_deactivate_all(s, atomic_load_explicit(&page->list[lo], memory_order_relaxed));
  }
  stream_refresh_sole(id);
  pthread_mutex_unlock(&g.lock);
  if (!had_callbacks)
    return XPTI_RESULT_NOTFOUND; /* Intel's answer for a stream nobody listens to */
  /* Intel finishes the stream for every subscriber; not again at exit */
  atomic_store(&s->finalized, atomic_load(&s->initialized));
  if (framework_ensure_init())
    finish_stream(copy);
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API bool xptiCheckTraceEnabled(uint8_t stream, uint16_t trace_type) {
  if (!atomic_load_explicit(&g.enabled, memory_order_relaxed))
    return false;
  if (trace_type == 0)
    return atomic_load_explicit(&g.stream[stream].active, memory_order_relaxed) != 0;
  cb_list_t *l = list_of(stream, trace_type);
  if (l && atomic_load_explicit(&l->active, memory_order_relaxed) != 0)
    return true;
  l = atomic_load_explicit(&g.stream[stream].every, memory_order_acquire);
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
  cb_list_t *every = atomic_load_explicit(&g.stream[stream].every, memory_order_acquire);
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

/* A user-defined type's sole callback, else the lists: the stream had no
 * only one, the type no sole one in g_sole0.
 * Apart from xptiNotifySubscribers, so that the stream-wide path there
 * keeps its arguments where they came (gcc moved them for this call's
 * order first, then back: 13 instructions of shuffling). */
__attribute__((noinline)) static xpti_result_t
notify_typed(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
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

/* The callbacks of one notification, once it passed the gate. */
__attribute__((always_inline)) static inline xpti_result_t
notify_go(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
          xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  xpti_stream_callback_api_t only = atomic_load_explicit(&g.only[stream], memory_order_acquire);
  if (LIKELY(only != NULL)) {
    only(stream, trace_type, parent, event, instance, user_data);
    return XPTI_RESULT_SUCCESS;
  }
  if (LIKELY(trace_type < 256)) {
    any_fn_t sole = atomic_load_explicit(&g_sole0[stream][trace_type], memory_order_acquire);
    if (LIKELY(sole != NULL)) {
      ((xpti_tracepoint_callback_api_t)sole)(trace_type, parent, event, instance, user_data);
      return XPTI_RESULT_SUCCESS;
    }
  }
  return notify_typed(stream, trace_type, parent, event, instance, user_data);
}

/* Off, no event, or stamps to count: out of the fast path. */
__attribute__((noinline)) static xpti_result_t
notify_gated(uint8_t stream, uint16_t trace_type, xpti_trace_event_data_t *parent,
             xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  unsigned gate = atomic_load_explicit(&g.gate, memory_order_relaxed);
  if (!(gate & GATE_ENABLED))
    return XPTI_RESULT_FALSE;
  if (!event && !(user_data && event_optional(trace_type)))
    return XPTI_RESULT_INVALIDARG;
  if (gate & GATE_STAMPS)
    ++tls_stamp.seq; /* a new notification: no collector has stamped it */
  return notify_go(stream, trace_type, parent, event, instance, user_data);
}

XPTI_EXPORT_API xpti_result_t xptiNotifySubscribers(uint8_t stream, uint16_t trace_type,
                                                    xpti_trace_event_data_t *parent,
                                                    xpti_trace_event_data_t *event,
                                                    uint64_t instance, const void *user_data) {
  /* one load and one test for on, stamps unused and an event given */
  if (UNLIKELY(atomic_load_explicit(&g.gate, memory_order_relaxed) != GATE_ENABLED || !event))
    return notify_gated(stream, trace_type, parent, event, instance, user_data);
  return notify_go(stream, trace_type, parent, event, instance, user_data);
}

/* ---- stream life: subscribers' init and finish ----------------------- */

XPTI_EXPORT_API xpti_result_t xptiInitialize(const char *stream, uint32_t major, uint32_t minor,
                                             const char *version) {
  if (!stream || !*stream)
    return XPTI_RESULT_INVALIDARG;
  if (!framework_ensure_init()) /* called back while subscribers load */
    return XPTI_RESULT_FALSE;
  if (!xptiTraceEnabled()) /* no subscriber: nothing to announce; Intel's says SUCCESS */
    return XPTI_RESULT_SUCCESS;
  uint8_t id = xptiRegisterStream(stream);
  announce_default_stream(id);
  if (id != XPTI_INVALID_STREAM_ID)
    atomic_fetch_add(&g.stream[id].initialized, 1);
  init_stream(major, minor, version, stream);
  return XPTI_RESULT_SUCCESS;
}

static void finish_stream(const char *stream) {
  unsigned depth;
  if (!in_stream_enter(&tls_in_finish, stream, &depth))
    return;
  for (int i = 0; i < g.nsubs; i++)
    g.sub[i].finish(stream);
  tls_in_finish.n = depth;
}

/* Finish a stream initialised more often than finalised, once. */
static void finish_if_pending(stream_t *s) {
  uint32_t init = atomic_load(&s->initialized);
  uint32_t fin = atomic_load(&s->finalized);
  while (fin < init) {
    if (atomic_compare_exchange_strong(&s->finalized, &fin, init)) {
      finish_stream(atomic_load(&s->name));
      break;
    }
  }
}

XPTI_EXPORT_API void xptiFinalize(const char *stream) {
  if (!stream || !*stream || !framework_ensure_init())
    return;
  const char *copy;
  if (string_intern(stream, &copy) == UINT32_MAX)
    return;
  uint8_t id = stream_find(copy);
  if (id != XPTI_INVALID_STREAM_ID)
    atomic_fetch_add(&g.stream[id].finalized, 1);
  finish_stream(stream);
  /* Intel finishes its default stream with the first stream finalised */
  uint8_t def = atomic_load(&g.default_stream);
  if (id != def && def != XPTI_INVALID_STREAM_ID && atomic_load(&g.default_announced))
    finish_if_pending(&g.stream[def]);
}

/* At exit and at xptiFrameworkFinalize: streams announced but never
 * finalised get their finish, so subscribers can write what they hold. */
static void finish_pending_streams(void) {
  uint32_t n = atomic_load(&g.nstreams);
  for (uint32_t i = 1; i < n; i++)
    finish_if_pending(&g.stream[i]);
}

/* ---- user-defined types --------------------------------------------- */

static uint8_t tool_id(const char *tool_name) {
  const char *copy;
  if (string_intern(tool_name, &copy) == UINT32_MAX)
    return 0;
  for (int i = 1; i <= MAX_TOOLS; i++) {
    const char *t = atomic_load_explicit(&g.tool[i], memory_order_acquire);
    if (t == copy)
      return (uint8_t)i;
    if (!t) { /* first free: claim it under the lock */
      pthread_mutex_lock(&g.lock);
      for (; i <= MAX_TOOLS; i++) {
        t = atomic_load_explicit(&g.tool[i], memory_order_relaxed);
        if (t == copy || !t) {
          if (!t)
            atomic_store_explicit(&g.tool[i], copy, memory_order_release);
          pthread_mutex_unlock(&g.lock);
          return (uint8_t)i;
        }
      }
      pthread_mutex_unlock(&g.lock);
      break;
    }
  }
  static _Atomic bool said;
  report_once(&said, "xpti: more than %d tools register user-defined types", MAX_TOOLS);
  return 0;
}

static uint16_t user_defined(const char *tool_name, uint8_t value) {
  if (!tool_name || value > 0x7f)
    return 0;
  uint8_t id = tool_id(tool_name);
  return id ? (uint16_t)(XPTI_PACK_TOOL_ID(id) | XPTI_USER_DEFINED(value)) : 0;
}

XPTI_EXPORT_API uint16_t xptiRegisterUserDefinedTracePoint(const char *tool_name,
                                                           uint8_t user_defined_tp) {
  return user_defined(tool_name, user_defined_tp);
}

XPTI_EXPORT_API uint16_t xptiRegisterUserDefinedEventType(const char *tool_name,
                                                          uint8_t user_defined_event) {
  return user_defined(tool_name, user_defined_event);
}

XPTI_EXPORT_API const char *xptiLookupToolName(uint8_t id) {
  return id ? atomic_load_explicit(&g.tool[id], memory_order_acquire) : NULL;
}

/* ---- identifiers and thread-local state ----------------------------- */

XPTI_EXPORT_API uint64_t xptiGetUniqueId(void) {
  return atomic_fetch_add_explicit(&g.next_unique_id, 1, memory_order_relaxed) + 1;
}

XPTI_EXPORT_API uint64_t xptiGetUniversalId(void) { return tls_universal_id; }

XPTI_EXPORT_API void xptiSetUniversalId(uint64_t universal_id) {
  tls_universal_id = universal_id;
}

XPTI_EXPORT_API xpti_result_t xptiStashTuple(const char *key, uint64_t value) {
  if (!key)
    return XPTI_RESULT_INVALIDARG;
  const char *copy; /* a second stash replaces the first, as Intel's does */
  if (string_intern(key, &copy) == UINT32_MAX)
    return XPTI_RESULT_FAIL;
  tls_stash_key = copy;
  tls_stash_value = value;
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API xpti_result_t xptiGetStashedTuple(char **key, uint64_t *value) {
  if (!key || !value)
    return XPTI_RESULT_INVALIDARG;
  if (!tls_stash_key)
    return XPTI_RESULT_NOTFOUND;
  *key = (char *)tls_stash_key;
  *value = tls_stash_value;
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API void xptiUnstashTuple(void) { tls_stash_key = NULL; }

/* ---- tests ------------------------------------------------------------ */

XPTI_EXPORT_API void xptiReset(void) {
  pthread_mutex_lock(&g.lock);
  for (int i = 0; i < 256; i++) {
    stream_t *s = &g.stream[i];
    for (int hi = 0; hi < 256; hi++) {
      cb_page_t *page = atomic_exchange(&g_page[i][hi], NULL);
      if (page)
        retire(page); /* lists inside stay reachable only through it */
    }
    cb_list_t *every = atomic_exchange(&s->every, NULL);
    if (every)
      retire(every);
    atomic_store(&g.only[i], NULL);
    for (int t = 0; t < 256; t++)
      if (atomic_load_explicit(&g_sole0[i][t], memory_order_relaxed))
        atomic_store(&g_sole0[i][t], NULL);
    atomic_store(&s->name, NULL);
    atomic_store(&s->active, 0);
    atomic_store(&s->initialized, 0);
    atomic_store(&s->finalized, 0);
  }
  atomic_store(&g.nstreams, 1);
  atomic_store(&g.default_stream, XPTI_INVALID_STREAM_ID);
  atomic_store(&g.default_announced, false);
  for (int i = 0; i <= MAX_TOOLS; i++)
    atomic_store(&g.tool[i], NULL);
  pthread_mutex_unlock(&g.lock);
  registry_reset();
  intern_reset(&g_objects);
  intern_reset(&g_strings);
  tls_stash_key = NULL;
  tls_universal_id = 0;
  interop_reset();
  default_stream_register();
}
