/* A listener that appears after the layer started is honoured: the
 * program (linked with the dispatcher the layer's proxy loads) turns
 * tracing on and registers opencl.api callbacks only after its first
 * OpenCL calls; then, and only then, notifications arrive. */
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
  puts("cl_late: ok");
  return 0;
}
