/* Subscribers, start-up, fork, and the life of streams: their
 * subscribers' init and finish. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dispatch.h"

void fw_set_enabled(bool on) {
  atomic_store(&g_fw.enabled, on);
  if (on)
    atomic_fetch_or(&g_fw.gate, GATE_ENABLED);
  else
    atomic_fetch_and(&g_fw.gate, (uint8_t)~GATE_ENABLED);
}

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
  if (g_fw.nsubs == MAX_SUBSCRIBERS) {
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
  for (int i = 0; i < g_fw.nsubs; i++)
    if (g_fw.sub[i].handle == h) { /* the same library under another name */
      dlclose(h);
      return;
    }
  g_fw.sub[g_fw.nsubs++] = (subscriber_t){h, strdup(path), init, finish};
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

/* No lock held: subscribers register streams and callbacks from here. */
static void init_stream(uint32_t major, uint32_t minor, const char *version, const char *stream) {
  unsigned depth;
  if (!in_stream_enter(&tls_in_init, stream, &depth))
    return;
  for (int i = 0; i < g_fw.nsubs; i++)
    g_fw.sub[i].init(major, minor, version, stream);
  tls_in_init.n = depth;
}

/* Intel initialises its default stream "xpti.framework" (1.0.0) once,
 * just before the first other stream; xptiFinalize finishes it after the
 * first other stream it finishes (and at exit if never). */
static void announce_default_stream(uint8_t id) {
  uint8_t def = atomic_load(&g_fw.default_stream);
  if (id != def && def != XPTI_INVALID_STREAM_ID && !atomic_exchange(&g_fw.default_announced, true)) {
    atomic_fetch_add(&g_fw.stream[def].initialized, 1);
    init_stream(1, 0, "1.0.0", atomic_load(&g_fw.stream[def].name));
  }
}

static void framework_init_once(void) {
  const char *enable = getenv("XPTI_TRACE_ENABLE");
  int on = config_trace_enable(enable);
  if (on < 0)
    report_once(NULL, "xpti: XPTI_TRACE_ENABLE='%s' is not 1/true/0/false; tracing disabled",
                enable);
  g_fw.env_disabled = on != 1;
  if (!g_fw.env_disabled) {
    const char *subs = secure_getenv("XPTI_SUBSCRIBERS");
    if (subs)
      load_subscribers(subs);
  }
  fw_set_enabled(!g_fw.env_disabled && g_fw.nsubs > 0);
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
  pthread_mutex_lock(&g_fw.lock);
  registry_fork_lock();
  tables_fork_lock();
}

static void fork_unlock(bool child) {
  tables_fork_unlock(child);
  registry_fork_unlock();
  pthread_mutex_unlock(&g_fw.lock);
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
    fw_set_enabled(false);
    atomic_store(&g_init_state, INIT_DONE);
  }
}

/* Intel's default stream, id 1, before any subscriber can register one. */
void default_stream_register(void) {
  uint8_t id = xptiRegisterStream(XPTI_DEFAULT_STREAM_NAME);
  atomic_store(&g_fw.default_stream, id);
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
  return atomic_load_explicit(&g_fw.enabled, memory_order_relaxed);
}

XPTI_EXPORT_API bool xptiTraceTryToEnable(void) { return xptiTraceEnabled(); }

XPTI_EXPORT_API void xptiForceSetTraceEnabled(bool enabled) { fw_set_enabled(enabled); }

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
    atomic_fetch_add(&g_fw.stream[id].initialized, 1);
  init_stream(major, minor, version, stream);
  return XPTI_RESULT_SUCCESS;
}

void stream_finish(const char *stream) {
  unsigned depth;
  if (!in_stream_enter(&tls_in_finish, stream, &depth))
    return;
  for (int i = 0; i < g_fw.nsubs; i++)
    g_fw.sub[i].finish(stream);
  tls_in_finish.n = depth;
}

/* Finish a stream initialised more often than finalised, once. */
static void finish_if_pending(stream_t *s) {
  uint32_t init = atomic_load(&s->initialized);
  uint32_t fin = atomic_load(&s->finalized);
  while (fin < init) {
    if (atomic_compare_exchange_strong(&s->finalized, &fin, init)) {
      stream_finish(atomic_load(&s->name));
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
    atomic_fetch_add(&g_fw.stream[id].finalized, 1);
  stream_finish(stream);
  /* Intel finishes its default stream with the first stream finalised */
  uint8_t def = atomic_load(&g_fw.default_stream);
  if (id != def && def != XPTI_INVALID_STREAM_ID && atomic_load(&g_fw.default_announced))
    finish_if_pending(&g_fw.stream[def]);
}

/* At exit and at xptiFrameworkFinalize: streams announced but never
 * finalised get their finish, so subscribers can write what they hold. */
static void finish_pending_streams(void) {
  uint32_t n = atomic_load(&g_fw.nstreams);
  for (uint32_t i = 1; i < n; i++)
    finish_if_pending(&g_fw.stream[i]);
}

