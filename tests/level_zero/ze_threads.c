/* THREADS threads (default 4), each with its own queue, list and events,
 * ROUNDS rounds (default 5) of upload, scale kernel, download, the three
 * chained by events, while the others do the same: the layer's graph
 * bookkeeping under concurrent appends, submissions and synchronizations.
 *   ze_threads [THREADS [ROUNDS]]: prints "threads=T rounds=R ok". */
#include <pthread.h>
#include <string.h>

#include "ze_common.h"

#define N 1024

static ze_env_t env;
static int rounds = 5;

static void *worker(void *arg) {
  long *bad = arg;
  ze_kernel_handle_t k = ze_env_kernel(&env, "scale");
  ze_command_queue_handle_t q = ze_env_queue(&env);
  ze_command_list_handle_t l = ze_env_list(&env);
  ze_event_pool_desc_t pd = {ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, NULL,
                             ZE_EVENT_POOL_FLAG_HOST_VISIBLE | ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP,
                             3};
  ze_event_pool_handle_t pool;
  ZE_CHECK(zeEventPoolCreate(env.context, &pd, 1, &env.device, &pool));
  ze_event_handle_t ev[3];
  for (uint32_t i = 0; i < 3; i++) {
    ze_event_desc_t ed = {ZE_STRUCTURE_TYPE_EVENT_DESC, NULL, i, ZE_EVENT_SCOPE_FLAG_HOST,
                          ZE_EVENT_SCOPE_FLAG_HOST};
    ZE_CHECK(zeEventCreate(pool, &ed, &ev[i]));
  }
  ze_host_mem_alloc_desc_t hd = {ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, NULL, 0};
  ze_device_mem_alloc_desc_t dd = {ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, NULL, 0, 0};
  float *h, *d;
  ZE_CHECK(zeMemAllocHost(env.context, &hd, N * sizeof(float), 64, (void **)&h));
  ZE_CHECK(zeMemAllocDevice(env.context, &dd, N * sizeof(float), 64, env.device, (void **)&d));
  float s = 3;
  ZE_CHECK(zeKernelSetArgumentValue(k, 0, sizeof d, &d));
  ZE_CHECK(zeKernelSetArgumentValue(k, 1, sizeof s, &s));
  ze_group_count_t g = {N, 1, 1};
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < N; i++)
      h[i] = (float)(i + r);
    ZE_CHECK(zeCommandListReset(l));
    ZE_CHECK(zeCommandListAppendMemoryCopy(l, d, h, N * sizeof(float), ev[0], 0, NULL));
    ZE_CHECK(zeCommandListAppendLaunchKernel(l, k, &g, ev[1], 1, &ev[0]));
    ZE_CHECK(zeCommandListAppendMemoryCopy(l, h, d, N * sizeof(float), ev[2], 1, &ev[1]));
    ZE_CHECK(zeCommandListClose(l));
    ZE_CHECK(zeCommandQueueExecuteCommandLists(q, 1, &l, NULL));
    ZE_CHECK(zeCommandQueueSynchronize(q, UINT64_MAX));
    for (int i = 0; i < N; i++)
      *bad += h[i] != 3.0f * (float)(i + r);
    for (int i = 0; i < 3; i++)
      ZE_CHECK(zeEventHostReset(ev[i]));
  }
  ZE_CHECK(zeMemFree(env.context, h));
  ZE_CHECK(zeMemFree(env.context, d));
  for (int i = 0; i < 3; i++)
    ZE_CHECK(zeEventDestroy(ev[i]));
  ZE_CHECK(zeEventPoolDestroy(pool));
  ZE_CHECK(zeCommandListDestroy(l));
  ZE_CHECK(zeCommandQueueDestroy(q));
  ZE_CHECK(zeKernelDestroy(k));
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  rounds = argc > 2 ? atoi(argv[2]) : 5;
  if (threads < 1 || threads > 64)
    threads = 4;
  ze_env_open(&env);
  pthread_t t[64];
  long bad[64] = {0};
  for (int i = 0; i < threads; i++)
    pthread_create(&t[i], NULL, worker, &bad[i]);
  long wrong = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    wrong += bad[i];
  }
  ze_env_close(&env);
  printf("threads=%d rounds=%d %s\n", threads, rounds, wrong ? "WRONG" : "ok");
  return wrong != 0;
}
