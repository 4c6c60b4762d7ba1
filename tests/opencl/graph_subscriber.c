/* Test subscriber: records what the OpenCL layer emits on opencl.graph
 * and opencl.api and, at finish, writes a canonical summary (nodes with
 * instance and task counts, edges by node, api begin/end balance) to
 * $XPT_CLTEST_OUT.  Order-independent so it can be diffed. */
#define CL_TARGET_OPENCL_VERSION 300
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xpti/xpti_trace_framework.h>
#include <xptrace/cl_tracing.h>

#define MAX_NODES 256
#define MAX_EDGES 1024

typedef struct node_rec {
  uint64_t uid;
  char label[160];
  uint64_t creates, max_instance, tasks, bad_times;
} node_rec_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static node_rec_t nodes[MAX_NODES];
static int node_count;
static uint64_t edges[MAX_EDGES][2];
static int edge_count;
static int graphs;
static long api_begin, api_end, api_bad;
static uint8_t api_stream, graph_stream;
static bool api_registered;

#define XPT_CL_FN(ret, name, n, ...) #name,
#define XPT_CL_FN_VOID(name, n, ...) #name,
#define XPT_CL_OPAQUE(name)
static const char *const function_names[XPT_CL_FN_COUNT] = {
#include <xptrace/cl_api.def>
};

static node_rec_t *find_node(uint64_t uid) {
  for (int i = 0; i < node_count; i++)
    if (nodes[i].uid == uid)
      return &nodes[i];
  return NULL;
}

static const char *base_name(const char *path) {
  const char *s = path ? strrchr(path, '/') : NULL;
  return s ? s + 1 : path ? path : "?";
}

static void on_graph(uint16_t type, xpti_trace_event_data_t *parent, xpti_trace_event_data_t *ev,
                     uint64_t instance, const void *user_data) {
  pthread_mutex_lock(&lock);
  if (type == XPTI_TRACE_GRAPH_CREATE) {
    graphs++;
  } else if (type == XPTI_TRACE_NODE_CREATE && ev && node_count < MAX_NODES) {
    node_rec_t *n = find_node(ev->unique_id);
    if (!n) {
      n = &nodes[node_count++];
      n->uid = ev->unique_id;
      const xpti_payload_t *p = xptiQueryPayload(ev);
      int32_t cmd = XPTI_INVALID_OBJECT_ID;
      (void)xptiLookupMetadata(ev, "command", &cmd);
      xpti_object_data_t o = xptiLookupObject(cmd);
      snprintf(n->label, sizeof(n->label), "%s[%s]@%s:%u", p && p->name ? p->name : "?",
               o.data ? o.data : "?", base_name(p ? p->source_file : NULL),
               p ? p->line_no : 0);
    }
    n->creates++;
    if (!parent)
      n->creates += 1000; /* a node must belong to a graph */
  } else if (type == XPTI_TRACE_EDGE_CREATE && ev && edge_count < MAX_EDGES) {
    edges[edge_count][0] = ev->source_id;
    edges[edge_count][1] = ev->target_id;
    edge_count++;
  } else if ((type == XPTI_TRACE_TASK_BEGIN || type == XPTI_TRACE_TASK_END) && ev) {
    node_rec_t *n = find_node(ev->unique_id);
    const xpt_cl_task_t *t = user_data;
    if (n && type == XPTI_TRACE_TASK_BEGIN) {
      n->tasks++;
      if (instance > n->max_instance)
        n->max_instance = instance;
      if (!t || t->status != CL_COMPLETE || (t->end_ns && t->end_ns < t->start_ns))
        n->bad_times++;
    }
  }
  pthread_mutex_unlock(&lock);
}

static void on_api(uint16_t type, xpti_trace_event_data_t *parent, xpti_trace_event_data_t *ev,
                   uint64_t instance, const void *user_data) {
  (void)parent, (void)ev;
  const xpt_cl_api_call_t *call = user_data;
  pthread_mutex_lock(&lock);
  if (!call || call->correlation_id != instance || !call->function_name ||
      call->function_id >= XPT_CL_FN_COUNT ||
      strcmp(call->function_name, function_names[call->function_id]))
    api_bad++;
  if (type == XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN)
    api_begin++;
  else if (!call || !(call->return_value || call->function_id == XPT_CL_FN_clSVMFree))
    api_bad++, api_end++;
  else
    api_end++;
  pthread_mutex_unlock(&lock);
}

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  (void)major, (void)minor, (void)version;
  if (!strcmp(stream, "opencl.graph")) {
    graph_stream = xptiRegisterStream(stream);
    static const uint16_t types[] = {XPTI_TRACE_GRAPH_CREATE, XPTI_TRACE_NODE_CREATE,
                                     XPTI_TRACE_EDGE_CREATE, XPTI_TRACE_TASK_BEGIN,
                                     XPTI_TRACE_TASK_END};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
      xptiRegisterCallback(graph_stream, types[i], on_graph);
  } else if (!strcmp(stream, "opencl.api") && !getenv("XPT_CLTEST_NO_API")) {
    api_stream = xptiRegisterStream(stream);
    xptiRegisterCallback(api_stream, XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN, on_api);
    xptiRegisterCallback(api_stream, XPTI_TRACE_FUNCTION_WITH_ARGS_END, on_api);
    api_registered = true;
  }
}

static int compare_lines(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) {
  if (strcmp(stream, "opencl.graph"))
    return;
  const char *path = getenv("XPT_CLTEST_OUT");
  FILE *f = path ? fopen(path, "w") : stdout;
  if (!f)
    return;
  pthread_mutex_lock(&lock);
  char *lines[MAX_NODES + MAX_EDGES];
  int count = 0;
  for (int i = 0; i < node_count; i++) {
    node_rec_t *n = &nodes[i];
    if (asprintf(&lines[count], "node %s creates=%llu instances=%llu tasks=%llu bad=%llu\n",
                 n->label, (unsigned long long)n->creates, (unsigned long long)n->max_instance,
                 (unsigned long long)n->tasks, (unsigned long long)n->bad_times) > 0)
      count++;
  }
  for (int i = 0; i < edge_count; i++) {
    node_rec_t *a = find_node(edges[i][0]), *b = find_node(edges[i][1]);
    if (asprintf(&lines[count], "edge %s -> %s\n", a ? a->label : "?", b ? b->label : "?") > 0)
      count++;
  }
  qsort(lines, (size_t)count, sizeof(lines[0]), compare_lines);
  fprintf(f, "graphs %d\n", graphs);
  for (int i = 0; i < count; i++) {
    fputs(lines[i], f);
    free(lines[i]);
  }
  if (api_registered)
    fprintf(f, "api balanced=%d bad=%ld\n", api_begin == api_end && api_begin > 0, api_bad);
  pthread_mutex_unlock(&lock);
  if (f != stdout)
    fclose(f);
}
