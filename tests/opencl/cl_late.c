/* A listener that appears after the layer started is honoured: the
 * program (linked with the dispatcher the layer's proxy loads) turns
 * tracing on and registers opencl.api and opencl.graph callbacks only
 * after its first OpenCL calls (queue included); then, and only then,
 * notifications arrive, with device times.  The queue reports the
 * program's properties before, during and after. */
#include "cl_common.h"
#include <stdatomic.h>
#include <string.h>
#include <xptrace/cl_tracing.h>
#include <xpti/xpti_trace_framework.h>

static _Atomic int begins, ends, wrong;

static void on_api(uint16_t type, xpti_trace_event_data_t *parent, xpti_trace_event_data_t *event,
                   uint64_t instance, const void *user_data) {
  (void)parent, (void)event;
  const xpt_cl_api_call_t *call = user_data;
  if (!call || call->function_id != XPT_CL_FN_clGetPlatformInfo || instance == 0 ||
      strcmp(call->function_name, "clGetPlatformInfo") != 0)
    atomic_fetch_add(&wrong, 1);
  else if (type == XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN)
    atomic_fetch_add(&begins, 1);
  else if (type == XPTI_TRACE_FUNCTION_WITH_ARGS_END && call->return_value &&
           *(const cl_int *)call->return_value == CL_SUCCESS)
    atomic_fetch_add(&ends, 1);
  else
    atomic_fetch_add(&wrong, 1);
}

static _Atomic int nodes, task_begins, task_ends, timed;

static void on_graph(uint16_t type, xpti_trace_event_data_t *parent, xpti_trace_event_data_t *event,
                     uint64_t instance, const void *user_data) {
  (void)parent, (void)event, (void)instance;
  const xpt_cl_task_t *task = user_data;
  if (type == XPTI_TRACE_NODE_CREATE)
    atomic_fetch_add(&nodes, 1);
  if (type == XPTI_TRACE_TASK_BEGIN)
    atomic_fetch_add(&task_begins, 1);
  if (type == XPTI_TRACE_TASK_END) {
    atomic_fetch_add(&task_ends, 1);
    if (task && task->start_ns && task->end_ns >= task->start_ns)
      atomic_fetch_add(&timed, 1);
  }
}

static void check_properties(cl_command_queue queue) {
  cl_command_queue_properties props = ~(cl_command_queue_properties)0;
  CL_CHECK(clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof(props), &props, NULL));
  CHECK(props == 0); /* the program asked for none: profiling stays hidden */
}

static void write_and_finish(cl_command_queue queue, cl_mem buffer) {
  int data[16] = {0};
  CL_CHECK(clEnqueueWriteBuffer(queue, buffer, CL_FALSE, 0, sizeof(data), data, 0, NULL, NULL));
  CL_CHECK(clFinish(queue));
}

static void platform_names(cl_platform_id platform, int count) {
  char name[128];
  for (int i = 0; i < count; i++)
    CL_CHECK(clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof(name), name, NULL));
}

int main(void) {
  cl_platform_id platform;
  cl_uint n = 0;
  if (clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS || n == 0)
    return CL_SKIP;
  platform_names(platform, 3); /* no listener yet */
  CHECK(begins == 0 && ends == 0);

  xptiForceSetTraceEnabled(true);
  uint8_t stream = xptiRegisterStream("opencl.api");
  CHECK(stream != XPTI_INVALID_STREAM_ID);
  CHECK(xptiRegisterCallback(stream, XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN, on_api) ==
        XPTI_RESULT_SUCCESS);
  CHECK(xptiRegisterCallback(stream, XPTI_TRACE_FUNCTION_WITH_ARGS_END, on_api) ==
        XPTI_RESULT_SUCCESS);
  platform_names(platform, 4);
  CHECK(begins == 4 && ends == 4 && wrong == 0);

  /* and one that leaves is no longer called */
  CHECK(xptiUnregisterCallback(stream, XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN, on_api) ==
        XPTI_RESULT_SUCCESS);
  CHECK(xptiUnregisterCallback(stream, XPTI_TRACE_FUNCTION_WITH_ARGS_END, on_api) ==
        XPTI_RESULT_SUCCESS);
  platform_names(platform, 2);
  CHECK(begins == 4 && ends == 4 && wrong == 0);

  /* the graph: a queue made before anyone listened */
  cl_device_id device;
  cl_int err;
  CL_CHECK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL));
  cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  CL_CHECK(err);
  cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, NULL, &err);
  CL_CHECK(err);
  cl_mem buffer = clCreateBuffer(context, CL_MEM_READ_WRITE, 64, NULL, &err);
  CL_CHECK(err);
  check_properties(queue);
  write_and_finish(queue, buffer);
  CHECK(nodes == 0 && task_ends == 0);

  uint8_t graph = xptiRegisterStream("opencl.graph");
  CHECK(graph != XPTI_INVALID_STREAM_ID);
  static const uint16_t graph_types[] = {XPTI_TRACE_NODE_CREATE, XPTI_TRACE_TASK_BEGIN,
                                         XPTI_TRACE_TASK_END};
  for (int i = 0; i < 3; i++)
    CHECK(xptiRegisterCallback(graph, graph_types[i], on_graph) == XPTI_RESULT_SUCCESS);
  write_and_finish(queue, buffer);
  write_and_finish(queue, buffer); /* same call site: one node, two tasks */
  CHECK(nodes == 1 && task_begins == 2 && task_ends == 2);
  CHECK(timed == 2); /* device times: the queue had profiling from the start */
  check_properties(queue);

  for (int i = 0; i < 3; i++)
    CHECK(xptiUnregisterCallback(graph, graph_types[i], on_graph) == XPTI_RESULT_SUCCESS);
  write_and_finish(queue, buffer);
  CHECK(nodes == 1 && task_ends == 2);
  check_properties(queue);
  CL_CHECK(clReleaseMemObject(buffer));
  CL_CHECK(clReleaseCommandQueue(queue));
  CL_CHECK(clReleaseContext(context));
  puts("cl_late: ok");
  return 0;
}
