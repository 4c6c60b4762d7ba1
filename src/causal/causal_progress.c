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
    {"graph_create", 2},  {"node_create", 4},   {"edge_create", 6},   {"region_begin", 8},
    {"region_end", 9},    {"task_begin", 10},   {"task_end", 11},     {"barrier_begin", 12},
    {"barrier_end", 13},  {"lock_begin", 14},   {"lock_end", 15},     {"signal", 16},
    {"transfer_begin", 18}, {"transfer_end", 19}, {"thread_begin", 20}, {"thread_end", 21},
    {"wait_begin", 22},   {"wait_end", 23},     {"function_begin", 24}, {"function_end", 25},
    {"metadata", 26},     {"function_with_args_begin", 28}, {"function_with_args_end", 29},
    {"mem_alloc_begin", 32}, {"mem_alloc_end", 33}, {"mem_release_begin", 34},
    {"mem_release_end", 35}, {"diagnostics", 126}, {"user_defined", 128},
};

enum { MAX_XPTI = 16 };
static struct {
  uint8_t stream;
  uint16_t type;
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

static void xpti_hit(uint16_t trace_type, xpti_trace_event_data_t *parent,
                     xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  (void)parent;
  (void)event;
  (void)instance;
  (void)user_data;
  int n = atomic_load_explicit(&nxpti, memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (xpti_points[i].type == trace_type)
      __atomic_add_fetch(&xpti_points[i].counter->count, 1, __ATOMIC_RELAXED);
}

typedef uint8_t (*register_stream_fn)(const char *);
typedef xpti_result_t (*register_cb_fn)(uint8_t, uint16_t, xpti_tracepoint_callback_api_t);

/* XPTRACE_CAUSAL_PROGRESS: "stream:type,stream:type"; the points whose
 * stream is `stream` are registered now. */
CAUSAL_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                              const char *stream) {
  (void)major;
  (void)minor;
  (void)version;
  const char *spec = causal_cfg.progress;
  if (!spec || !stream)
    return;
  register_stream_fn reg_stream = (register_stream_fn)dlsym(RTLD_DEFAULT, "xptiRegisterStream");
  register_cb_fn reg_cb = (register_cb_fn)dlsym(RTLD_DEFAULT, "xptiRegisterCallback");
  if (!reg_stream || !reg_cb)
    return;
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", spec);
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *colon = strrchr(item, ':');
    uint16_t type;
    if (!colon)
      continue;
    *colon = '\0';
    if (strcmp(item, stream) != 0)
      continue;
    if (!parse_type(colon + 1, &type)) {
      xpt_msg("xptrace: causal: unknown trace point type '%s'\n", colon + 1);
      continue;
    }
    *colon = ':';
    int n = atomic_load(&nxpti);
    if (n >= MAX_XPTI)
      break;
    uint8_t id = reg_stream(stream);
    xpti_points[n].stream = id;
    xpti_points[n].type = type;
    xpti_points[n].counter = causal_point_get(XPTRACE_CAUSAL_THROUGHPUT, item);
    if (!xpti_points[n].counter)
      continue;
    atomic_store_explicit(&nxpti, n + 1, memory_order_release);
    reg_cb(id, type, xpti_hit);
  }
}

CAUSAL_API void xptiTraceFinish(const char *stream) { (void)stream; }
