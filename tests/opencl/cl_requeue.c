/* Queues made and released while another works: a long-lived queue runs a
 * kernel each round while a short-lived one, made and released in the
 * round, runs one too.  A released queue's address may come back for the
 * next one: each must still get a track of its own (run_requeue.py). */
#include "cl_common.h"

enum { N = 1024, ROUNDS = 20 };

int main(void) {
  cl_env_t env;
  cl_env_open(&env);
  cl_int err;
  cl_command_queue keep = clCreateCommandQueue(env.context, env.device, 0, &err);
  CL_CHECK(err);
  cl_mem a = clCreateBuffer(env.context, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
  CL_CHECK(err);
  cl_kernel scale = clCreateKernel(env.program, "scale", &err);
  CL_CHECK(err);
  float zero[N] = {0}, f = 2.0f;
  CL_CHECK(clEnqueueWriteBuffer(keep, a, CL_TRUE, 0, sizeof zero, zero, 0, NULL, NULL));
  CL_CHECK(clSetKernelArg(scale, 0, sizeof a, &a));
  CL_CHECK(clSetKernelArg(scale, 1, sizeof f, &f));
  size_t global = N;
  for (int r = 0; r < ROUNDS; r++) {
    cl_command_queue brief = clCreateCommandQueue(env.context, env.device, 0, &err);
    CL_CHECK(err);
    CL_CHECK(clEnqueueNDRangeKernel(brief, scale, 1, NULL, &global, NULL, 0, NULL, NULL));
    CL_CHECK(clFinish(brief));
    CL_CHECK(clReleaseCommandQueue(brief));
    CL_CHECK(clEnqueueNDRangeKernel(keep, scale, 1, NULL, &global, NULL, 0, NULL, NULL));
  }
  CL_CHECK(clFinish(keep));
  CL_CHECK(clReleaseKernel(scale));
  CL_CHECK(clReleaseMemObject(a));
  CL_CHECK(clReleaseCommandQueue(keep));
  cl_env_close(&env);
  printf("rounds %d\n", ROUNDS);
  return 0;
}
