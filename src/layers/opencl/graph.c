/* The opencl.graph stream (document 002 applied to OpenCL): one graph per
 * context, a node per command keyed by its code location, edges for
 * dependencies, task_begin/task_end with device times on completion, and
 * the xptrace timed slice of each completed command on its queue's track. */
#include "layer_internal.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xpti/xpti_trace_framework.h>
#include <xptrace/xptrace_protocol.h>

#include "xsym_site.h"

#define GRAPH_MAX_QUEUES 256
#define GRAPH_MAX_CONTEXTS 64
#define GRAPH_SINCE_BARRIER 64
#define GRAPH_EVENT_BUCKETS 1024

typedef struct graph_queue {
  cl_command_queue queue;
  uint64_t id;
  bool in_order;
  bool added_profiling;
  xpti_trace_event_data_t *graph;
  uint64_t last_uid;                 /* in-order predecessor */
  uint64_t barrier_uid;              /* last barrier (out-of-order) */
  uint64_t since_barrier[GRAPH_SINCE_BARRIER];
  uint32_t since_count;
  _Atomic int pending;               /* completions not yet reported */
  char track_name[128];              /* "OpenCL queue N (in-order, device)" */
} graph_queue_t;

typedef struct graph_node {
  xpti_trace_event_data_t *node, *graph;
  graph_queue_t *queue;
  cl_event event;
  bool internal;
  xpt_cl_task_t task;
} graph_node_t;

typedef struct graph_event_entry {
  cl_event event;
  uint64_t uid;
  graph_node_t *pending; /* until its completion is reported */
  struct graph_event_entry *next;
} graph_event_entry_t;

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static graph_queue_t graph_queues[GRAPH_MAX_QUEUES];
static uint32_t graph_queue_count;
static uint64_t graph_queue_ids; /* ids given so far */
static struct {
  cl_context context;
  xpti_trace_event_data_t *graph;
} graph_contexts[GRAPH_MAX_CONTEXTS];
static uint32_t graph_context_count;
static graph_event_entry_t *graph_events[GRAPH_EVENT_BUCKETS];
/* Code bases of the frames between the program and us: this layer, the
 * layer or loader below, the loader's entry points, and whatever
 * provides backtrace() (libc, or a sanitizer's interceptor). */
static uintptr_t graph_skip_bases[4];
static _Atomic bool graph_overflow_reported;

void graph_init(void) {
  graph_skip_bases[0] = xsym_module_base((const void *)graph_init);
  graph_skip_bases[1] = xsym_module_base((const void *)layer_next.clFinish);
  graph_skip_bases[2] = xsym_module_base(dlsym(RTLD_DEFAULT, "clFinish"));
  graph_skip_bases[3] = xsym_module_base(dlsym(RTLD_DEFAULT, "backtrace"));
}

static void graph_report_overflow(const char *what) {
  if (!atomic_exchange(&graph_overflow_reported, true))
    fprintf(stderr, "xpti: opencl.graph: too many %s; further ones are not graphed\n", what);
}

/* ---- code locations --------------------------------------------------- */

/* ---- tables ------------------------------------------------------------ */
static xpti_trace_event_data_t *graph_for_context_locked(cl_context context) {
  for (uint32_t i = 0; i < graph_context_count; i++)
    if (graph_contexts[i].context == context)
      return graph_contexts[i].graph;
  if (graph_context_count == GRAPH_MAX_CONTEXTS) {
    graph_report_overflow("contexts");
    return NULL;
  }
  char name[64];
  snprintf(name, sizeof(name), "OpenCL context %u", graph_context_count + 1);
  xpti_payload_t payload = xpti_payload_make(name, NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE, NULL);
  uint64_t instance = 0;
  xpti_trace_event_data_t *graph =
      xptiMakeEvent(name, &payload, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, &instance);
  graph_contexts[graph_context_count].context = context;
  graph_contexts[graph_context_count].graph = graph;
  graph_context_count++;
  if (graph)
    (void)xptiNotifySubscribers(layer_graph_stream, XPTI_TRACE_GRAPH_CREATE, NULL, graph,
                                instance, NULL);
  return graph;
}

/* Describes slot q for queue: a new id (never one a released queue had,
 * so tracks stay apart), its properties, context and device.  Completions
 * still counted in the slot stay counted. */
static void graph_queue_describe_locked(graph_queue_t *q, cl_command_queue queue) {
  int pending = atomic_load(&q->pending);
  memset(q, 0, sizeof(*q));
  atomic_store(&q->pending, pending);
  q->queue = queue;
  q->id = ++graph_queue_ids;
  cl_command_queue_properties props = 0;
  cl_context context = NULL;
  (void)layer_next.clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof(props), &props, NULL);
  (void)layer_next.clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof(context), &context, NULL);
  q->in_order = !(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  q->graph = graph_for_context_locked(context);
  cl_device_id device = NULL;
  char device_name[64] = "";
  if (layer_next.clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof(device), &device, NULL) !=
          CL_SUCCESS ||
      layer_next.clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof(device_name), device_name, NULL) !=
          CL_SUCCESS)
    device_name[0] = 0;
  device_name[sizeof(device_name) - 1] = 0;
  snprintf(q->track_name, sizeof(q->track_name), "OpenCL queue %" PRIu64 " (%s%s%s)", q->id,
           q->in_order ? "in-order" : "out-of-order", device_name[0] ? ", " : "", device_name);
}

static graph_queue_t *graph_queue_locked(cl_command_queue queue, bool create) {
  for (uint32_t i = 0; i < graph_queue_count; i++)
    if (graph_queues[i].queue == queue)
      return &graph_queues[i];
  if (!create || !queue)
    return NULL;
  if (graph_queue_count == GRAPH_MAX_QUEUES) {
    graph_report_overflow("queues");
    return NULL;
  }
  graph_queue_t *q = &graph_queues[graph_queue_count++];
  graph_queue_describe_locked(q, queue);
  return q;
}

/* A queue just made: its slot, a released queue's when its address came
 * back (slots never move: nodes in flight point at theirs). */
static graph_queue_t *graph_queue_made_locked(cl_command_queue queue) {
  graph_queue_t *q = graph_queue_locked(queue, false);
  if (!q)
    return graph_queue_locked(queue, true);
  graph_queue_describe_locked(q, queue);
  return q;
}

static graph_event_entry_t **graph_event_bucket(cl_event e) {
  return &graph_events[((uintptr_t)e >> 4) % GRAPH_EVENT_BUCKETS];
}

static graph_event_entry_t *graph_event_find_locked(cl_event e) {
  for (graph_event_entry_t *x = *graph_event_bucket(e); x; x = x->next)
    if (x->event == e)
      return x;
  return NULL;
}

static void graph_event_remove_locked(cl_event e) {
  for (graph_event_entry_t **p = graph_event_bucket(e); *p; p = &(*p)->next)
    if ((*p)->event == e) {
      graph_event_entry_t *x = *p;
      *p = x->next;
      free(x);
      return;
    }
}

/* ---- nodes, edges, tasks ---------------------------------------------- */
static void graph_add_metadata(xpti_trace_event_data_t *ev, const char *key, const char *value) {
  int32_t id = xptiRegisterObject(value, strlen(value) + 1, XPTI_METADATA_STRING);
  if (id != XPTI_INVALID_OBJECT_ID)
    (void)xptiAddMetadata(ev, key, id);
}

static void graph_edge_locked(xpti_trace_event_data_t *graph, uint64_t from, uint64_t to) {
  if (!from || !to || from == to)
    return;
  char name[64];
  snprintf(name, sizeof(name), "edge %" PRIx64 "->%" PRIx64, from, to);
  xpti_payload_t payload = xpti_payload_make(name, NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE, NULL);
  uint64_t instance = 0;
  xpti_trace_event_data_t *edge =
      xptiMakeEvent(name, &payload, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, &instance);
  if (!edge || instance != 1)
    return;
  edge->source_id = from;
  edge->target_id = to;
  edge->flags |= XPTI_EVENT_SOURCE_UID_AVAILABLE | XPTI_EVENT_TARGET_UID_AVAILABLE;
  (void)xptiNotifySubscribers(layer_graph_stream, XPTI_TRACE_EDGE_CREATE, graph, edge, instance,
                              NULL);
}

static uint64_t graph_clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC minus CLOCK_MONOTONIC_RAW now (PoCL's profiling clock):
 * sampled at each use, so NTP slewing only errs over one command. */
static int64_t graph_raw_to_monotonic(void) {
  uint64_t raw0 = graph_clock_ns(CLOCK_MONOTONIC_RAW);
  uint64_t mono = graph_clock_ns(CLOCK_MONOTONIC);
  uint64_t raw1 = graph_clock_ns(CLOCK_MONOTONIC_RAW);
  return (int64_t)(mono - (raw0 + (raw1 - raw0) / 2));
}

/* The command's device run as an xptrace timed slice on its queue's track. */
static void graph_timed_slice(const graph_node_t *n) {
  static _Atomic uint16_t timed_type;
  uint16_t type = atomic_load_explicit(&timed_type, memory_order_relaxed);
  if (!type) {
    type = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
    if (!type)
      return;
    atomic_store_explicit(&timed_type, type, memory_order_relaxed);
  }
  if (n->task.status != CL_COMPLETE || !n->task.start_ns || n->task.end_ns < n->task.start_ns ||
      !xptiCheckTraceEnabled(layer_graph_stream, type))
    return;
  int64_t offset = graph_raw_to_monotonic();
  xptrace_timed_slice_t slice = {
      .begin_ns = (uint64_t)((int64_t)n->task.start_ns + offset),
      .end_ns = (uint64_t)((int64_t)n->task.end_ns + offset),
      .track_id = n->queue->id,
      .track_name = n->queue->track_name,
      .name = NULL,
  };
  (void)xptiNotifySubscribers(layer_graph_stream, type, n->graph, n->node, n->task.instance,
                              &slice);
}

static void CL_CALLBACK graph_completed(cl_event event, cl_int status, void *arg) {
  graph_node_t *n = arg;
  n->task.status = status;
  cl_ulong t[4] = {0, 0, 0, 0};
  static const cl_profiling_info which[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                             CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
  for (int i = 0; i < 4; i++)
    if (layer_next.clGetEventProfilingInfo(event, which[i], sizeof(t[i]), &t[i], NULL) != CL_SUCCESS)
      t[i] = 0;
  n->task.queued_ns = t[0];
  n->task.submit_ns = t[1];
  n->task.start_ns = t[2];
  n->task.end_ns = t[3];
  (void)xptiNotifySubscribers(layer_graph_stream, XPTI_TRACE_TASK_BEGIN, n->graph, n->node,
                              n->task.instance, &n->task);
  (void)xptiNotifySubscribers(layer_graph_stream, XPTI_TRACE_TASK_END, n->graph, n->node,
                              n->task.instance, &n->task);
  graph_timed_slice(n);
  pthread_mutex_lock(&graph_lock);
  graph_event_entry_t *e = graph_event_find_locked(event);
  if (e && e->pending == n)
    e->pending = NULL;
  if (n->internal)
    graph_event_remove_locked(event);
  pthread_mutex_unlock(&graph_lock);
  atomic_fetch_sub(&n->queue->pending, 1);
  (void)layer_next.clReleaseEvent(event); /* ours, or the retain we took */
  free(n);
}

typedef struct graph_command {
  cl_command_queue queue;
  cl_uint num_waits;
  const cl_event *waits;
  cl_event **event;    /* NULL: the function has no event out-parameter */
  cl_command_type type;
  const char *name;    /* kernel name, or the command's function */
  const char *command; /* the enqueue function */
  cl_kernel kernel;
  cl_uint work_dim;
  const size_t *global, *local;
  uint64_t bytes;
  bool barrier;        /* depends on everything before it in the queue */
} graph_command_t;

static uint64_t graph_region(const size_t *region) {
  return region ? (uint64_t)region[0] * region[1] * region[2] : 0;
}

#define P(type) xpt_cl_##type##_params_t *p = params
#define WAITS(c) ((c)->num_waits = *p->p_num_events_in_wait_list, (c)->waits = *p->p_event_wait_list, (c)->event = p->p_event)

/* Fill a command description from an enqueue's params; false if fn is
 * not an enqueue. */
static bool graph_describe(uint32_t fn, void *params, graph_command_t *c) {
  memset(c, 0, sizeof(*c));
  c->name = c->command = xpt_cl_function_name((xpt_cl_function_id_t)fn);
  switch (fn) {
  case XPT_CL_FN_clEnqueueNDRangeKernel: {
    P(clEnqueueNDRangeKernel);
    c->queue = *p->p_command_queue, WAITS(c);
    c->type = CL_COMMAND_NDRANGE_KERNEL, c->kernel = *p->p_kernel;
    c->work_dim = *p->p_work_dim, c->global = *p->p_global_work_size, c->local = *p->p_local_work_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueTask: {
    P(clEnqueueTask);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_TASK, c->kernel = *p->p_kernel;
    return true;
  }
  case XPT_CL_FN_clEnqueueNativeKernel: {
    P(clEnqueueNativeKernel);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_NATIVE_KERNEL;
    return true;
  }
  case XPT_CL_FN_clEnqueueReadBuffer: {
    P(clEnqueueReadBuffer);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_READ_BUFFER, c->bytes = *p->p_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueWriteBuffer: {
    P(clEnqueueWriteBuffer);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_WRITE_BUFFER, c->bytes = *p->p_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueCopyBuffer: {
    P(clEnqueueCopyBuffer);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_COPY_BUFFER, c->bytes = *p->p_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueReadBufferRect: {
    P(clEnqueueReadBufferRect);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_READ_BUFFER_RECT;
    c->bytes = graph_region(*p->p_region);
    return true;
  }
  case XPT_CL_FN_clEnqueueWriteBufferRect: {
    P(clEnqueueWriteBufferRect);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_WRITE_BUFFER_RECT;
    c->bytes = graph_region(*p->p_region);
    return true;
  }
  case XPT_CL_FN_clEnqueueCopyBufferRect: {
    P(clEnqueueCopyBufferRect);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_COPY_BUFFER_RECT;
    c->bytes = graph_region(*p->p_region);
    return true;
  }
  case XPT_CL_FN_clEnqueueReadImage: {
    P(clEnqueueReadImage);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_READ_IMAGE;
    return true;
  }
  case XPT_CL_FN_clEnqueueWriteImage: {
    P(clEnqueueWriteImage);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_WRITE_IMAGE;
    return true;
  }
  case XPT_CL_FN_clEnqueueCopyImage: {
    P(clEnqueueCopyImage);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_COPY_IMAGE;
    return true;
  }
  case XPT_CL_FN_clEnqueueCopyImageToBuffer: {
    P(clEnqueueCopyImageToBuffer);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_COPY_IMAGE_TO_BUFFER;
    return true;
  }
  case XPT_CL_FN_clEnqueueCopyBufferToImage: {
    P(clEnqueueCopyBufferToImage);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_COPY_BUFFER_TO_IMAGE;
    return true;
  }
  case XPT_CL_FN_clEnqueueMapBuffer: {
    P(clEnqueueMapBuffer);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_MAP_BUFFER, c->bytes = *p->p_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueMapImage: {
    P(clEnqueueMapImage);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_MAP_IMAGE;
    return true;
  }
  case XPT_CL_FN_clEnqueueUnmapMemObject: {
    P(clEnqueueUnmapMemObject);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_UNMAP_MEM_OBJECT;
    return true;
  }
  case XPT_CL_FN_clEnqueueFillBuffer: {
    P(clEnqueueFillBuffer);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_FILL_BUFFER, c->bytes = *p->p_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueFillImage: {
    P(clEnqueueFillImage);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_FILL_IMAGE;
    return true;
  }
  case XPT_CL_FN_clEnqueueMigrateMemObjects: {
    P(clEnqueueMigrateMemObjects);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_MIGRATE_MEM_OBJECTS;
    return true;
  }
  case XPT_CL_FN_clEnqueueMarkerWithWaitList: {
    P(clEnqueueMarkerWithWaitList);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_MARKER;
    c->barrier = c->num_waits == 0;
    return true;
  }
  case XPT_CL_FN_clEnqueueBarrierWithWaitList: {
    P(clEnqueueBarrierWithWaitList);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_BARRIER;
    c->barrier = true;
    return true;
  }
  case XPT_CL_FN_clEnqueueMarker: {
    P(clEnqueueMarker);
    c->queue = *p->p_command_queue, c->event = p->p_event, c->type = CL_COMMAND_MARKER;
    c->barrier = true;
    return true;
  }
  case XPT_CL_FN_clEnqueueBarrier: {
    P(clEnqueueBarrier);
    c->queue = *p->p_command_queue, c->type = CL_COMMAND_BARRIER, c->barrier = true;
    return true;
  }
  case XPT_CL_FN_clEnqueueWaitForEvents: {
    P(clEnqueueWaitForEvents);
    c->queue = *p->p_command_queue, c->type = CL_COMMAND_BARRIER;
    c->num_waits = *p->p_num_events, c->waits = *p->p_event_list;
    return true;
  }
  case XPT_CL_FN_clEnqueueSVMFree: {
    P(clEnqueueSVMFree);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_SVM_FREE;
    return true;
  }
  case XPT_CL_FN_clEnqueueSVMMemcpy: {
    P(clEnqueueSVMMemcpy);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_SVM_MEMCPY, c->bytes = *p->p_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueSVMMemFill: {
    P(clEnqueueSVMMemFill);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_SVM_MEMFILL, c->bytes = *p->p_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueSVMMap: {
    P(clEnqueueSVMMap);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_SVM_MAP, c->bytes = *p->p_size;
    return true;
  }
  case XPT_CL_FN_clEnqueueSVMUnmap: {
    P(clEnqueueSVMUnmap);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_SVM_UNMAP;
    return true;
  }
  case XPT_CL_FN_clEnqueueSVMMigrateMem: {
    P(clEnqueueSVMMigrateMem);
    c->queue = *p->p_command_queue, WAITS(c), c->type = CL_COMMAND_SVM_MIGRATE_MEM;
    return true;
  }
  default:
    return false;
  }
}

static void graph_sizes(char *out, size_t size, cl_uint dim, const size_t *v) {
  out[0] = 0;
  if (!v) {
    snprintf(out, size, "-");
    return;
  }
  size_t used = 0;
  for (cl_uint i = 0; i < dim && i < 3 && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, i ? ",%zu" : "%zu", v[i]);
}

/* Node, metadata and edges of a command that was enqueued successfully;
 * returns its completion record, NULL when it is not graphed. */
static graph_node_t *graph_enqueued(graph_command_t *c, const void *loader_frame) {
  char kernel_name[128];
  if (c->kernel && layer_next.clGetKernelInfo(c->kernel, CL_KERNEL_FUNCTION_NAME,
                                              sizeof(kernel_name), kernel_name, NULL) == CL_SUCCESS)
    c->name = kernel_name;
  char file[256];
  uint32_t line;
  const void *site = xsym_call_site(graph_skip_bases, sizeof graph_skip_bases / sizeof graph_skip_bases[0],
                                    loader_frame);
  xsym_site_resolve(site, file, sizeof(file), &line);

  pthread_mutex_lock(&graph_lock);
  graph_queue_t *q = graph_queue_locked(c->queue, true);
  if (!q || !q->graph) {
    pthread_mutex_unlock(&graph_lock);
    return NULL;
  }
  xpti_payload_t payload = xpti_payload_make(c->name, file[0] ? file : NULL, line, 0, site);
  uint64_t instance = 0;
  uint16_t type = c->kernel ? XPTI_EVENT_ALGORITHM
                  : c->barrier ? XPTI_EVENT_BARRIER
                  : (c->type == CL_COMMAND_READ_BUFFER || c->type == CL_COMMAND_READ_BUFFER_RECT ||
                     c->type == CL_COMMAND_READ_IMAGE) ? XPTI_EVENT_OFFLOAD_READ
                  : (c->type == CL_COMMAND_WRITE_BUFFER || c->type == CL_COMMAND_WRITE_BUFFER_RECT ||
                     c->type == CL_COMMAND_WRITE_IMAGE) ? XPTI_EVENT_OFFLOAD_WRITE
                                                        : XPTI_EVENT_ASYNC;
  xpti_trace_event_data_t *node = xptiMakeEvent(c->name, &payload, type, XPTI_ACTIVITY_ACTIVE, &instance);
  if (!node) {
    pthread_mutex_unlock(&graph_lock);
    return NULL;
  }
  if (instance == 1) {
    char text[96];
    graph_add_metadata(node, "kernel_name", c->kernel ? c->name : "");
    graph_add_metadata(node, "command", c->command);
    snprintf(text, sizeof(text), "%" PRIu64, q->id);
    graph_add_metadata(node, "queue_id", text);
    graph_sizes(text, sizeof(text), c->work_dim, c->global);
    graph_add_metadata(node, "global_size", text);
    graph_sizes(text, sizeof(text), c->work_dim, c->local);
    graph_add_metadata(node, "local_size", text);
    snprintf(text, sizeof(text), "%" PRIu64, c->bytes);
    graph_add_metadata(node, "bytes", text);
    (void)xptiNotifySubscribers(layer_graph_stream, XPTI_TRACE_NODE_CREATE, q->graph, node,
                                instance, NULL);
  }
  uint64_t uid = node->unique_id;
  /* Edges: the wait list, the in-order predecessor, what a barrier waits for. */
  for (cl_uint i = 0; c->waits && i < c->num_waits; i++) {
    graph_event_entry_t *e = graph_event_find_locked(c->waits[i]);
    if (e)
      graph_edge_locked(q->graph, e->uid, uid);
  }
  if (q->in_order) {
    graph_edge_locked(q->graph, q->last_uid, uid);
  } else if (c->barrier) {
    for (uint32_t i = 0; i < q->since_count; i++)
      graph_edge_locked(q->graph, q->since_barrier[i], uid);
    if (!q->since_count)
      graph_edge_locked(q->graph, q->barrier_uid, uid);
  } else {
    graph_edge_locked(q->graph, q->barrier_uid, uid);
  }
  q->last_uid = uid;
  if (c->barrier) {
    q->barrier_uid = uid;
    q->since_count = 0;
  } else if (q->since_count < GRAPH_SINCE_BARRIER) {
    q->since_barrier[q->since_count++] = uid;
  }
  pthread_mutex_unlock(&graph_lock);

  graph_node_t *n = calloc(1, sizeof(*n));
  if (!n)
    return NULL;
  n->node = node;
  n->graph = q->graph;
  n->queue = q;
  n->task.queue = c->queue;
  n->task.queue_id = q->id;
  n->task.command_type = c->type;
  n->task.name = node->reserved.payload ? node->reserved.payload->name : NULL;
  n->task.instance = instance;
  n->task.bytes = c->bytes;
  return n;
}

static void graph_enqueue_before(graph_command_t *c, graph_call_t *g, const void *return_address) {
  g->active = true;
  g->internal_event = NULL;
  g->return_address = return_address;
  /* The completion needs an event: ours when the program passed none. */
  if (c->event && !*c->event)
    *c->event = &g->internal_event;
}

void graph_before(uint32_t fn, void *params, graph_call_t *g, const void *caller) {
  g->active = false;
  switch (fn) {
  case XPT_CL_FN_clCreateCommandQueue: {
    /* Profiling on, transparently: queries report the program's bits. */
    P(clCreateCommandQueue);
    g->saved_props = *p->p_properties;
    *p->p_properties |= CL_QUEUE_PROFILING_ENABLE;
    g->active = true;
    return;
  }
  case XPT_CL_FN_clCreateCommandQueueWithProperties: {
    P(clCreateCommandQueueWithProperties);
    const cl_queue_properties *in = *p->p_properties;
    size_t n = 0;
    bool found = false;
    g->app_props = in;
    g->saved_props = 0;
    for (; in && in[n] && n + 3 < 32; n += 2) {
      g->props_copy[n] = in[n];
      g->props_copy[n + 1] = in[n + 1];
      if (in[n] == CL_QUEUE_PROPERTIES) {
        g->saved_props = in[n + 1];
        g->props_copy[n + 1] |= CL_QUEUE_PROFILING_ENABLE;
        found = true;
      }
    }
    if (in && in[n]) /* too long to copy: leave it alone */
      return;
    if (!found) {
      g->props_copy[n++] = CL_QUEUE_PROPERTIES;
      g->props_copy[n++] = CL_QUEUE_PROFILING_ENABLE;
    }
    g->props_copy[n] = 0;
    *p->p_properties = g->props_copy;
    g->active = true;
    return;
  }
  case XPT_CL_FN_clGetCommandQueueInfo:
  case XPT_CL_FN_clFinish:
  case XPT_CL_FN_clWaitForEvents:
    g->active = true;
    return;
  case XPT_CL_FN_clReleaseEvent: {
    /* The program's last reference: forget the event's node. */
    P(clReleaseEvent);
    cl_uint refs = 0;
    if (*p->p_event && layer_next.clGetEventInfo(*p->p_event, CL_EVENT_REFERENCE_COUNT,
                                                 sizeof(refs), &refs, NULL) == CL_SUCCESS &&
        refs == 1) {
      pthread_mutex_lock(&graph_lock);
      graph_event_entry_t *e = graph_event_find_locked(*p->p_event);
      if (e && !e->pending)
        graph_event_remove_locked(*p->p_event);
      pthread_mutex_unlock(&graph_lock);
    }
    return;
  }
  default: {
    graph_command_t c;
    if (graph_describe(fn, params, &c))
      graph_enqueue_before(&c, g, caller);
    return;
  }
  }
}

static void graph_wait_queue(graph_queue_t *q) {
  struct timespec nap = {0, 20000};
  for (int i = 0; i < 100000 && atomic_load(&q->pending) > 0; i++)
    i < 100 ? (void)sched_yield() : (void)nanosleep(&nap, NULL);
}

static void graph_wait_event(cl_event e) {
  struct timespec nap = {0, 20000};
  for (int i = 0; i < 100000; i++) {
    pthread_mutex_lock(&graph_lock);
    graph_event_entry_t *x = graph_event_find_locked(e);
    bool pending = x && x->pending;
    pthread_mutex_unlock(&graph_lock);
    if (!pending)
      return;
    i < 100 ? (void)sched_yield() : (void)nanosleep(&nap, NULL);
  }
}

void graph_after(uint32_t fn, void *params, const void *result, graph_call_t *g) {
  switch (fn) {
  case XPT_CL_FN_clCreateCommandQueue: {
    P(clCreateCommandQueue);
    cl_command_queue q = *(const cl_command_queue *)result;
    *p->p_properties = g->saved_props;
    if (q) {
      pthread_mutex_lock(&graph_lock);
      graph_queue_t *gq = graph_queue_made_locked(q);
      if (gq)
        gq->added_profiling = !(g->saved_props & CL_QUEUE_PROFILING_ENABLE);
      pthread_mutex_unlock(&graph_lock);
    }
    return;
  }
  case XPT_CL_FN_clCreateCommandQueueWithProperties: {
    P(clCreateCommandQueueWithProperties);
    cl_command_queue q = *(const cl_command_queue *)result;
    *p->p_properties = g->app_props;
    if (q) {
      pthread_mutex_lock(&graph_lock);
      graph_queue_t *gq = graph_queue_made_locked(q);
      if (gq)
        gq->added_profiling = !(g->saved_props & CL_QUEUE_PROFILING_ENABLE);
      pthread_mutex_unlock(&graph_lock);
    }
    return;
  }
  case XPT_CL_FN_clGetCommandQueueInfo: {
    P(clGetCommandQueueInfo);
    if (*(const cl_int *)result != CL_SUCCESS || *p->p_param_name != CL_QUEUE_PROPERTIES ||
        !*p->p_param_value)
      return;
    pthread_mutex_lock(&graph_lock);
    graph_queue_t *q = graph_queue_locked(*p->p_command_queue, false);
    if (q && q->added_profiling)
      *(cl_command_queue_properties *)*p->p_param_value &= ~(cl_command_queue_properties)CL_QUEUE_PROFILING_ENABLE;
    pthread_mutex_unlock(&graph_lock);
    return;
  }
  case XPT_CL_FN_clFinish: {
    /* Report every completion of the queue before the program goes on. */
    P(clFinish);
    pthread_mutex_lock(&graph_lock);
    graph_queue_t *q = graph_queue_locked(*p->p_command_queue, false);
    pthread_mutex_unlock(&graph_lock);
    if (q && *(const cl_int *)result == CL_SUCCESS)
      graph_wait_queue(q);
    return;
  }
  case XPT_CL_FN_clWaitForEvents: {
    P(clWaitForEvents);
    if (*(const cl_int *)result == CL_SUCCESS)
      for (cl_uint i = 0; i < *p->p_num_events; i++)
        graph_wait_event((*p->p_event_list)[i]);
    return;
  }
  default:
    break;
  }
  /* An enqueue. */
  graph_command_t c;
  graph_describe(fn, params, &c);
  cl_int rc = fn == XPT_CL_FN_clEnqueueMapBuffer || fn == XPT_CL_FN_clEnqueueMapImage
                  ? (*(void *const *)result ? CL_SUCCESS : CL_INVALID_VALUE)
                  : *(const cl_int *)result;
  cl_event *out = c.event ? *c.event : NULL;
  bool internal = out && out == &g->internal_event;
  cl_event event = out ? *out : NULL;
  if (internal)
    *c.event = NULL; /* the program passed none */
  graph_node_t *n = rc == CL_SUCCESS ? graph_enqueued(&c, g->return_address) : NULL;
  if (!n || !event) {
    /* Not graphed, failed, or no event parameter: report the command
     * without device times. */
    if (internal && event)
      (void)layer_next.clReleaseEvent(event);
    if (n) {
      (void)xptiNotifySubscribers(layer_graph_stream, XPTI_TRACE_TASK_BEGIN, n->graph, n->node,
                                  n->task.instance, &n->task);
      (void)xptiNotifySubscribers(layer_graph_stream, XPTI_TRACE_TASK_END, n->graph, n->node,
                                  n->task.instance, &n->task);
      free(n);
    }
    return;
  }
  n->event = event;
  n->internal = internal;
  if (!internal)
    (void)layer_next.clRetainEvent(event); /* alive until our callback ran */
  graph_event_entry_t *e = calloc(1, sizeof(*e));
  pthread_mutex_lock(&graph_lock);
  graph_event_remove_locked(event); /* a reused handle */
  if (e) {
    e->event = event;
    e->uid = n->node->unique_id;
    e->pending = n;
    e->next = *graph_event_bucket(event);
    *graph_event_bucket(event) = e;
  }
  pthread_mutex_unlock(&graph_lock);
  atomic_fetch_add(&n->queue->pending, 1);
  if (layer_next.clSetEventCallback(event, CL_COMPLETE, graph_completed, n) != CL_SUCCESS)
    graph_completed(event, CL_COMPLETE, n);
}
