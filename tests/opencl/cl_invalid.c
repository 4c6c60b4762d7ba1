/* Invalid arguments: the error codes must be the same with the layer as
 * without it (the runner diffs the two outputs). */
#include "cl_common.h"

int main(void) {
  cl_env_t env;
  cl_env_open(&env);
  cl_int err = 0;
  printf("SetKernelArg(NULL) %d\n", clSetKernelArg(NULL, 0, 4, NULL));
  cl_kernel k = clCreateKernel(env.program, "no_such_kernel", &err);
  printf("CreateKernel(missing) %d %s\n", err, k ? "handle" : "null");
  k = clCreateKernel(env.program, "vadd", &err);
  printf("SetKernelArg(index 9) %d\n", clSetKernelArg(k, 9, sizeof(cl_mem), NULL));
  printf("SetKernelArg(bad size) %d\n", clSetKernelArg(k, 0, 3, NULL));
  cl_command_queue q = clCreateCommandQueueWithProperties(env.context, env.device, NULL, &err);
  size_t global = 0;
  printf("NDRange(global 0) %d\n", clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
  printf("NDRange(dim 0) %d\n", clEnqueueNDRangeKernel(q, k, 0, NULL, &global, NULL, 0, NULL, NULL));
  cl_event bogus_wait = NULL;
  global = 4;
  printf("NDRange(null wait) %d\n", clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 1, &bogus_wait, NULL));
  printf("ReadBuffer(NULL mem) %d\n", clEnqueueReadBuffer(q, NULL, CL_TRUE, 0, 4, &global, 0, NULL, NULL));
  printf("Finish(NULL) %d\n", clFinish(NULL));
  printf("WaitForEvents(0) %d\n", clWaitForEvents(0, NULL));
  printf("ReleaseEvent(NULL) %d\n", clReleaseEvent(NULL));
  printf("GetPlatformInfo(bad) %d\n", clGetPlatformInfo(env.platform, 0x7777, 0, NULL, NULL));
  cl_mem m = clCreateBuffer(env.context, CL_MEM_READ_WRITE, 0, NULL, &err);
  printf("CreateBuffer(size 0) %d %s\n", err, m ? "handle" : "null");
  cl_command_queue bad = clCreateCommandQueueWithProperties(NULL, env.device, NULL, &err);
  printf("CreateQueue(NULL ctx) %d %s\n", err, bad ? "handle" : "null");
  clReleaseKernel(k);
  clReleaseCommandQueue(q);
  cl_env_close(&env);
  return 0;
}
