/* Per-call cost of clSetKernelArg: direct (no layer), through the layer
 * with no tracer, with one tracer (empty prologue and epilogue) and with
 * four.  The program runs itself twice: without OPENCL_LAYERS for the
 * direct cost, with it for the rest.  Floors from the same run.
 *
 *   bench_cl_layer /path/to/libxptrace_opencl.so [repetitions]
 *   bench_cl_layer LAYER --callgrind TRACERS CALLS   (one batch, for
 *       valgrind --tool=callgrind --toggle-collect=bench_calls) */
#define CL_TARGET_OPENCL_VERSION 300
#include "bench_floors.h"
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xptrace/cl_tracing.h>

#define CALLS 200000

static cl_kernel kernel;
static cl_mem buffer;

static double measure(int reps) {
  double v[64];
  if (reps > 64)
    reps = 64;
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < CALLS; i++)
      bench_sink += (uint64_t)clSetKernelArg(kernel, 0, sizeof(buffer), &buffer);
    v[r] = (double)(bench_now_ns() - t0) / CALLS;
  }
  return bench_median(v, (size_t)reps);
}

/* One batch of calls, a symbol of its own for callgrind --toggle-collect. */
__attribute__((noinline)) static void bench_calls(int calls) {
  for (int i = 0; i < calls; i++)
    bench_sink += (uint64_t)clSetKernelArg(kernel, 0, sizeof(buffer), &buffer);
}

static void empty_cb(void *params, void *result, void *user, void **inst, uint64_t corr) {
  (void)params, (void)result, (void)user, (void)inst, (void)corr;
}

static int setup(void) {
  cl_platform_id platform;
  cl_device_id device;
  cl_uint n = 0;
  cl_int err;
  if (clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS || !n ||
      clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL) != CL_SUCCESS)
    return -1;
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  const char *src = "__kernel void k(__global float *a) { a[get_global_id(0)] = 1.0f; }";
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  if (clBuildProgram(prog, 1, &device, "", NULL, NULL) != CL_SUCCESS)
    return -1;
  kernel = clCreateKernel(prog, "k", &err);
  buffer = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  return err == CL_SUCCESS ? 0 : -1;
}

/* Adds `count` tracers with an empty prologue and epilogue on
 * clSetKernelArg, each measured after if `reps` (when 1 or 4 are on). */
static int add_tracers(const char *layer, int count, int reps) {
  void *h = dlopen(layer, RTLD_NOW | RTLD_NOLOAD);
  if (!h) {
    fprintf(stderr, "xptrace: layer %s not loaded (ocl-icd without layer support?)\n", layer);
    return 1;
  }
  xpt_cl_result_t (*create)(const xpt_cl_tracer_desc_t *, xpt_cl_tracer_handle_t *) =
      (xpt_cl_result_t(*)(const xpt_cl_tracer_desc_t *, xpt_cl_tracer_handle_t *))dlsym(h, "xpt_cl_tracer_create");
  xpt_cl_result_t (*reg)(xpt_cl_tracer_handle_t, xpt_cl_callback_site_t, xpt_cl_function_id_t,
                         xpt_cl_callback_t) =
      (xpt_cl_result_t(*)(xpt_cl_tracer_handle_t, xpt_cl_callback_site_t, xpt_cl_function_id_t,
                          xpt_cl_callback_t))dlsym(h, "xpt_cl_tracer_register_callback");
  xpt_cl_result_t (*enable)(xpt_cl_tracer_handle_t, bool) =
      (xpt_cl_result_t(*)(xpt_cl_tracer_handle_t, bool))dlsym(h, "xpt_cl_tracer_set_enabled");
  if (!create || !reg || !enable)
    return 1;
  xpt_cl_tracer_desc_t desc = {XPT_CL_TRACER_DESC_VERSION, NULL};
  for (int t = 0; t < count; t++) {
    xpt_cl_tracer_handle_t tr;
    if (create(&desc, &tr) != XPT_CL_SUCCESS)
      return 1;
    reg(tr, XPT_CL_PROLOGUE, XPT_CL_FN_clSetKernelArg, empty_cb);
    reg(tr, XPT_CL_EPILOGUE, XPT_CL_FN_clSetKernelArg, empty_cb);
    enable(tr, true);
    if (reps && (t == 0 || t == 3))
      printf("%.3f\n", measure(reps));
  }
  return 0;
}

/* Child: print the costs of this process's configuration, one per line. */
static int child(const char *layer, int reps) {
  if (setup() != 0) {
    fprintf(stderr, "xptrace: no OpenCL device\n");
    return 77;
  }
  printf("%.3f\n", measure(reps));
  return layer ? add_tracers(layer, 4, reps) : 0;
}

/* For callgrind: one batch of calls with `tracers` tracers (layer loaded
 * through OPENCL_LAYERS) or without the layer. */
static int callgrind_run(const char *layer, int tracers, int calls) {
  if (setup() != 0)
    return 77;
  if (layer && add_tracers(layer, tracers, 0) != 0)
    return 1;
  bench_calls(calls);
  return 0;
}

static int run_child(const char *self, const char *layer, bool with_layer, int reps, double *out,
                     int count) {
  char cmd[4096];
  if (with_layer)
    snprintf(cmd, sizeof(cmd), "OPENCL_LAYERS='%s' '%s' '%s' --child %d", layer, self, layer, reps);
  else
    snprintf(cmd, sizeof(cmd), "env -u OPENCL_LAYERS '%s' '%s' --child %d", self, layer, reps);
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  int got = 0;
  while (got < count && fscanf(p, "%lf", &out[got]) == 1)
    got++;
  int rc = pclose(p);
  return got == count && rc == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc > 4 && !strcmp(argv[2], "--callgrind")) {
    const char *layers = getenv("OPENCL_LAYERS");
    return callgrind_run(layers && *layers ? argv[1] : NULL, atoi(argv[3]), atoi(argv[4]));
  }
  if (argc > 2 && !strcmp(argv[2], "--child")) {
    const char *layers = getenv("OPENCL_LAYERS");
    return child(layers && *layers ? argv[1] : NULL, argc > 3 ? atoi(argv[3]) : 7);
  }
  if (argc < 2) {
    fprintf(stderr, "usage: %s LAYER.so [repetitions]\n", argv[0]);
    return 2;
  }
  int reps = argc > 2 ? atoi(argv[2]) : 7;
  bench_floors_t floors;
  bench_floors_measure(&floors, reps);
  bench_floors_print(stdout, &floors);
  double direct, layered[3];
  if (run_child(argv[0], argv[1], false, reps, &direct, 1) ||
      run_child(argv[0], argv[1], true, reps, layered, 3)) {
    fprintf(stderr, "xptrace: OpenCL child run failed\n");
    return 77;
  }
  const char *names[3] = {"layer, no tracer", "layer, 1 tracer (empty pro+epi)", "layer, 4 tracers"};
  const double targets[3] = {3, 15, 30};
  double fp = floors.ns[BENCH_FLOOR_DSO_CALL];
  printf("clSetKernelArg per call (median of %d x %d calls):\n", reps, CALLS);
  printf("  %-34s %8.2f ns  (%.1fx the .so call floor)\n", "direct (no layer)", direct, direct / fp);
  for (int i = 0; i < 3; i++)
    printf("  %-34s %8.2f ns  +%.2f ns over direct (target <= %.0f)  %.2fx direct\n", names[i],
           layered[i], layered[i] - direct, targets[i], layered[i] / direct);
  return 0;
}
