/* Document 003's two examples, as written there (in C, with the 1.8
 * headers' zelTracerCreate(desc, &handle) and the epilogue reading the
 * instance data through *ppTracerInstanceUserData), through the loader
 * with ZE_ENABLE_TRACING_LAYER=1.  Each example appends one kernel with
 * the tracer enabled: its prologue and epilogue must run once, in that
 * order, on the same instance data; calls made while no tracer is
 * enabled run none. */
#include <level_zero/layers/zel_tracing_api.h>
#include <level_zero/layers/zel_tracing_register_cb.h>
#include <time.h>

#include "ze_common.h"

typedef struct _my_tracer_data_t {
  uint32_t instance;
} my_tracer_data_t;

typedef struct _my_instance_data_t {
  clock_t start;
} my_instance_data_t;

static int enters, exits, mismatches;

void OnEnterCommandListAppendLaunchKernel(ze_command_list_append_launch_kernel_params_t *params,
                                          ze_result_t result, void *pTracerUserData,
                                          void **ppTracerInstanceUserData);
void OnExitCommandListAppendLaunchKernel(ze_command_list_append_launch_kernel_params_t *params,
                                         ze_result_t result, void *pTracerUserData,
                                         void **ppTracerInstanceUserData);

void OnEnterCommandListAppendLaunchKernel(ze_command_list_append_launch_kernel_params_t *params,
                                          ze_result_t result, void *pTracerUserData,
                                          void **ppTracerInstanceUserData) {
  (void)params, (void)result, (void)pTracerUserData;
  my_instance_data_t *instance_data = malloc(sizeof(my_instance_data_t));
  *ppTracerInstanceUserData = instance_data;
  instance_data->start = clock();
  enters++;
}

void OnExitCommandListAppendLaunchKernel(ze_command_list_append_launch_kernel_params_t *params,
                                         ze_result_t result, void *pTracerUserData,
                                         void **ppTracerInstanceUserData) {
  (void)params;
  clock_t end = clock();
  my_tracer_data_t *tracer_data = (my_tracer_data_t *)pTracerUserData;
  my_instance_data_t *instance_data = (my_instance_data_t *)*ppTracerInstanceUserData;
  if (!instance_data || result != ZE_RESULT_SUCCESS) {
    mismatches++;
    return;
  }
  float time = 1000.f * (end - instance_data->start) / CLOCKS_PER_SEC;
  printf("zeCommandListAppendLaunchKernel #%d takes %s ms\n", tracer_data->instance++,
         time >= 0 ? "some" : "negative");
  free(instance_data);
  exits++;
}

static ze_command_list_handle_t hCommandList;
static ze_kernel_handle_t hFunction;
static ze_group_count_t launchArgs = {1, 1, 1};

// An example using deprecated setepilogue/setprologue functions
static void TracingExample1(void) {
  my_tracer_data_t tracer_data = {0};
  zel_tracer_desc_t tracer_desc;
  tracer_desc.stype = ZEL_STRUCTURE_TYPE_TRACER_DESC;
  tracer_desc.pUserData = &tracer_data;
  zel_tracer_handle_t hTracer;
  ZE_CHECK(zelTracerCreate(&tracer_desc, &hTracer));

  // Set all callbacks
  zel_core_callbacks_t prologCbs = {0};
  zel_core_callbacks_t epilogCbs = {0};
  prologCbs.CommandList.pfnAppendLaunchKernelCb = OnEnterCommandListAppendLaunchKernel;
  epilogCbs.CommandList.pfnAppendLaunchKernelCb = OnExitCommandListAppendLaunchKernel;

  ZE_CHECK(zelTracerSetPrologues(hTracer, &prologCbs));
  ZE_CHECK(zelTracerSetEpilogues(hTracer, &epilogCbs));

  ZE_CHECK(zelTracerSetEnabled(hTracer, 1));

  ZE_CHECK(zeCommandListAppendLaunchKernel(hCommandList, hFunction, &launchArgs, NULL, 0, NULL));

  ZE_CHECK(zelTracerSetEnabled(hTracer, 0));
  ZE_CHECK(zelTracerDestroy(hTracer));
}

// an example using RegisterCallback functions
static void TracingExample2(void) {
  my_tracer_data_t tracer_data = {0};
  zel_tracer_desc_t tracer_desc;
  tracer_desc.stype = ZEL_STRUCTURE_TYPE_TRACER_DESC;
  tracer_desc.pUserData = &tracer_data;
  zel_tracer_handle_t hTracer;
  ZE_CHECK(zelTracerCreate(&tracer_desc, &hTracer));

  ZE_CHECK(zelTracerCommandListAppendLaunchKernelRegisterCallback(
      hTracer, ZEL_REGISTER_PROLOGUE, OnEnterCommandListAppendLaunchKernel));
  ZE_CHECK(zelTracerCommandListAppendLaunchKernelRegisterCallback(
      hTracer, ZEL_REGISTER_EPILOGUE, OnExitCommandListAppendLaunchKernel));

  ZE_CHECK(zelTracerSetEnabled(hTracer, 1));

  ZE_CHECK(zeCommandListAppendLaunchKernel(hCommandList, hFunction, &launchArgs, NULL, 0, NULL));

  ZE_CHECK(zelTracerSetEnabled(hTracer, 0));
  ZE_CHECK(zelTracerDestroy(hTracer));
}

int main(void) {
  ze_env_t env;
  ze_env_open(&env);
  hCommandList = ze_env_list(&env);
  hFunction = ze_env_kernel(&env, "nop");
  TracingExample1();
  TracingExample2();
  /* No tracer now: nothing runs. */
  ZE_CHECK(zeCommandListAppendLaunchKernel(hCommandList, hFunction, &launchArgs, NULL, 0, NULL));
  ZE_CHECK(zeKernelDestroy(hFunction));
  ZE_CHECK(zeCommandListDestroy(hCommandList));
  ze_env_close(&env);
  printf("prologues %d epilogues %d unpaired %d\n", enters, exits, mismatches);
  return enters == 2 && exits == 2 && mismatches == 0 ? 0 : 1;
}
