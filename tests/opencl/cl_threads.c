/* Four host threads, each with its own queue, enqueue writes, kernels and
 * reads concurrently into one context. */
#include "cl_common.h"
#include <pthread.h>

#define THREADS 4
#define N 512
#define ROUNDS 5

static cl_env_t env;
/* Queues are released only when every thread is done: the layer knows a
 * queue by its handle, and a released handle may come back for the next
 * queue (one track instead of two). */
static pthread_barrier_t all_done;

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(env.context, env.device, NULL, &err);
  CL_CHECK(err);
  float a[N], b[N], c[N];
  for (int i = 0; i < N; i++)
    a[i] = (float)(i + id), b[i] = (float)id;
  cl_mem ba = clCreateBuffer(env.context, CL_MEM_READ_ONLY, sizeof(a), NULL, &err);
  cl_mem bb = clCreateBuffer(env.context, CL_MEM_READ_ONLY, sizeof(b), NULL, &err);
  cl_mem bc = clCreateBuffer(env.context, CL_MEM_WRITE_ONLY, sizeof(c), NULL, &err);
  CL_CHECK(err);
  cl_kernel k = clCreateKernel(env.program, "vadd", &err);
  CL_CHECK(err);
  CL_CHECK(clSetKernelArg(k, 0, sizeof(ba), &ba));
  CL_CHECK(clSetKernelArg(k, 1, sizeof(bb), &bb));
  CL_CHECK(clSetKernelArg(k, 2, sizeof(bc), &bc));
  size_t global = N;
  for (int r = 0; r < ROUNDS; r++) {
    CL_CHECK(clEnqueueWriteBuffer(q, ba, CL_FALSE, 0, sizeof(a), a, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(q, bb, CL_FALSE, 0, sizeof(b), b, 0, NULL, NULL));
    CL_CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
    CL_CHECK(clEnqueueReadBuffer(q, bc, CL_TRUE, 0, sizeof(c), c, 0, NULL, NULL));
    for (int i = 0; i < N; i++)
      CHECK(c[i] == a[i] + b[i]);
  }
  CL_CHECK(clFinish(q));
  pthread_barrier_wait(&all_done);
  clReleaseKernel(k);
  clReleaseMemObject(ba);
  clReleaseMemObject(bb);
  clReleaseMemObject(bc);
  clReleaseCommandQueue(q);
  return NULL;
}

int main(void) {
  cl_env_open(&env);
  pthread_t t[THREADS];
  pthread_barrier_init(&all_done, NULL, THREADS);
  for (int i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  printf("threads ok\n");
  cl_env_close(&env);
  return 0;
}
