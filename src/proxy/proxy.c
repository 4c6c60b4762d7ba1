/* libxpti.a — the proxy: one stub per API function, forwarding to the
 * dispatcher named by XPTI_FRAMEWORK_DISPATCHER.
 *
 * Every stub goes through one pointer of one hidden table.  A pointer
 * starts at an init trampoline of the same signature; the trampoline
 * loads the dispatcher once, after which every pointer holds either the
 * dispatcher's function or NULL.  A stub is therefore one acquire load
 * (a plain load on x86-64), a test and a branch; with tracing off it
 * returns the documented default at once.  Everything is generated from
 * src/api.def. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

/* ---- types and the table ------------------------------------------- */

#define XPTI_API(ret, name, params, args, off) typedef ret(*xpti_proxy_fn_##name) params;
#define XPTI_API_VOID(name, params, args) typedef void(*xpti_proxy_fn_##name) params;
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID

/* Static, so the table is reached PC-relative, never through the GOT. */
static struct xpti_proxy_table {
#define XPTI_API(ret, name, params, args, off) _Atomic(xpti_proxy_fn_##name) name;
#define XPTI_API_VOID(name, params, args) _Atomic(xpti_proxy_fn_##name) name;
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID
} xpti_proxy_table;

/* The same pointers, plain, filled by dlsym before publication. */
struct xpti_proxy_resolved {
#define XPTI_API(ret, name, params, args, off) xpti_proxy_fn_##name name;
#define XPTI_API_VOID(name, params, args) xpti_proxy_fn_##name name;
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID
};

/* ---- loading ----------------------------------------------------------- */

enum xpti_proxy_state {
  XPTI_PROXY_UNTRIED = 0, /* table holds trampolines */
  XPTI_PROXY_OFF,         /* table holds NULLs; TryToEnable may retry */
  XPTI_PROXY_LOADED       /* table holds the dispatcher's functions */
};

/* The mutex serialises the first load with xptiTraceTryToEnable; it is
 * taken only by trampolines and TryToEnable, never by a stub. */
static pthread_mutex_t xpti_proxy_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int xpti_proxy_state = XPTI_PROXY_UNTRIED;
/* Set while this thread loads: a call made from inside dlopen (a
 * dispatcher constructor reaching back) gets the default instead of
 * deadlocking on the mutex. */
static _Thread_local int xpti_proxy_loading;
/* Set while any thread loads (read by the fork child handler). */
static _Atomic int xpti_proxy_load_elsewhere;
/* Set in a child forked during another thread's load: never load again. */
static int xpti_proxy_gave_up;
/* Last message printed, so a retry that fails the same way stays quiet. */
static char xpti_proxy_last_message[512];

static void xpti_proxy_report(const char *message) {
  if (strcmp(message, xpti_proxy_last_message) == 0)
    return;
  snprintf(xpti_proxy_last_message, sizeof xpti_proxy_last_message, "%s", message);
  fprintf(stderr, "%s\n", message);
}

static void xpti_proxy_publish(const struct xpti_proxy_resolved *fns) {
#define XPTI_API(ret, name, params, args, off)                                              \
  atomic_store_explicit(&xpti_proxy_table.name, fns->name, memory_order_release);
#define XPTI_API_VOID(name, params, args)                                                   \
  atomic_store_explicit(&xpti_proxy_table.name, fns->name, memory_order_release);
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID
}

/* Returns 1 when tracing may be on, 0 when XPTI_TRACE_ENABLE turns it off. */
static int xpti_proxy_enable_requested(void) {
  const char *value = getenv("XPTI_TRACE_ENABLE");
  char message[512];
  if (!value || strcmp(value, "1") == 0 || strcmp(value, "true") == 0)
    return 1;
  if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0)
    return 0;
  snprintf(message, sizeof message,
           "xpti: XPTI_TRACE_ENABLE='%s' is not 1/true/0/false; tracing disabled", value);
  xpti_proxy_report(message);
  return 0;
}

/* xptrace's extensions: optional, so that any dispatcher with Intel's 48
 * entry points (tests/proxy/intel_api_names.txt) is accepted; a stub of
 * one the dispatcher lacks returns its default. */
static const char *const xpti_proxy_optional[] = {
    "xptiRegisterStreamCallback", "xptiUnregisterStreamCallback", "xptiLookupStreamName",
    "xptiLookupToolName",         "xptiLookupMetadata",           "xptiMetadataCount",
    "xptiMetadataAt"};

static int xpti_proxy_is_optional(const char *name) {
  for (size_t i = 0; i < sizeof xpti_proxy_optional / sizeof *xpti_proxy_optional; i++)
    if (strcmp(name, xpti_proxy_optional[i]) == 0)
      return 1;
  return 0;
}

/* Open the dispatcher and resolve every API symbol into *fns, or none:
 * returns the handle, or NULL after printing why. */
static void *xpti_proxy_open_dispatcher(const char *path, struct xpti_proxy_resolved *fns) {
  char message[512];
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  void *symbol;
  if (!handle) {
    const char *error = dlerror();
    snprintf(message, sizeof message, "xpti: cannot load dispatcher '%s': %s", path,
             error ? error : "unknown error");
    xpti_proxy_report(message);
    return NULL;
  }
  /* memcpy: ISO C has no conversion from void * to a function pointer. */
#define XPTI_PROXY_RESOLVE(name)                                                            \
  symbol = dlsym(handle, #name);                                                            \
  if (!symbol && !xpti_proxy_is_optional(#name)) {                                          \
    snprintf(message, sizeof message,                                                      \
             "xpti: dispatcher '%s' lacks " #name "; tracing disabled", path);             \
    xpti_proxy_report(message);                                                             \
    dlclose(handle);                                                                        \
    return NULL;                                                                            \
  }                                                                                         \
  memcpy(&fns->name, &symbol, sizeof fns->name);
#define XPTI_API(ret, name, params, args, off) XPTI_PROXY_RESOLVE(name)
#define XPTI_API_VOID(name, params, args) XPTI_PROXY_RESOLVE(name)
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID
#undef XPTI_PROXY_RESOLVE
  return handle;
}

/* One load attempt; the caller holds xpti_proxy_lock.  Leaves the table
 * all dispatcher functions (LOADED) or all NULL (OFF). */
static void xpti_proxy_load_locked(void) {
  struct xpti_proxy_resolved fns;
  const char *path;
  memset(&fns, 0, sizeof fns);
  xpti_proxy_loading = 1;
  atomic_store(&xpti_proxy_load_elsewhere, 1);
  if (xpti_proxy_enable_requested()) {
    path = secure_getenv("XPTI_FRAMEWORK_DISPATCHER");
    if (path && *path && xpti_proxy_open_dispatcher(path, &fns)) {
      xpti_proxy_publish(&fns);
      atomic_store_explicit(&xpti_proxy_state, XPTI_PROXY_LOADED, memory_order_release);
      atomic_store(&xpti_proxy_load_elsewhere, 0);
      xpti_proxy_loading = 0;
      return;
    }
    memset(&fns, 0, sizeof fns);
  }
  xpti_proxy_publish(&fns);
  atomic_store_explicit(&xpti_proxy_state, XPTI_PROXY_OFF, memory_order_release);
  atomic_store(&xpti_proxy_load_elsewhere, 0);
  xpti_proxy_loading = 0;
}

/* fork() while another thread loads.  The load holds the mutex across
 * dlopen, whose constructors take the dispatcher's locks: the mutex comes
 * first in every lock order, and a prepare handler that waited for it
 * would run after the dispatcher's (registered later, run earlier) and
 * invert that order.  So nothing is held across fork; the child, which
 * has only the forking thread, frees the mutex unless that thread holds
 * it, and a load some other thread had begun is given up for good:
 * tracing off in the child, said once. */
static void xpti_proxy_after_fork_child(void) {
  if (xpti_proxy_loading)
    return; /* forked from inside our own load: we hold the mutex */
  pthread_mutex_init(&xpti_proxy_lock, NULL);
  if (atomic_exchange(&xpti_proxy_load_elsewhere, 0) &&
      atomic_load_explicit(&xpti_proxy_state, memory_order_acquire) != XPTI_PROXY_LOADED) {
    struct xpti_proxy_resolved none;
    memset(&none, 0, sizeof none);
    xpti_proxy_publish(&none);
    atomic_store_explicit(&xpti_proxy_state, XPTI_PROXY_OFF, memory_order_release);
    /* ld.so's own state is half-way through that dlopen here: another
     * dlopen would fail its consistency assertion. */
    xpti_proxy_gave_up = 1;
    xpti_proxy_report("xpti: forked while another thread loaded the dispatcher; "
                      "tracing is off in this process");
  }
}
static pthread_once_t xpti_proxy_fork_once = PTHREAD_ONCE_INIT;
static void xpti_proxy_register_fork_handlers(void) {
  pthread_atfork(NULL, NULL, xpti_proxy_after_fork_child);
}

static void xpti_proxy_lock_for_load(void) {
  pthread_once(&xpti_proxy_fork_once, xpti_proxy_register_fork_handlers);
  pthread_mutex_lock(&xpti_proxy_lock);
}

/* First use: load unless another thread already has.  Returns 0 when
 * called re-entrantly from inside the load (the caller uses the default). */
static int xpti_proxy_load_once(void) {
  if (xpti_proxy_loading)
    return 0;
  xpti_proxy_lock_for_load();
  if (atomic_load_explicit(&xpti_proxy_state, memory_order_acquire) == XPTI_PROXY_UNTRIED)
    xpti_proxy_load_locked();
  pthread_mutex_unlock(&xpti_proxy_lock);
  return 1;
}

/* ---- trampolines ------------------------------------------------------- */

/* After the load the pointer is never a trampoline again, so the call
 * below cannot recurse. */
#define XPTI_API(ret, name, params, args, off)                                              \
  static ret xpti_proxy_init_##name params {                                                \
    xpti_proxy_fn_##name fn = NULL;                                                         \
    if (xpti_proxy_load_once())                                                             \
      fn = atomic_load_explicit(&xpti_proxy_table.name, memory_order_acquire);              \
    if (fn)                                                                                 \
      return fn args;                                                                       \
    return off;                                                                             \
  }
#define XPTI_API_VOID(name, params, args)                                                   \
  static void xpti_proxy_init_##name params {                                               \
    xpti_proxy_fn_##name fn = NULL;                                                         \
    if (xpti_proxy_load_once())                                                             \
      fn = atomic_load_explicit(&xpti_proxy_table.name, memory_order_acquire);              \
    if (fn)                                                                                 \
      fn args;                                                                              \
  }
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID

static struct xpti_proxy_table xpti_proxy_table = {
#define XPTI_API(ret, name, params, args, off) .name = xpti_proxy_init_##name,
#define XPTI_API_VOID(name, params, args) .name = xpti_proxy_init_##name,
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID
};

/* ---- stubs ------------------------------------------------------------ */

#define XPTI_API(ret, name, params, args, off)                                              \
  XPTI_EXPORT_API ret name params {                                                         \
    xpti_proxy_fn_##name fn =                                                               \
        atomic_load_explicit(&xpti_proxy_table.name, memory_order_acquire);                 \
    if (fn)                                                                                 \
      return fn args;                                                                       \
    return off;                                                                             \
  }
#define XPTI_API_VOID(name, params, args)                                                   \
  XPTI_EXPORT_API void name params {                                                        \
    xpti_proxy_fn_##name fn =                                                               \
        atomic_load_explicit(&xpti_proxy_table.name, memory_order_acquire);                 \
    if (fn)                                                                                 \
      fn args;                                                                              \
  }
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID

/* Not in api.def: the dispatcher's own xptiTraceTryToEnable is never
 * forwarded to; this one retries the load with a fresh environment. */
XPTI_EXPORT_API bool xptiTraceTryToEnable(void) {
  if (atomic_load_explicit(&xpti_proxy_state, memory_order_acquire) != XPTI_PROXY_LOADED &&
      !xpti_proxy_loading && !xpti_proxy_gave_up) {
    xpti_proxy_lock_for_load();
    if (atomic_load_explicit(&xpti_proxy_state, memory_order_acquire) != XPTI_PROXY_LOADED)
      xpti_proxy_load_locked();
    pthread_mutex_unlock(&xpti_proxy_lock);
  }
  return xptiTraceEnabled();
}
