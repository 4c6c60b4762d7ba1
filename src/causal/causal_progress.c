/* Progress points: XPTRACE_PROGRESS/BEGIN/END sites, Coz's counters
 * (_coz_get_counter, found by coz.h with dlsym), and XPTI trace point
 * types counted through a callback (`--progress STREAM:TYPE`: this library
 * is then also an XPTI subscriber). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xpti/xpti_data_types.h>

#include "causal_internal.h"
#include "xpt_msg.h"

causal_point_t causal_points[CAUSAL_MAX_POINTS];
atomic_int causal_npoints;
static pthread_mutex_t points_lock = PTHREAD_MUTEX_INITIALIZER;

/* Points are only ever added; a point's slot is complete before the count
 * that makes it visible is published. */
coz_counter_t *causal_point_get(int type, const char *name) {
  if (!name || type < XPTRACE_CAUSAL_THROUGHPUT || type > XPTRACE_CAUSAL_END)
    return NULL;
  coz_counter_t *found = NULL;
  pthread_mutex_lock(&points_lock);
  int n = atomic_load(&causal_npoints);
  for (int i = 0; i < n && !found; ++i)
    if (causal_points[i].type == type && strcmp(causal_points[i].name, name) == 0)
      found = &causal_points[i].counter;
  if (!found && n < CAUSAL_MAX_POINTS) {
    snprintf(causal_points[n].name, sizeof causal_points[n].name, "%s", name);
    causal_points[n].type = type;
    found = &causal_points[n].counter;
    atomic_store(&causal_npoints, n + 1);
  } else if (!found) {
    static bool told;
    if (!told)
      xpt_msg("xptrace: causal: more than %d progress points; '%s' not counted\n",
              CAUSAL_MAX_POINTS, name);
    told = true;
  }
  pthread_mutex_unlock(&points_lock);
  return found;
}

CAUSAL_API void xptrace_causal_hit(xptrace_progress_site_t *site) {
  coz_counter_t *c = __atomic_load_n((coz_counter_t **)&site->counter, __ATOMIC_ACQUIRE);
  if (!c) {
    c = causal_point_get(site->type, site->name);
    if (!c)
      return;
    __atomic_store_n((coz_counter_t **)&site->counter, c, __ATOMIC_RELEASE);
  }
  __atomic_add_fetch(&c->count, 1, __ATOMIC_RELAXED);
}

CAUSAL_API coz_counter_t *_coz_get_counter(int type, const char *name) {
  return causal_point_get(type, name);
}

/* ---- XPTI trace points as progress points -------------------------------- */

static const struct {
  const char *name;
  uint16_t type;
} trace_types[] = {
    {"graph_create", XPTI_TRACE_GRAPH_CREATE},
    {"node_create", XPTI_TRACE_NODE_CREATE},
    {"edge_create", XPTI_TRACE_EDGE_CREATE},
    {"region_begin", XPTI_TRACE_REGION_BEGIN},
    {"region_end", XPTI_TRACE_REGION_END},
    {"task_begin", XPTI_TRACE_TASK_BEGIN},
    {"task_end", XPTI_TRACE_TASK_END},
    {"barrier_begin", XPTI_TRACE_BARRIER_BEGIN},
    {"barrier_end", XPTI_TRACE_BARRIER_END},
    {"lock_begin", XPTI_TRACE_LOCK_BEGIN},
    {"lock_end", XPTI_TRACE_LOCK_END},
    {"signal", XPTI_TRACE_SIGNAL},
    {"transfer_begin", XPTI_TRACE_TRANSFER_BEGIN},
    {"transfer_end", XPTI_TRACE_TRANSFER_END},
    {"thread_begin", XPTI_TRACE_THREAD_BEGIN},
    {"thread_end", XPTI_TRACE_THREAD_END},
    {"wait_begin", XPTI_TRACE_WAIT_BEGIN},
    {"wait_end", XPTI_TRACE_WAIT_END},
    {"function_begin", XPTI_TRACE_FUNCTION_BEGIN},
    {"function_end", XPTI_TRACE_FUNCTION_END},
    {"metadata", XPTI_TRACE_METADATA},
    {"function_with_args_begin", XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN},
    {"function_with_args_end", XPTI_TRACE_FUNCTION_WITH_ARGS_END},
    {"mem_alloc_begin", XPTI_TRACE_MEM_ALLOC_BEGIN},
    {"mem_alloc_end", XPTI_TRACE_MEM_ALLOC_END},
    {"mem_release_begin", XPTI_TRACE_MEM_RELEASE_BEGIN},
    {"mem_release_end", XPTI_TRACE_MEM_RELEASE_END},
    {"diagnostics", XPTI_TRACE_DIAGNOSTICS},
    {"user_defined", XPTI_TRACE_USER_DEFINED},
};

/* One `--progress STREAM:TYPE[:NAME]`: NAME, when given, must be the
 * event's payload name (--progress-function uses it). */
enum { MAX_XPTI = 16 };
static struct {
  uint8_t stream;
  uint16_t type;
  char name[128];
  coz_counter_t *counter;
} xpti_points[MAX_XPTI];
static atomic_int nxpti;

static bool parse_type(const char *s, uint16_t *type) {
  for (size_t i = 0; i < sizeof trace_types / sizeof *trace_types; ++i)
    if (strcmp(s, trace_types[i].name) == 0) {
      *type = trace_types[i].type;
      return true;
    }
  char *end;
  unsigned long v = strtoul(s, &end, 0);
  if (*s && !*end && v > 0 && v <= UINT16_MAX) {
    *type = (uint16_t)v;
    return true;
  }
  return false;
}

/* The callback has no stream argument: the stream is the event's
 * registered one only through the point list, so a type listed for two
 * streams counts both (documented). */
static void xpti_hit(uint16_t trace_type, xpti_trace_event_data_t *parent,
                     xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  (void)parent;
  (void)instance;
  (void)user_data;
  int n = atomic_load_explicit(&nxpti, memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (xpti_points[i].type != trace_type)
      continue;
    if (xpti_points[i].name[0]) {
      const xpti_payload_t *p = event ? event->reserved.payload : NULL;
      if (!p || !p->name || strcmp(p->name, xpti_points[i].name) != 0)
        continue;
    }
    __atomic_add_fetch(&xpti_points[i].counter->count, 1, __ATOMIC_RELAXED);
  }
}

typedef uint8_t (*register_stream_fn)(const char *);
typedef xpti_result_t (*register_cb_fn)(uint8_t, uint16_t, xpti_tracepoint_callback_api_t);

/* The framework calling us: already loaded, found by its path (the proxy
 * loads it RTLD_LOCAL, so a global look-up may not see it). */
static void *framework_symbol(const char *name) {
  const char *path = secure_getenv("XPTI_FRAMEWORK_DISPATCHER");
  void *h = path && *path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  void *sym = h ? dlsym(h, name) : NULL;
  if (h)
    dlclose(h); /* drops the reference NOLOAD took; the framework stays */
  return sym ? sym : dlsym(RTLD_DEFAULT, name);
}

/* XPTRACE_CAUSAL_PROGRESS: "stream:type[:name],..."; the points whose
 * stream is `stream` are registered now. */
CAUSAL_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                              const char *stream) {
  (void)major;
  (void)minor;
  (void)version;
  const char *spec = causal_cfg.progress;
  if (!spec || !stream)
    return;
  register_stream_fn reg_stream;
  register_cb_fn reg_cb;
  void *s1 = framework_symbol("xptiRegisterStream"), *s2 = framework_symbol("xptiRegisterCallback");
  if (!s1 || !s2)
    return;
  memcpy(&reg_stream, &s1, sizeof reg_stream); /* ISO C: no void * -> function pointer cast */
  memcpy(&reg_cb, &s2, sizeof reg_cb);
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", spec);
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char label[256];
    snprintf(label, sizeof label, "%s", item);
    char *type_s = strchr(item, ':');
    if (!type_s)
      continue;
    *type_s++ = '\0';
    char *name = strchr(type_s, ':');
    if (name)
      *name++ = '\0';
    if (strcmp(item, stream) != 0)
      continue;
    uint16_t type;
    if (!parse_type(type_s, &type)) {
      xpt_msg("xptrace: causal: unknown trace point type '%s'\n", type_s);
      continue;
    }
    int n = atomic_load(&nxpti);
    if (n >= MAX_XPTI)
      break;
    xpti_points[n].stream = reg_stream(stream);
    xpti_points[n].type = type;
    snprintf(xpti_points[n].name, sizeof xpti_points[n].name, "%s", name ? name : "");
    xpti_points[n].counter = causal_point_get(XPTRACE_CAUSAL_THROUGHPUT, label);
    if (!xpti_points[n].counter)
      continue;
    atomic_store_explicit(&nxpti, n + 1, memory_order_release);
    reg_cb(xpti_points[n].stream, type, xpti_hit);
  }
}

CAUSAL_API void xptiTraceFinish(const char *stream) { (void)stream; }
