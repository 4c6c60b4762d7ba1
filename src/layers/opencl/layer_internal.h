/* Internals shared by the OpenCL layer's files. */
#ifndef XPT_CL_LAYER_INTERNAL_H
#define XPT_CL_LAYER_INTERNAL_H

#include <xptrace/cl_tracing.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The next layer (or the loader's dispatch) below us. */
extern cl_icd_dispatch layer_next;
extern uint8_t layer_graph_stream;

/* The functions the graph stream needs to see: queue creation, enqueues,
 * waits and event releases.  A constant for every id after inlining. */
static inline bool layer_graph_fn(uint32_t fn) {
  switch (fn) {
  case XPT_CL_FN_clCreateCommandQueue:
  case XPT_CL_FN_clCreateCommandQueueWithProperties:
  case XPT_CL_FN_clGetCommandQueueInfo:
  case XPT_CL_FN_clFinish:
  case XPT_CL_FN_clWaitForEvents:
  case XPT_CL_FN_clReleaseEvent:
  case XPT_CL_FN_clEnqueueReadBuffer:
  case XPT_CL_FN_clEnqueueWriteBuffer:
  case XPT_CL_FN_clEnqueueCopyBuffer:
  case XPT_CL_FN_clEnqueueReadImage:
  case XPT_CL_FN_clEnqueueWriteImage:
  case XPT_CL_FN_clEnqueueCopyImage:
  case XPT_CL_FN_clEnqueueCopyImageToBuffer:
  case XPT_CL_FN_clEnqueueCopyBufferToImage:
  case XPT_CL_FN_clEnqueueMapBuffer:
  case XPT_CL_FN_clEnqueueMapImage:
  case XPT_CL_FN_clEnqueueUnmapMemObject:
  case XPT_CL_FN_clEnqueueNDRangeKernel:
  case XPT_CL_FN_clEnqueueTask:
  case XPT_CL_FN_clEnqueueNativeKernel:
  case XPT_CL_FN_clEnqueueMarker:
  case XPT_CL_FN_clEnqueueBarrier:
  case XPT_CL_FN_clEnqueueWaitForEvents:
  case XPT_CL_FN_clEnqueueReadBufferRect:
  case XPT_CL_FN_clEnqueueWriteBufferRect:
  case XPT_CL_FN_clEnqueueCopyBufferRect:
  case XPT_CL_FN_clEnqueueFillBuffer:
  case XPT_CL_FN_clEnqueueFillImage:
  case XPT_CL_FN_clEnqueueMigrateMemObjects:
  case XPT_CL_FN_clEnqueueMarkerWithWaitList:
  case XPT_CL_FN_clEnqueueBarrierWithWaitList:
  case XPT_CL_FN_clEnqueueSVMFree:
  case XPT_CL_FN_clEnqueueSVMMemcpy:
  case XPT_CL_FN_clEnqueueSVMMemFill:
  case XPT_CL_FN_clEnqueueSVMMap:
  case XPT_CL_FN_clEnqueueSVMUnmap:
  case XPT_CL_FN_clEnqueueSVMMigrateMem:
    return true;
  default:
    return false;
  }
}

/* Graph bookkeeping that runs whenever a dispatcher is loaded, listener
 * or not: queues get profiling from the start (so a listener that comes
 * later sees device times) and keep reporting the program's properties
 * after a listener left; waits deliver pending completions. */
static inline bool layer_graph_always(uint32_t fn) {
  switch (fn) {
  case XPT_CL_FN_clCreateCommandQueue:
  case XPT_CL_FN_clCreateCommandQueueWithProperties:
  case XPT_CL_FN_clGetCommandQueueInfo:
  case XPT_CL_FN_clFinish:
  case XPT_CL_FN_clWaitForEvents:
  case XPT_CL_FN_clReleaseEvent:
    return true;
  default:
    return false;
  }
}

/* What graph_before changed in the arguments, restored by graph_after. */
typedef struct graph_call {
  bool active;
  cl_event internal_event; /* ours when the program passed none */
  cl_command_queue_properties saved_props;
  cl_queue_properties props_copy[32];
  const cl_queue_properties *app_props;
  const void *return_address;
} graph_call_t;

void graph_init(void);
void graph_before(uint32_t fn, void *params, graph_call_t *g, const void *caller);
void graph_after(uint32_t fn, void *params, const void *result, graph_call_t *g);

#endif
