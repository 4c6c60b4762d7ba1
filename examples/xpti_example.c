/* xpti_example: a small pipeline instrumented with XPTI.
 *
 * On stream "example.graph" it announces a task graph: one graph, six
 * nodes, six edges.  On stream "example.work" four worker threads each run
 * the whole pipeline once: every node is a task (task_begin/task_end) and a
 * worker's run is a "batch", a trace point type of our own.
 *
 * Without a dispatcher every xpti call returns at once and the program
 * computes and prints the same result. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <xpti/xpti_trace_framework.h>

enum { NUM_NODES = 6, NUM_WORKERS = 4 };
static const char *const node_names[NUM_NODES] = {"load",      "parse", "filter",
                                                  "transform", "merge", "store"};
static const unsigned node_cost_us[NUM_NODES] = {200, 100, 300, 300, 150, 100};
static const int edges[][2] = {{0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 4}, {4, 5}};
enum { NUM_EDGES = sizeof edges / sizeof edges[0] };

static bool tracing;
static uint8_t graph_stream, work_stream;
static uint16_t batch_begin; /* user-defined; its end is batch_begin | 1 */

static void add_metadata(xpti_trace_event_data_t *event, const char *key, const void *value,
                         size_t size, xpti_metadata_type_t type) {
  xptiAddMetadata(event, key, xptiRegisterObject(value, size, (uint8_t)type));
}

/* A trace point is identified by its content, so building the payload
 * again yields the same event; each xptiMakeEvent counts a visit. */
static xpti_payload_t node_payload(int node) {
  return xpti_payload_make(node_names[node], __FILE__, __LINE__, 0, NULL);
}

static void announce_graph(void) {
  xpti_payload_t payload = xpti_payload_make("pipeline", __FILE__, __LINE__, 0, NULL);
  uint64_t instance;
  xpti_trace_event_data_t *graph =
      xptiMakeEvent("pipeline", &payload, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, &instance);
  if (!graph)
    return;
  uint32_t node_count = NUM_NODES;
  add_metadata(graph, "nodes", &node_count, sizeof node_count, XPTI_METADATA_UNSIGNED_INTEGER);
  xptiNotifySubscribers(graph_stream, XPTI_TRACE_GRAPH_CREATE, NULL, graph, instance, NULL);

  xpti_trace_event_data_t *node[NUM_NODES];
  for (int n = 0; n < NUM_NODES; n++) {
    xpti_payload_t p = node_payload(n);
    node[n] = xptiMakeEvent(node_names[n], &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE,
                            &instance);
    if (!node[n])
      return;
    const char *kind = (n == 0 || n == NUM_NODES - 1) ? "io" : "compute";
    add_metadata(node[n], "kind", kind, strlen(kind) + 1, XPTI_METADATA_STRING);
    add_metadata(node[n], "cost_us", &node_cost_us[n], sizeof node_cost_us[n],
                 XPTI_METADATA_UNSIGNED_INTEGER);
    xptiNotifySubscribers(graph_stream, XPTI_TRACE_NODE_CREATE, graph, node[n], instance, NULL);
  }
  for (int e = 0; e < NUM_EDGES; e++) {
    char name[64];
    snprintf(name, sizeof name, "%s->%s", node_names[edges[e][0]], node_names[edges[e][1]]);
    xpti_payload_t p = xpti_payload_make(name, __FILE__, __LINE__, 0, NULL);
    xpti_trace_event_data_t *edge =
        xptiMakeEvent(name, &p, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, &instance);
    if (!edge)
      return;
    edge->source_id = node[edges[e][0]]->unique_id;
    edge->target_id = node[edges[e][1]]->unique_id;
    edge->flags |= XPTI_EVENT_SOURCE_UID_AVAILABLE | XPTI_EVENT_TARGET_UID_AVAILABLE;
    xptiNotifySubscribers(graph_stream, XPTI_TRACE_EDGE_CREATE, graph, edge, instance, NULL);
  }
}

/* One node of the pipeline: a short sleep stands for real work. */
static uint64_t run_task(int worker, int n, xpti_trace_event_data_t *batch) {
  uint64_t instance = 0;
  xpti_trace_event_data_t *task = NULL;
  if (tracing) {
    xpti_payload_t p = node_payload(n);
    task = xptiMakeEvent(node_names[n], &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE,
                         &instance);
  }
  XPTI_SCOPED_NOTIFY(work_stream, XPTI_TRACE_TASK_BEGIN, batch, task, instance, NULL);
  struct timespec pause = {0, (long)node_cost_us[n] * 1000};
  nanosleep(&pause, NULL);
  return (uint64_t)(worker + 1) * (uint64_t)(n + 1) * node_cost_us[n];
}

static void *worker_main(void *arg) {
  int worker = (int)(intptr_t)arg;
  uint64_t instance = 0, sum = 0;
  xpti_trace_event_data_t *batch = NULL;
  if (tracing) {
    char name[32];
    snprintf(name, sizeof name, "batch %d", worker);
    xpti_payload_t p = xpti_payload_make(name, __FILE__, __LINE__, 0, NULL);
    batch = xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
    int32_t worker_id = worker;
    double share = 1.0 / NUM_WORKERS;
    bool last = worker == NUM_WORKERS - 1;
    add_metadata(batch, "worker", &worker_id, sizeof worker_id, XPTI_METADATA_SIGNED_INTEGER);
    add_metadata(batch, "share", &share, sizeof share, XPTI_METADATA_FLOAT);
    add_metadata(batch, "last", &last, sizeof last, XPTI_METADATA_BOOLEAN);
  }
  {
    XPTI_SCOPED_NOTIFY(work_stream, batch_begin, NULL, batch, instance, NULL);
    for (int n = 0; n < NUM_NODES; n++)
      sum += run_task(worker, n, batch);
  }
  return (void *)(uintptr_t)sum;
}

int main(void) {
  tracing = xptiTraceEnabled();
  if (tracing) {
    batch_begin = xptiRegisterUserDefinedTracePoint("example", XPTI_TRACE_POINT_BEGIN(0));
    graph_stream = xptiRegisterStream("example.graph");
    work_stream = xptiRegisterStream("example.work");
    xptiInitialize("example.graph", 1, 0, "1.0");
    xptiInitialize("example.work", 1, 0, "1.0");
    announce_graph();
  }

  pthread_t threads[NUM_WORKERS];
  for (int w = 0; w < NUM_WORKERS; w++)
    pthread_create(&threads[w], NULL, worker_main, (void *)(intptr_t)w);
  uint64_t checksum = 0;
  for (int w = 0; w < NUM_WORKERS; w++) {
    void *sum;
    pthread_join(threads[w], &sum);
    checksum += (uint64_t)(uintptr_t)sum;
  }

  if (tracing) {
    xptiFinalize("example.work");
    xptiFinalize("example.graph");
  }
  printf("xpti_example: %d workers ran %d tasks, checksum %llu (tracing %s)\n", NUM_WORKERS,
         NUM_WORKERS * NUM_NODES, (unsigned long long)checksum, tracing ? "on" : "off");
  return 0;
}
