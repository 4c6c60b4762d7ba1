/* The tracer API on real OpenCL calls through the layer: typed and table
 * registration, argument rewriting in a prologue, results in epilogues,
 * nested calls untraced, self-destroy refused, pairing while another
 * thread toggles, destroy waiting for callbacks in flight, re-enable. */
#include "cl_common.h"
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <xptrace/cl_tracing.h>

static cl_env_t env;
static _Atomic long pro_calls, epi_calls, unpaired, nested_seen;
static _Atomic cl_int last_result = 1;

static void on_set_arg_pro(xpt_cl_clSetKernelArg_params_t *p, cl_int *result, void *user,
                           void **inst, uint64_t corr) {
  CHECK(result == NULL);
  CHECK(user == &env);
  atomic_fetch_add(&pro_calls, 1);
  *inst = (void *)(uintptr_t)corr;
  if (*p->p_arg_index == 99) /* rewrite an argument: the call sees index 0 */
    *p->p_arg_index = 0;
}

static void on_set_arg_epi(xpt_cl_clSetKernelArg_params_t *p, cl_int *result, void *user,
                           void **inst, uint64_t corr) {
  (void)p, (void)user;
  if (*inst != (void *)(uintptr_t)corr)
    atomic_fetch_add(&unpaired, 1);
  atomic_fetch_add(&epi_calls, 1);
  last_result = *result;
}

static void on_platform_info_pro(xpt_cl_clGetPlatformInfo_params_t *p, cl_int *r, void *u,
                                 void **i, uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  atomic_fetch_add(&nested_seen, 1);
  char name[64];
  /* A call from inside a callback: must not re-enter this prologue. */
  clGetPlatformInfo(env.platform, CL_PLATFORM_NAME, sizeof(name), name, NULL);
}

static xpt_cl_tracer_handle_t self_tracer;
static int self_destroy_rc = 1;
static void on_finish_pro(xpt_cl_clFinish_params_t *p, cl_int *r, void *u, void **i, uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  self_destroy_rc = xpt_cl_tracer_destroy(self_tracer);
}

static cl_kernel kernel;
static cl_mem buffer;
static void *caller(void *arg) {
  (void)arg;
  cl_int err;
  /* A kernel per thread: clSetKernelArg on one kernel is not thread-safe. */
  cl_kernel own = clCreateKernel(env.program, "vadd", &err);
  CL_CHECK(err);
  for (int i = 0; i < 20000; i++)
    CL_CHECK(clSetKernelArg(own, 0, sizeof(buffer), &buffer));
  CL_CHECK(clReleaseKernel(own));
  return NULL;
}

static _Atomic int slow_state;
static void on_release_slow_pro(xpt_cl_clRetainKernel_params_t *p, cl_int *r, void *u, void **i,
                                uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  atomic_store(&slow_state, 1);
  usleep(30000);
}
static void on_release_slow_epi(xpt_cl_clRetainKernel_params_t *p, cl_int *r, void *u, void **i,
                                uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  usleep(10000);
  atomic_store(&slow_state, 2);
}
static void *slow_caller(void *arg) {
  (void)arg;
  CL_CHECK(clRetainKernel(kernel));
  CL_CHECK(clReleaseKernel(kernel));
  return NULL;
}

int main(void) {
  cl_env_open(&env);
  cl_int err;
  kernel = clCreateKernel(env.program, "vadd", &err);
  CL_CHECK(err);
  buffer = clCreateBuffer(env.context, CL_MEM_READ_WRITE, 64, NULL, &err);
  CL_CHECK(err);

  xpt_cl_tracer_desc_t desc = {XPT_CL_TRACER_DESC_VERSION, &env};
  xpt_cl_tracer_handle_t t;
  CHECK(xpt_cl_tracer_create(&desc, &t) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_register_clSetKernelArg(t, XPT_CL_PROLOGUE, on_set_arg_pro) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_register_clSetKernelArg(t, XPT_CL_EPILOGUE, on_set_arg_epi) == XPT_CL_SUCCESS);
  xpt_cl_callbacks_t table;
  memset(&table, 0, sizeof(table));
  table.clGetPlatformInfo = on_platform_info_pro;
  CHECK(xpt_cl_tracer_set_prologues(t, &table) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_register_clSetKernelArg(t, XPT_CL_PROLOGUE, on_set_arg_pro) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_set_enabled(t, true) == XPT_CL_SUCCESS);
  /* changes while enabled are refused */
  CHECK(xpt_cl_tracer_reset_callbacks(t) == XPT_CL_ERROR_TRACER_ENABLED);
  CHECK(xpt_cl_tracer_register_callback(t, 7, XPT_CL_FN_clFinish, NULL) == XPT_CL_ERROR_INVALID_ARGUMENT);

  /* argument rewriting: index 99 would fail; the prologue makes it 0 */
  CHECK(clSetKernelArg(kernel, 99, sizeof(buffer), &buffer) == CL_SUCCESS);
  CHECK(last_result == CL_SUCCESS);
  CHECK(clSetKernelArg(kernel, 7, sizeof(buffer), &buffer) == CL_INVALID_ARG_INDEX);
  CHECK(last_result == CL_INVALID_ARG_INDEX); /* the epilogue sees the result */
  CHECK(pro_calls == 2 && epi_calls == 2);

  char name[64];
  CL_CHECK(clGetPlatformInfo(env.platform, CL_PLATFORM_NAME, sizeof(name), name, NULL));
  CHECK(nested_seen == 1);

  /* pairing while another thread toggles the tracer */
  pthread_t c[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&c[i], NULL, caller, NULL);
  for (int i = 0; i < 2000; i++)
    CHECK(xpt_cl_tracer_set_enabled(t, i & 1) == XPT_CL_SUCCESS);
  for (int i = 0; i < 4; i++)
    pthread_join(c[i], NULL);
  CHECK(atomic_load(&pro_calls) == atomic_load(&epi_calls));
  CHECK(atomic_load(&unpaired) == 0);
  /* re-enable after disable works */
  CHECK(xpt_cl_tracer_set_enabled(t, false) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_set_enabled(t, true) == XPT_CL_SUCCESS);
  long before = atomic_load(&epi_calls);
  CL_CHECK(clSetKernelArg(kernel, 0, sizeof(buffer), &buffer));
  CHECK(atomic_load(&epi_calls) == before + 1);
  CHECK(xpt_cl_tracer_set_enabled(t, false) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_reset_callbacks(t) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_destroy(t) == XPT_CL_SUCCESS);

  /* destroy from inside the tracer's own callback is refused */
  cl_command_queue q = clCreateCommandQueueWithProperties(env.context, env.device, NULL, &err);
  CL_CHECK(err);
  CHECK(xpt_cl_tracer_create(&desc, &self_tracer) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_register_clFinish(self_tracer, XPT_CL_PROLOGUE, on_finish_pro) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_set_enabled(self_tracer, true) == XPT_CL_SUCCESS);
  CL_CHECK(clFinish(q));
  CHECK(self_destroy_rc == XPT_CL_ERROR_IN_CALLBACK);
  CHECK(xpt_cl_tracer_destroy(self_tracer) == XPT_CL_SUCCESS);

  /* destroy waits for a callback in flight on another thread */
  xpt_cl_tracer_handle_t slow;
  CHECK(xpt_cl_tracer_create(&desc, &slow) == XPT_CL_SUCCESS);
  CHECK(xpt_cl_tracer_register_clRetainKernel(slow, XPT_CL_PROLOGUE, on_release_slow_pro) == 0);
  CHECK(xpt_cl_tracer_register_clRetainKernel(slow, XPT_CL_EPILOGUE, on_release_slow_epi) == 0);
  CHECK(xpt_cl_tracer_set_enabled(slow, true) == XPT_CL_SUCCESS);
  pthread_t s;
  pthread_create(&s, NULL, slow_caller, NULL);
  while (atomic_load(&slow_state) == 0)
    usleep(100);
  CHECK(xpt_cl_tracer_destroy(slow) == XPT_CL_SUCCESS);
  CHECK(atomic_load(&slow_state) == 2);
  pthread_join(s, NULL);

  CHECK(strcmp(xpt_cl_function_name(XPT_CL_FN_clSetKernelArg), "clSetKernelArg") == 0);
  CHECK(xpt_cl_function_name(XPT_CL_FN_COUNT) == NULL);
  printf("cl_tracer ok: %ld paired callbacks\n", atomic_load(&epi_calls));
  clReleaseCommandQueue(q);
  clReleaseMemObject(buffer);
  clReleaseKernel(kernel);
  cl_env_close(&env);
  return 0;
}
