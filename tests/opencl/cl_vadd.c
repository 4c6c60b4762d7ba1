/* Vector add on an in-order profiling queue; prints the result so runs
 * with and without the layer can be compared. */
#include "cl_common.h"

#define N 1024

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  cl_env_t env;
  cl_env_open(&env);
  cl_int err;
  cl_command_queue q = clCreateCommandQueue(env.context, env.device, CL_QUEUE_PROFILING_ENABLE, &err);
  CL_CHECK(err);
  cl_command_queue_properties props = 0;
  CL_CHECK(clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(props), &props, NULL));
  CHECK(props == CL_QUEUE_PROFILING_ENABLE);
  float a[N], b[N], c[N];
  for (int i = 0; i < N; i++)
    a[i] = (float)i, b[i] = (float)(2 * i);
  cl_mem ba = clCreateBuffer(env.context, CL_MEM_READ_ONLY, sizeof(a), NULL, &err);
  cl_mem bb = clCreateBuffer(env.context, CL_MEM_READ_ONLY, sizeof(b), NULL, &err);
  cl_mem bc = clCreateBuffer(env.context, CL_MEM_WRITE_ONLY, sizeof(c), NULL, &err);
  CL_CHECK(err);
  cl_kernel k = clCreateKernel(env.program, "vadd", &err);
  CL_CHECK(err);
  CL_CHECK(clSetKernelArg(k, 0, sizeof(ba), &ba));
  CL_CHECK(clSetKernelArg(k, 1, sizeof(bb), &bb));
  CL_CHECK(clSetKernelArg(k, 2, sizeof(bc), &bc));
  size_t global = N, local = 64;
  double sum = 0;
  for (int r = 0; r < rounds; r++) {
    CL_CHECK(clEnqueueWriteBuffer(q, ba, CL_FALSE, 0, sizeof(a), a, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(q, bb, CL_FALSE, 0, sizeof(b), b, 0, NULL, NULL));
    cl_event kev;
    CL_CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, &kev));
    CL_CHECK(clEnqueueReadBuffer(q, bc, CL_TRUE, 0, sizeof(c), c, 1, &kev, NULL));
    cl_ulong start = 0, end = 0;
    CL_CHECK(clGetEventProfilingInfo(kev, CL_PROFILING_COMMAND_START, sizeof(start), &start, NULL));
    CL_CHECK(clGetEventProfilingInfo(kev, CL_PROFILING_COMMAND_END, sizeof(end), &end, NULL));
    CHECK(end >= start);
    CL_CHECK(clReleaseEvent(kev));
    for (int i = 0; i < N; i++) {
      CHECK(c[i] == a[i] + b[i]);
      sum += c[i];
    }
    a[r] += 1.0f;
  }
  CL_CHECK(clFinish(q));
  printf("vadd rounds=%d sum=%.1f c[7]=%.1f\n", rounds, sum, (double)c[7]);
  clReleaseKernel(k);
  clReleaseMemObject(ba);
  clReleaseMemObject(bb);
  clReleaseMemObject(bc);
  clReleaseCommandQueue(q);
  cl_env_close(&env);
  return 0;
}
