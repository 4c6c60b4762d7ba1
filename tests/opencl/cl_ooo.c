/* Out-of-order queue: two writes gated by a user event, a kernel waiting
 * on both, a marker, a barrier and a read.  Checks the gate held. */
#include "cl_common.h"

#define N 256

int main(void) {
  cl_env_t env;
  cl_env_open(&env);
  cl_int err;
  cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
  cl_command_queue q = clCreateCommandQueueWithProperties(env.context, env.device, props, &err);
  CL_CHECK(err);
  cl_command_queue_properties got = 0;
  CL_CHECK(clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(got), &got, NULL));
  CHECK(got == CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE); /* the layer's profiling bit is hidden */
  float a[N], b[N], c[N];
  for (int i = 0; i < N; i++)
    a[i] = (float)i, b[i] = 1.0f, c[i] = 0;
  cl_mem ba = clCreateBuffer(env.context, CL_MEM_READ_ONLY, sizeof(a), NULL, &err);
  cl_mem bb = clCreateBuffer(env.context, CL_MEM_READ_ONLY, sizeof(b), NULL, &err);
  cl_mem bc = clCreateBuffer(env.context, CL_MEM_READ_WRITE, sizeof(c), NULL, &err);
  CL_CHECK(err);
  cl_kernel k = clCreateKernel(env.program, "vadd", &err);
  CL_CHECK(err);
  CL_CHECK(clSetKernelArg(k, 0, sizeof(ba), &ba));
  CL_CHECK(clSetKernelArg(k, 1, sizeof(bb), &bb));
  CL_CHECK(clSetKernelArg(k, 2, sizeof(bc), &bc));

  cl_event gate = clCreateUserEvent(env.context, &err);
  CL_CHECK(err);
  cl_event wa, wb, kev, marker;
  CL_CHECK(clEnqueueWriteBuffer(q, ba, CL_FALSE, 0, sizeof(a), a, 1, &gate, &wa));
  CL_CHECK(clEnqueueWriteBuffer(q, bb, CL_FALSE, 0, sizeof(b), b, 1, &gate, &wb));
  cl_event writes[2] = {wa, wb};
  size_t global = N;
  CL_CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 2, writes, &kev));
  CL_CHECK(clEnqueueMarkerWithWaitList(q, 1, &kev, &marker));
  CL_CHECK(clEnqueueBarrierWithWaitList(q, 0, NULL, NULL));
  cl_int status = 0;
  CL_CHECK(clGetEventInfo(kev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL));
  CHECK(status != CL_COMPLETE); /* the gate holds */
  CL_CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
  CL_CHECK(clEnqueueReadBuffer(q, bc, CL_FALSE, 0, sizeof(c), c, 0, NULL, NULL));
  CL_CHECK(clWaitForEvents(1, &marker));
  CL_CHECK(clFinish(q));
  for (int i = 0; i < N; i++)
    CHECK(c[i] == a[i] + 1.0f);
  printf("ooo ok c[5]=%.1f\n", (double)c[5]);
  cl_event all[] = {gate, wa, wb, kev, marker};
  for (int i = 0; i < 5; i++)
    CL_CHECK(clReleaseEvent(all[i]));
  clReleaseKernel(k);
  clReleaseMemObject(ba);
  clReleaseMemObject(bb);
  clReleaseMemObject(bc);
  clReleaseCommandQueue(q);
  cl_env_close(&env);
  return 0;
}
