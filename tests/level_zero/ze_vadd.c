/* Vector add on two queues with cross-queue event dependencies, ROUNDS
 * rounds (default 3): a copy queue uploads a and b (list order, events
 * up_a and up_b), the compute queue's kernel waits for both (event
 * done), and a second copy list on the copy queue waits for the kernel
 * and downloads c (event down).  Each round the lists are reset and
 * recorded again and the events reset on the host.  With "plain" only
 * what a dependency needs has an event: the upload of a (list order puts
 * it before b's) and the download (the host waits for the queue) have
 * none, and the kernel waits for up_b alone.  With "immediate" the four
 * commands go to one immediate list in order, only the download with an
 * event (the host waits for it).
 *   ze_vadd [ROUNDS [N [plain]]]: prints "vadd rounds=R n=N ok" when every
 *   c[i] equals a[i] + b[i]. */
#include <string.h>

#include "ze_common.h"

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  size_t n = argc > 2 ? (size_t)atol(argv[2]) : 4096;
  int plain = argc > 3 && !strcmp(argv[3], "plain");
  int immediate = argc > 3 && !strcmp(argv[3], "immediate");
  ze_env_t env;
  ze_env_open(&env);
  ze_kernel_handle_t vadd = ze_env_kernel(&env, "vadd");
  ze_command_queue_handle_t copy_q = ze_env_queue(&env), compute_q = ze_env_queue(&env);
  ze_command_list_handle_t up = ze_env_list(&env), compute = ze_env_list(&env),
                           down = ze_env_list(&env), now;
  ze_command_queue_desc_t qd = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, NULL, 0, 0, 0,
                                ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                                ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ZE_CHECK(zeCommandListCreateImmediate(env.context, env.device, &qd, &now));
  ze_event_pool_desc_t pd = {ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, NULL,
                             ZE_EVENT_POOL_FLAG_HOST_VISIBLE | ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP,
                             4};
  ze_event_pool_handle_t pool;
  ZE_CHECK(zeEventPoolCreate(env.context, &pd, 1, &env.device, &pool));
  ze_event_handle_t ev[4]; /* up_a, up_b, done, down */
  for (uint32_t i = 0; i < 4; i++) {
    ze_event_desc_t ed = {ZE_STRUCTURE_TYPE_EVENT_DESC, NULL, i, ZE_EVENT_SCOPE_FLAG_HOST,
                          ZE_EVENT_SCOPE_FLAG_HOST};
    ZE_CHECK(zeEventCreate(pool, &ed, &ev[i]));
  }
  size_t bytes = n * sizeof(float);
  ze_host_mem_alloc_desc_t hd = {ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, NULL, 0};
  ze_device_mem_alloc_desc_t dd = {ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, NULL, 0, 0};
  float *ha, *hb, *hc, *da, *db, *dc;
  ZE_CHECK(zeMemAllocHost(env.context, &hd, bytes, 64, (void **)&ha));
  ZE_CHECK(zeMemAllocHost(env.context, &hd, bytes, 64, (void **)&hb));
  ZE_CHECK(zeMemAllocHost(env.context, &hd, bytes, 64, (void **)&hc));
  ZE_CHECK(zeMemAllocDevice(env.context, &dd, bytes, 64, env.device, (void **)&da));
  ZE_CHECK(zeMemAllocDevice(env.context, &dd, bytes, 64, env.device, (void **)&db));
  ZE_CHECK(zeMemAllocDevice(env.context, &dd, bytes, 64, env.device, (void **)&dc));
  ZE_CHECK(zeKernelSetGroupSize(vadd, 64, 1, 1));
  ZE_CHECK(zeKernelSetArgumentValue(vadd, 0, sizeof dc, &dc));
  ZE_CHECK(zeKernelSetArgumentValue(vadd, 1, sizeof da, &da));
  ZE_CHECK(zeKernelSetArgumentValue(vadd, 2, sizeof db, &db));
  ze_group_count_t groups = {(uint32_t)((n + 63) / 64), 1, 1};
  int bad = 0;
  for (int r = 0; r < rounds; r++) {
    for (size_t i = 0; i < n; i++)
      ha[i] = (float)(i + r), hb[i] = (float)(2 * i), hc[i] = -1;
    if (immediate) {
      ZE_CHECK(zeCommandListAppendMemoryCopy(now, da, ha, bytes, NULL, 0, NULL));
      ZE_CHECK(zeCommandListAppendMemoryCopy(now, db, hb, bytes, NULL, 0, NULL));
      ZE_CHECK(zeCommandListAppendLaunchKernel(now, vadd, &groups, NULL, 0, NULL));
      ZE_CHECK(zeCommandListAppendMemoryCopy(now, hc, dc, bytes, ev[3], 0, NULL));
      ZE_CHECK(zeEventHostSynchronize(ev[3], UINT64_MAX));
      for (size_t i = 0; i < n; i++)
        bad += hc[i] != ha[i] + hb[i];
      ZE_CHECK(zeEventHostReset(ev[3]));
      continue;
    }
    ZE_CHECK(zeCommandListReset(up));
    ZE_CHECK(zeCommandListReset(compute));
    ZE_CHECK(zeCommandListReset(down));
    ZE_CHECK(zeCommandListAppendMemoryCopy(up, da, ha, bytes, plain ? NULL : ev[0], 0, NULL));
    ZE_CHECK(zeCommandListAppendMemoryCopy(up, db, hb, bytes, ev[1], 0, NULL));
    ZE_CHECK(zeCommandListClose(up));
    ZE_CHECK(zeCommandListAppendLaunchKernel(compute, vadd, &groups, ev[2], plain ? 1 : 2,
                                             plain ? &ev[1] : ev));
    ZE_CHECK(zeCommandListClose(compute));
    ZE_CHECK(zeCommandListAppendMemoryCopy(down, hc, dc, bytes, plain ? NULL : ev[3], 1, &ev[2]));
    ZE_CHECK(zeCommandListClose(down));
    /* The kernel's queue first: it waits for the other queue's copies. */
    ZE_CHECK(zeCommandQueueExecuteCommandLists(compute_q, 1, &compute, NULL));
    ZE_CHECK(zeCommandQueueExecuteCommandLists(copy_q, 1, &up, NULL));
    ZE_CHECK(zeCommandQueueExecuteCommandLists(copy_q, 1, &down, NULL));
    if (!plain)
      ZE_CHECK(zeEventHostSynchronize(ev[3], UINT64_MAX));
    ZE_CHECK(zeCommandQueueSynchronize(compute_q, UINT64_MAX));
    ZE_CHECK(zeCommandQueueSynchronize(copy_q, UINT64_MAX));
    for (size_t i = 0; i < n; i++)
      bad += hc[i] != ha[i] + hb[i];
    for (int i = 0; i < 4; i++)
      ZE_CHECK(zeEventHostReset(ev[i]));
  }
  float *bufs[] = {ha, hb, hc, da, db, dc};
  for (int i = 0; i < 6; i++)
    ZE_CHECK(zeMemFree(env.context, bufs[i]));
  for (int i = 0; i < 4; i++)
    ZE_CHECK(zeEventDestroy(ev[i]));
  ZE_CHECK(zeEventPoolDestroy(pool));
  ZE_CHECK(zeCommandListDestroy(now));
  ZE_CHECK(zeCommandListDestroy(up));
  ZE_CHECK(zeCommandListDestroy(compute));
  ZE_CHECK(zeCommandListDestroy(down));
  ZE_CHECK(zeCommandQueueDestroy(copy_q));
  ZE_CHECK(zeCommandQueueDestroy(compute_q));
  ZE_CHECK(zeKernelDestroy(vadd));
  ze_env_close(&env);
  printf("vadd rounds=%d n=%zu %s\n", rounds, n, bad ? "WRONG" : "ok");
  return bad != 0;
}
