/* Instrumented program for the perfetto collector tests: a known number
 * of slices, instants and graph records per mode, then one way to end.
 *   pt_workload basic|finalize|exit-thread|sigterm|segv|fork
 *   pt_workload threads <nthreads> <pairs per thread>
 *   pt_workload user-late: USER_COUNT slices of a user-defined type whose
 *     tool is registered after xptiInitialize (nothing else).
 *   pt_workload clock: CLOCK_SAMPLES instants named "clock <ns>", <ns> read
 *     from CLOCK_MONOTONIC just before the notification (nothing else).
 *   pt_workload device: xptrace timed slices (xptrace_protocol.h) of 10
 *     graph nodes on two tracks, sent out of time order, in two batches
 *     300 ms apart, one track from another thread, with 5 edges (see
 *     record_device).
 *   pt_workload graph-back: a graph whose edges go back in time (see
 *     record_graph_back; nothing else).
 *   pt_workload nested <nthreads> <iterations>: each thread nests three
 *     slices (outer, mid, inner) per iteration (nothing else).
 * Every mode records:  main thread: TASK_COUNT task slices (with an
 * event), NAMED_COUNT function slices with a NULL event (name in
 * user_data), INSTANT_COUNT signal instants, and a graph of 3 nodes and
 * 2 edges. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xpti/xpti_trace_framework.h"
#include "xptrace/xptrace_protocol.h"

#define TASK_COUNT 100
#define NAMED_COUNT 50
#define INSTANT_COUNT 10
#define USER_COUNT 30
#define CLOCK_SAMPLES 30

static uint8_t stream;

static void record_basic(void) {
  xpti_payload_t task = xpti_payload_make("compute", "pt_workload.c", 42, 1, NULL);
  uint64_t instance = 0;
  xpti_trace_event_data_t *ev =
      xptiMakeEvent("compute", &task, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
  if (!ev) {
    fprintf(stderr, "pt_workload: no event\n");
    exit(3);
  }
  int32_t v = xptiRegisterObject("gpu0", 5, XPTI_METADATA_STRING);
  xptiAddMetadata(ev, "device", v);
  for (int i = 0; i < TASK_COUNT; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, (uint64_t)i + 1, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, (uint64_t)i + 1, NULL);
  }
  for (int i = 0; i < NAMED_COUNT; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, (uint64_t)i,
                          "named_function");
    xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_END, NULL, NULL, (uint64_t)i,
                          "named_function");
  }
  xpti_payload_t sig = xpti_payload_make("ready", "pt_workload.c", 60, 1, NULL);
  xpti_trace_event_data_t *sev =
      xptiMakeEvent("ready", &sig, XPTI_EVENT_UNKNOWN, XPTI_ACTIVITY_ACTIVE, NULL);
  for (int i = 0; i < INSTANT_COUNT; i++)
    xptiNotifySubscribers(stream, XPTI_TRACE_SIGNAL, NULL, sev, (uint64_t)i, NULL);

  /* graph: a -> b -> c */
  xpti_payload_t gp = xpti_payload_make("graph", "pt_workload.c", 70, 1, NULL);
  xpti_trace_event_data_t *g =
      xptiMakeEvent("graph", &gp, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, NULL);
  xptiNotifySubscribers(stream, XPTI_TRACE_GRAPH_CREATE, NULL, g, 1, NULL);
  xpti_trace_event_data_t *nodes[3];
  const char *names[3] = {"node_a", "node_b", "node_c"};
  for (int i = 0; i < 3; i++) {
    xpti_payload_t np = xpti_payload_make(names[i], "pt_workload.c", 80 + (uint32_t)i, 1, NULL);
    nodes[i] = xptiMakeEvent(names[i], &np, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_NODE_CREATE, g, nodes[i], 1, NULL);
  }
  for (int i = 0; i < 2; i++) {
    xpti_payload_t ep = xpti_payload_make("edge", "pt_workload.c", 90 + (uint32_t)i, 1, NULL);
    xpti_trace_event_data_t *e =
        xptiMakeEvent("edge", &ep, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, NULL);
    e->source_id = nodes[i]->unique_id;
    e->target_id = nodes[i + 1]->unique_id;
    e->flags |= XPTI_EVENT_SOURCE_UID_AVAILABLE | XPTI_EVENT_TARGET_UID_AVAILABLE;
    xptiNotifySubscribers(stream, XPTI_TRACE_EDGE_CREATE, g, e, 1, NULL);
  }
}

/* A tool and its types that exist only after the stream is initialised. */
static int record_user_late(void) {
  uint16_t begin = xptiRegisterUserDefinedTracePoint("pt_late_tool", 2);
  uint16_t end = xptiRegisterUserDefinedTracePoint("pt_late_tool", 3);
  if (!(begin & XPTI_TRACE_USER_DEFINED) || end != (begin | 1)) {
    fprintf(stderr, "pt_workload: user-defined types 0x%x 0x%x\n", begin, end);
    return 3;
  }
  xpti_payload_t p = xpti_payload_make("late_user", "pt_workload.c", 100, 1, NULL);
  xpti_trace_event_data_t *ev =
      xptiMakeEvent("late_user", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  for (int i = 0; i < USER_COUNT; i++) {
    xptiNotifySubscribers(stream, begin, NULL, ev, (uint64_t)i, NULL);
    xptiNotifySubscribers(stream, end, NULL, ev, (uint64_t)i, NULL);
  }
  return 0;
}

/* Instants whose names carry the time they were sent, some ms apart. */
static int record_clock(void) {
  for (int i = 0; i < CLOCK_SAMPLES; i++) {
    struct timespec now, pause_for = {0, 3000000};
    char name[64];
    clock_gettime(CLOCK_MONOTONIC, &now);
    snprintf(name, sizeof name, "clock %lld",
             (long long)now.tv_sec * 1000000000ll + (long long)now.tv_nsec);
    xptiNotifySubscribers(stream, XPTI_TRACE_DIAGNOSTICS, NULL, NULL, (uint64_t)i, name);
    nanosleep(&pause_for, NULL);
  }
  return 0;
}

/* Nodes w, k, r made in this order, then edges w->k, k->r and, like
 * OpenCL's read of one round -> write of the next, r->w and r->k whose
 * source node came after the target's; late->w is sent before late's
 * node (another thread's order); w->ghost names a node never made.
 * 5 nodes (graph included), 6 edges, 5 flows. */
static xpti_trace_event_data_t *graph_event(const char *name, uint32_t line) {
  xpti_payload_t p = xpti_payload_make(name, "pt_workload.c", line, 1, NULL);
  return xptiMakeEvent(name, &p, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, NULL);
}

static void graph_edge(xpti_trace_event_data_t *g, const xpti_trace_event_data_t *from,
                       uint64_t to_uid, uint32_t line) {
  xpti_trace_event_data_t *e = graph_event("back_edge", line);
  e->source_id = from->unique_id;
  e->target_id = to_uid;
  e->flags |= XPTI_EVENT_SOURCE_UID_AVAILABLE | XPTI_EVENT_TARGET_UID_AVAILABLE;
  xptiNotifySubscribers(stream, XPTI_TRACE_EDGE_CREATE, g, e, 1, NULL);
}

static int record_graph_back(void) {
  xpti_trace_event_data_t *g = graph_event("back_graph", 300);
  xptiNotifySubscribers(stream, XPTI_TRACE_GRAPH_CREATE, NULL, g, 1, NULL);
  xpti_trace_event_data_t *w = graph_event("back_w", 301), *k = graph_event("back_k", 302),
                          *r = graph_event("back_r", 303), *late = graph_event("back_late", 304);
  xptiNotifySubscribers(stream, XPTI_TRACE_NODE_CREATE, g, w, 1, NULL);
  xptiNotifySubscribers(stream, XPTI_TRACE_NODE_CREATE, g, k, 1, NULL);
  xptiNotifySubscribers(stream, XPTI_TRACE_NODE_CREATE, g, r, 1, NULL);
  graph_edge(g, w, k->unique_id, 310);
  graph_edge(g, k, r->unique_id, 311);
  graph_edge(g, r, w->unique_id, 312);
  graph_edge(g, r, k->unique_id, 313);
  graph_edge(g, late, w->unique_id, 314);
  graph_edge(g, w, 0xfeedull << 32, 315);
  xptiNotifySubscribers(stream, XPTI_TRACE_NODE_CREATE, g, late, 1, NULL);
  return 0;
}

/* ---- device work: timed slices on tracks of their own ------------------ */

/* Node, track and times (us after a base) of each slice.
 *   "inorder_q": a [0,10] b [10,20] c [25,40] d [40,45] e [50,60] (named
 *     "renamed"): disjoint, one lane; sent b a | d c e (two batches).
 *   "overlap_q": x [0,100] y [10,50] z [20,30] w [60,120] v [130,140],
 *     sent from a second thread z x | w v y: whatever the writer draws
 *     first, three lanes ("overlap_q", "overlap_q #2", "overlap_q #3").
 * Edges (sent before any slice) a->b, b->c and x->w (their targets come
 * in the second batch: the sources wait for them), c->d, d->v: 5 flows
 * between device slices (and 5 on the graph track). */
struct dev_spec {
  const char *node;
  int track; /* 1 inorder_q, 2 overlap_q */
  uint64_t begin_us, end_us;
  int batch;
};
static const struct dev_spec dev_specs[] = {
    {"dev_b", 1, 10, 20, 1}, {"dev_a", 1, 0, 10, 1},     {"dev_d", 1, 40, 45, 2},
    {"dev_c", 1, 25, 40, 2}, {"dev_e", 1, 50, 60, 2},    {"dev_z", 2, 20, 30, 1},
    {"dev_x", 2, 0, 100, 1}, {"dev_w", 2, 60, 120, 2},   {"dev_v", 2, 130, 140, 2},
    {"dev_y", 2, 10, 50, 2},
};
#define DEV_N (sizeof dev_specs / sizeof dev_specs[0])
static const char *const dev_edges[][2] = {
    {"dev_a", "dev_b"}, {"dev_b", "dev_c"}, {"dev_c", "dev_d"}, {"dev_d", "dev_v"}, {"dev_x", "dev_w"}};
static xpti_trace_event_data_t *dev_nodes[DEV_N];
static uint16_t dev_type;
static uint64_t dev_base;

static void dev_send(int track, int batch) {
  for (size_t i = 0; i < DEV_N; i++) {
    const struct dev_spec *d = &dev_specs[i];
    if (d->track != track || d->batch != batch)
      continue;
    xptrace_timed_slice_t s = {dev_base + d->begin_us * 1000, dev_base + d->end_us * 1000,
                               (uint64_t)track, track == 1 ? "inorder_q" : "overlap_q",
                               !strcmp(d->node, "dev_e") ? "renamed" : NULL};
    if (xptiNotifySubscribers(stream, dev_type, NULL, dev_nodes[i], 1, &s) !=
        XPTI_RESULT_SUCCESS) {
      fprintf(stderr, "pt_workload: timed slice refused\n");
      exit(3);
    }
  }
}

static void *dev_thread(void *arg) {
  (void)arg;
  dev_send(2, 1);
  return NULL;
}

static xpti_trace_event_data_t *dev_node(const char *name) {
  for (size_t i = 0; i < DEV_N; i++)
    if (!strcmp(dev_specs[i].node, name))
      return dev_nodes[i];
  return NULL;
}

static int record_device(void) {
  dev_type = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
  if (!(dev_type & XPTI_TRACE_USER_DEFINED)) {
    fprintf(stderr, "pt_workload: timed slice type 0x%x\n", dev_type);
    return 3;
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  dev_base = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  xpti_payload_t gp = xpti_payload_make("dev_graph", "pt_workload.c", 200, 1, NULL);
  xpti_trace_event_data_t *g =
      xptiMakeEvent("dev_graph", &gp, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, NULL);
  for (size_t i = 0; i < DEV_N; i++) {
    xpti_payload_t np =
        xpti_payload_make(dev_specs[i].node, "pt_workload.c", 210 + (uint32_t)i, 1, NULL);
    uint64_t instance = 0;
    dev_nodes[i] =
        xptiMakeEvent(dev_specs[i].node, &np, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
    if (!dev_nodes[i] || instance != 1)
      return 3;
    xptiNotifySubscribers(stream, XPTI_TRACE_NODE_CREATE, g, dev_nodes[i], 1, NULL);
  }
  for (size_t i = 0; i < sizeof dev_edges / sizeof dev_edges[0]; i++) {
    xpti_payload_t ep = xpti_payload_make("dev_edge", "pt_workload.c", 230 + (uint32_t)i, 1, NULL);
    xpti_trace_event_data_t *e =
        xptiMakeEvent("dev_edge", &ep, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, NULL);
    e->source_id = dev_node(dev_edges[i][0])->unique_id;
    e->target_id = dev_node(dev_edges[i][1])->unique_id;
    e->flags |= XPTI_EVENT_SOURCE_UID_AVAILABLE | XPTI_EVENT_TARGET_UID_AVAILABLE;
    xptiNotifySubscribers(stream, XPTI_TRACE_EDGE_CREATE, g, e, 1, NULL);
  }
  pthread_t th;
  pthread_create(&th, NULL, dev_thread, NULL);
  dev_send(1, 1);
  pthread_join(th, NULL);
  /* The writer draws the first batch before the second comes. */
  struct timespec pause_for = {0, 300000000};
  nanosleep(&pause_for, NULL);
  dev_send(1, 2);
  dev_send(2, 2);
  return 0;
}

/* ---- threads ---------------------------------------------------------- */

static pthread_barrier_t barrier;
static long pairs_per_thread;

static void *thread_main(void *arg) {
  xpti_trace_event_data_t *ev = arg;
  pthread_barrier_wait(&barrier);
  for (long i = 0; i < pairs_per_thread; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_REGION_BEGIN, NULL, ev, (uint64_t)i, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_REGION_END, NULL, ev, (uint64_t)i, NULL);
  }
  return NULL;
}

static int run_threads(int n, long pairs) {
  pairs_per_thread = pairs;
  pthread_t th[64];
  if (n > 64)
    n = 64;
  pthread_barrier_init(&barrier, NULL, (unsigned)n);
  xpti_payload_t p = xpti_payload_make("work", "pt_workload.c", 120, 1, NULL);
  xpti_trace_event_data_t *ev =
      xptiMakeEvent("work", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  for (int i = 0; i < n; i++)
    pthread_create(&th[i], NULL, thread_main, ev);
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  return 0;
}

static long nested_iterations;

static void *nested_main(void *arg) {
  xpti_trace_event_data_t **ev = arg;
  pthread_barrier_wait(&barrier);
  /* The middle level's instance is 0: its records take the compact form
   * (xpt_rec.h) between full ones. */
  for (long i = 0; i < nested_iterations; i++) {
    for (int d = 0; d < 3; d++)
      xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev[d],
                            d == 1 ? 0 : (uint64_t)i + 1, NULL);
    for (int d = 2; d >= 0; d--)
      xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev[d],
                            d == 1 ? 0 : (uint64_t)i + 1, NULL);
  }
  return NULL;
}

static int run_nested(int n, long iterations) {
  nested_iterations = iterations;
  pthread_t th[64];
  if (n > 64)
    n = 64;
  pthread_barrier_init(&barrier, NULL, (unsigned)n);
  static xpti_trace_event_data_t *ev[3];
  const char *names[3] = {"outer", "mid", "inner"};
  for (int d = 0; d < 3; d++) {
    xpti_payload_t p = xpti_payload_make(names[d], "pt_workload.c", 130 + (uint32_t)d, 1, NULL);
    ev[d] = xptiMakeEvent(names[d], &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  }
  for (int i = 0; i < n; i++)
    pthread_create(&th[i], NULL, nested_main, ev);
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  return 0;
}

/* Records of both forms nested in each other: compact (instance 0, one of
 * the framework's uids), full (an instance), and full because the uid is
 * past the compact form's 40 bits (a caller-owned event). */
#define COMPACT_COUNT 300
static int record_compact(void) {
  xpti_payload_t po = xpti_payload_make("outer_compact", "pt_workload.c", 400, 1, NULL);
  xpti_payload_t pi = xpti_payload_make("inner_full", "pt_workload.c", 401, 1, NULL);
  xpti_payload_t pb = xpti_payload_make("big_uid", "pt_workload.c", 402, 1, NULL);
  xpti_trace_event_data_t *outer =
      xptiMakeEvent("outer_compact", &po, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  xpti_trace_event_data_t *inner =
      xptiMakeEvent("inner_full", &pi, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  if (!outer || !inner || outer->unique_id >= (1ull << 40))
    return 3;
  xpti_trace_event_data_t big = {0};
  big.unique_id = (1ull << 40) + 10; /* not in outer's slot of the recorder's described-cache */
  big.reserved.payload = &pb;
  for (int i = 0; i < COMPACT_COUNT; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, outer, 0, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, inner, (uint64_t)i + 1, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, &big, 0, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, &big, 0, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, inner, (uint64_t)i + 1, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, outer, 0, NULL);
  }
  return 0;
}

static void *exit_thread_main(void *arg) {
  (void)arg;
  record_basic();
  exit(0); /* from a non-main thread, while main is blocked */
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "basic";
  if (xptiInitialize("pt.test", 1, 0, "1.0") != XPTI_RESULT_SUCCESS) {
    fprintf(stderr, "pt_workload: xptiInitialize failed (tracing off?)\n");
    return 2;
  }
  stream = xptiRegisterStream("pt.test");
  if (!strcmp(mode, "threads"))
    return run_threads(argc > 2 ? atoi(argv[2]) : 8, argc > 3 ? atol(argv[3]) : 1000);
  if (!strcmp(mode, "nested"))
    return run_nested(argc > 2 ? atoi(argv[2]) : 8, argc > 3 ? atol(argv[3]) : 1000);
  if (!strcmp(mode, "compact"))
    return record_compact();
  if (!strcmp(mode, "graph-back"))
    return record_graph_back();
  if (!strcmp(mode, "clock"))
    return record_clock();
  if (!strcmp(mode, "user-late"))
    return record_user_late();
  if (!strcmp(mode, "device"))
    return record_device();
  if (!strcmp(mode, "exit-thread")) {
    pthread_t th;
    pthread_create(&th, NULL, exit_thread_main, NULL);
    for (;;)
      pause();
  }
  record_basic();
  if (!strcmp(mode, "finalize")) {
    xptiFinalize("pt.test");
    return 0;
  }
  if (!strcmp(mode, "sigterm")) {
    kill(getpid(), SIGTERM);
    return 1; /* not reached */
  }
  if (!strcmp(mode, "segv")) {
    /* A real fault (not a null store, which UBSan reports first). */
    volatile int *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *page = 1;
    return 1;
  }
  if (!strcmp(mode, "fork")) {
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
      record_basic(); /* the child's own trace: one more basic set */
      exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  return 0;
}
