/* Shared set-up for the OpenCL test programs (PoCL CPU device). */
#ifndef CL_COMMON_H
#define CL_COMMON_H
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#define CL_CHECK(expr)                                                                  \
  do {                                                                                  \
    cl_int rc_ = (expr);                                                                \
    if (rc_ != CL_SUCCESS) {                                                            \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #expr, rc_);        \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)
#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* Exit code CTest treats as "skipped" (no OpenCL device here). */
#define CL_SKIP 77

typedef struct cl_env {
  cl_platform_id platform;
  cl_device_id device;
  cl_context context;
  cl_program program;
} cl_env_t;

static const char cl_test_source[] =
    "__kernel void vadd(__global const float *a, __global const float *b,\n"
    "                   __global float *c) {\n"
    "  size_t i = get_global_id(0);\n"
    "  c[i] = a[i] + b[i];\n"
    "}\n"
    "__kernel void scale(__global float *c, float f) {\n"
    "  size_t i = get_global_id(0);\n"
    "  c[i] = c[i] * f;\n"
    "}\n";

static inline void cl_env_open(cl_env_t *env) {
  cl_uint n = 0;
  if (clGetPlatformIDs(1, &env->platform, &n) != CL_SUCCESS || n == 0 ||
      clGetDeviceIDs(env->platform, CL_DEVICE_TYPE_ALL, 1, &env->device, &n) != CL_SUCCESS) {
    fprintf(stderr, "no OpenCL device: skipped\n");
    exit(CL_SKIP);
  }
  cl_int err;
  env->context = clCreateContext(NULL, 1, &env->device, NULL, NULL, &err);
  CL_CHECK(err);
  const char *src = cl_test_source;
  env->program = clCreateProgramWithSource(env->context, 1, &src, NULL, &err);
  CL_CHECK(err);
  CL_CHECK(clBuildProgram(env->program, 1, &env->device, "", NULL, NULL));
}

static inline void cl_env_close(cl_env_t *env) {
  CL_CHECK(clReleaseProgram(env->program));
  CL_CHECK(clReleaseContext(env->context));
}
#endif
