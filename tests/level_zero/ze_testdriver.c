/* libze_xptrace_testdriver.so: a Level Zero driver that runs on the CPU,
 * for tests through the real loader (ZE_ENABLE_ALT_DRIVERS=<this file>).
 * One driver, one device; memory of every kind is plain host memory;
 * modules hold the kernels of a small built-in registry (C functions
 * looked up by name, whatever the module's binary); each command queue has
 * a worker thread that runs the submitted lists in order; events carry
 * CLOCK_MONOTONIC kernel timestamps (1 tick = 1 ns); fences and barriers.
 * Immediate command lists run each command on the calling thread.
 *
 * Only the zeGet*, zetGet* and zesGet*ProcAddrTable getters leave the
 * library (the loader requires all non-Exp ones); the functions are
 * static and named td_*, since an exported function named like the API
 * would bind to the loader's own copy. */
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TD_EXPORT __attribute__((visibility("default")))
#define TD_MAX_ARGS 8

/* One lock and one condition for all state a queue worker and the host
 * share (events, fences, queue fifos): simple, and enough for tests. */
static pthread_mutex_t td_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t td_cond = PTHREAD_COND_INITIALIZER;

static uint64_t td_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct _ze_driver_handle_t { int unused; };
struct _ze_device_handle_t { int unused; };
struct _ze_context_handle_t { int unused; };
static struct _ze_driver_handle_t td_driver;
static struct _ze_device_handle_t td_device;

#include "ze_testdriver_kernels.h"

struct _ze_module_handle_t { int unused; };
struct _ze_module_build_log_handle_t { int unused; };
struct _ze_kernel_handle_t {
  uint32_t index;
  uint32_t group[3];
  unsigned char args[TD_MAX_ARGS][16];
};

/* ---- events, fences ----------------------------------------------------- */
struct _ze_event_pool_handle_t { uint32_t count; };
struct _ze_event_handle_t {
  bool signaled;
  uint64_t start, end; /* of the last command that signalled it */
};
struct _ze_fence_handle_t {
  bool signaled;
  uint64_t batch; /* the queue batch it waits for */
};

/* ---- command lists ------------------------------------------------------- */
enum { C_COPY, C_FILL, C_KERNEL, C_BARRIER, C_SIGNAL, C_WAIT, C_RESET, C_TIMESTAMP };
typedef struct td_cmd {
  int type;
  void *dst;
  const void *src;
  size_t size;
  unsigned char pattern[128];
  size_t pattern_size;
  td_kernel_fn fn;
  unsigned char args[TD_MAX_ARGS][16];
  uint64_t items;
  ze_event_handle_t signal;
  uint32_t nwait;
  ze_event_handle_t *waits;
} td_cmd_t;

struct _ze_command_list_handle_t {
  td_cmd_t *cmds;
  size_t count, cap;
  bool immediate;
};

static void td_run(td_cmd_t *c) {
  pthread_mutex_lock(&td_lock);
  for (uint32_t i = 0; i < c->nwait; i++)
    while (c->waits[i] && !c->waits[i]->signaled)
      pthread_cond_wait(&td_cond, &td_lock);
  pthread_mutex_unlock(&td_lock);
  uint64_t start = td_now();
  switch (c->type) {
  case C_COPY: memmove(c->dst, c->src, c->size); break;
  case C_FILL:
    for (size_t i = 0; i < c->size; i += c->pattern_size)
      memcpy((char *)c->dst + i, c->pattern,
             c->size - i < c->pattern_size ? c->size - i : c->pattern_size);
    break;
  case C_KERNEL: {
    void *args[TD_MAX_ARGS];
    for (int i = 0; i < TD_MAX_ARGS; i++)
      args[i] = c->args[i];
    c->fn(args, c->items);
    break;
  }
  case C_TIMESTAMP: *(uint64_t *)c->dst = td_now(); break;
  default: break;
  }
  uint64_t end = td_now();
  pthread_mutex_lock(&td_lock);
  if (c->type == C_RESET && c->signal)
    c->signal->signaled = false;
  else if (c->signal) {
    c->signal->start = start;
    c->signal->end = end;
    c->signal->signaled = true;
    pthread_cond_broadcast(&td_cond);
  }
  pthread_mutex_unlock(&td_lock);
}

static void td_list_free_cmds(ze_command_list_handle_t l) {
  for (size_t i = 0; i < l->count; i++)
    free(l->cmds[i].waits);
  l->count = 0;
}

/* Appends c (its wait list copied); an immediate list runs it now. */
static ze_result_t td_append(ze_command_list_handle_t l, td_cmd_t *c, uint32_t nwait,
                             ze_event_handle_t *waits) {
  if (!l)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (nwait && !waits)
    return ZE_RESULT_ERROR_INVALID_SIZE;
  c->nwait = nwait;
  c->waits = NULL;
  if (nwait) {
    c->waits = malloc(nwait * sizeof(*waits));
    if (!c->waits)
      return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    memcpy(c->waits, waits, nwait * sizeof(*waits));
  }
  if (l->immediate) {
    td_run(c);
    free(c->waits);
    return ZE_RESULT_SUCCESS;
  }
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    td_cmd_t *n = realloc(l->cmds, cap * sizeof(*n));
    if (!n) {
      free(c->waits);
      return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    l->cmds = n;
    l->cap = cap;
  }
  l->cmds[l->count++] = *c;
  return ZE_RESULT_SUCCESS;
}

/* ---- command queues ------------------------------------------------------ */
typedef struct td_batch {
  ze_command_list_handle_t *lists;
  uint32_t count;
  ze_fence_handle_t fence;
  struct td_batch *next;
} td_batch_t;

struct _ze_command_queue_handle_t {
  pthread_t worker;
  td_batch_t *head, *tail;
  bool busy, quit;
  bool synchronous;
};

static void *td_worker(void *arg) {
  ze_command_queue_handle_t q = arg;
  pthread_mutex_lock(&td_lock);
  for (;;) {
    while (!q->head && !q->quit)
      pthread_cond_wait(&td_cond, &td_lock);
    if (!q->head)
      break;
    td_batch_t *b = q->head;
    q->busy = true;
    pthread_mutex_unlock(&td_lock);
    for (uint32_t i = 0; i < b->count; i++)
      for (size_t j = 0; j < b->lists[i]->count; j++)
        td_run(&b->lists[i]->cmds[j]);
    pthread_mutex_lock(&td_lock);
    q->head = b->next;
    if (!q->head)
      q->tail = NULL;
    if (b->fence)
      b->fence->signaled = true;
    q->busy = false;
    pthread_cond_broadcast(&td_cond);
    free(b->lists);
    free(b);
  }
  pthread_mutex_unlock(&td_lock);
  return NULL;
}

static ze_result_t td_wait(bool *flag, bool idle_queue, ze_command_queue_handle_t q,
                           uint64_t timeout) {
  pthread_mutex_lock(&td_lock);
  ze_result_t rc = ZE_RESULT_SUCCESS;
  for (;;) {
    bool done = idle_queue ? (!q->head && !q->busy) : *flag;
    if (done)
      break;
    if (timeout == 0) {
      rc = ZE_RESULT_NOT_READY;
      break;
    }
    pthread_cond_wait(&td_cond, &td_lock); /* finite timeouts wait it out too */
  }
  pthread_mutex_unlock(&td_lock);
  return rc;
}

/* ---- the functions ------------------------------------------------------ */
static ze_result_t td_Init(ze_init_flags_t flags) { (void)flags; return ZE_RESULT_SUCCESS; }

static ze_result_t td_DriverGet(uint32_t *count, ze_driver_handle_t *drivers) {
  if (!count)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (drivers && *count)
    drivers[0] = &td_driver;
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DriverGetApiVersion(ze_driver_handle_t d, ze_api_version_t *v) {
  (void)d;
  *v = ZE_API_VERSION_CURRENT;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DriverGetProperties(ze_driver_handle_t d, ze_driver_properties_t *p) {
  (void)d;
  memset(&p->uuid, 0x5a, sizeof(p->uuid));
  p->driverVersion = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DriverGetIpcProperties(ze_driver_handle_t d, ze_driver_ipc_properties_t *p) {
  (void)d;
  p->flags = 0;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DriverGetExtensionProperties(ze_driver_handle_t d, uint32_t *count,
                                                   ze_driver_extension_properties_t *p) {
  (void)d, (void)p;
  *count = 0;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DriverGetExtensionFunctionAddress(ze_driver_handle_t d, const char *name,
                                                        void **f) {
  (void)d, (void)name;
  *f = NULL;
  return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
}

static ze_result_t td_DeviceGet(ze_driver_handle_t d, uint32_t *count, ze_device_handle_t *devs) {
  (void)d;
  if (devs && *count)
    devs[0] = &td_device;
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetSubDevices(ze_device_handle_t d, uint32_t *count,
                                          ze_device_handle_t *subs) {
  (void)d, (void)subs;
  *count = 0;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetProperties(ze_device_handle_t d, ze_device_properties_t *p) {
  (void)d;
  ze_structure_type_t stype = p->stype;
  void *next = p->pNext;
  memset(p, 0, sizeof(*p));
  p->stype = stype;
  p->pNext = next;
  p->type = ZE_DEVICE_TYPE_GPU;
  p->vendorId = 0x1af4;
  p->deviceId = 1;
  p->coreClockRate = 1000;
  p->maxMemAllocSize = 1u << 30;
  p->maxHardwareContexts = 1;
  p->numThreadsPerEU = p->physicalEUSimdWidth = p->numEUsPerSubslice = 1;
  p->numSubslicesPerSlice = p->numSlices = 1;
  /* ns per tick, or ticks per second for the 1.2 structure */
  p->timerResolution = stype == ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 ? 1000000000u : 1;
  p->timestampValidBits = p->kernelTimestampValidBits = 64;
  memset(&p->uuid, 0xa5, sizeof(p->uuid));
  strcpy(p->name, "xptrace CPU test device");
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetComputeProperties(ze_device_handle_t d,
                                                 ze_device_compute_properties_t *p) {
  (void)d;
  p->maxTotalGroupSize = 1024;
  p->maxGroupSizeX = p->maxGroupSizeY = p->maxGroupSizeZ = 1024;
  p->maxGroupCountX = p->maxGroupCountY = p->maxGroupCountZ = 1u << 30;
  p->maxSharedLocalMemory = 65536;
  p->numSubGroupSizes = 1;
  p->subGroupSizes[0] = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetModuleProperties(ze_device_handle_t d,
                                                ze_device_module_properties_t *p) {
  (void)d;
  p->spirvVersionSupported = ZE_MAKE_VERSION(1, 2);
  p->flags = 0;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetCommandQueueGroupProperties(
    ze_device_handle_t d, uint32_t *count, ze_command_queue_group_properties_t *p) {
  (void)d;
  if (p && *count) {
    p[0].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE |
                 ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    p[0].maxMemoryFillPatternSize = 128;
    p[0].numQueues = 64;
  }
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetMemoryProperties(ze_device_handle_t d, uint32_t *count,
                                                ze_device_memory_properties_t *p) {
  (void)d;
  if (p && *count) {
    p[0].totalSize = 1u << 30;
    strcpy(p[0].name, "host");
  }
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetMemoryAccessProperties(ze_device_handle_t d,
                                                      ze_device_memory_access_properties_t *p) {
  (void)d;
  ze_memory_access_cap_flags_t all =
      ZE_MEMORY_ACCESS_CAP_FLAG_RW | ZE_MEMORY_ACCESS_CAP_FLAG_ATOMIC;
  p->hostAllocCapabilities = p->deviceAllocCapabilities = all;
  p->sharedSingleDeviceAllocCapabilities = p->sharedCrossDeviceAllocCapabilities = all;
  p->sharedSystemAllocCapabilities = all;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetGlobalTimestamps(ze_device_handle_t d, uint64_t *host,
                                                uint64_t *device) {
  (void)d;
  *host = *device = td_now();
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_DeviceGetStatus(ze_device_handle_t d) { (void)d; return ZE_RESULT_SUCCESS; }

static ze_result_t td_ContextCreate(ze_driver_handle_t d, const ze_context_desc_t *desc,
                                    ze_context_handle_t *out) {
  (void)d, (void)desc;
  *out = calloc(1, sizeof(**out));
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
static ze_result_t td_ContextDestroy(ze_context_handle_t c) { free(c); return ZE_RESULT_SUCCESS; }
static ze_result_t td_ContextGetStatus(ze_context_handle_t c) { (void)c; return ZE_RESULT_SUCCESS; }

static ze_result_t td_alloc(size_t size, size_t align, void **out) {
  if (!out)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (align < 64)
    align = 64;
  *out = aligned_alloc(align, (size + align - 1) / align * align);
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
}
static ze_result_t td_MemAllocShared(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *dd,
                                     const ze_host_mem_alloc_desc_t *hd, size_t size, size_t align,
                                     ze_device_handle_t dev, void **out) {
  (void)c, (void)dd, (void)hd, (void)dev;
  return td_alloc(size, align, out);
}
static ze_result_t td_MemAllocDevice(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *dd,
                                     size_t size, size_t align, ze_device_handle_t dev, void **out) {
  (void)c, (void)dd, (void)dev;
  return td_alloc(size, align, out);
}
static ze_result_t td_MemAllocHost(ze_context_handle_t c, const ze_host_mem_alloc_desc_t *hd,
                                   size_t size, size_t align, void **out) {
  (void)c, (void)hd;
  return td_alloc(size, align, out);
}
static ze_result_t td_MemFree(ze_context_handle_t c, void *p) {
  (void)c;
  free(p);
  return ZE_RESULT_SUCCESS;
}

static ze_result_t td_ModuleCreate(ze_context_handle_t c, ze_device_handle_t d,
                                   const ze_module_desc_t *desc, ze_module_handle_t *out,
                                   ze_module_build_log_handle_t *log) {
  (void)c, (void)d, (void)desc;
  *out = calloc(1, sizeof(**out));
  if (log)
    *log = calloc(1, sizeof(**log));
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
static ze_result_t td_ModuleDestroy(ze_module_handle_t m) { free(m); return ZE_RESULT_SUCCESS; }
static ze_result_t td_ModuleGetKernelNames(ze_module_handle_t m, uint32_t *count, const char **n) {
  (void)m;
  for (uint32_t i = 0; n && i < *count && i < TD_NKERNELS; i++)
    n[i] = td_kernels[i].name;
  *count = TD_NKERNELS;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_ModuleBuildLogDestroy(ze_module_build_log_handle_t l) {
  free(l);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_ModuleBuildLogGetString(ze_module_build_log_handle_t l, size_t *size,
                                              char *s) {
  (void)l;
  if (s && *size)
    s[0] = 0;
  *size = 1;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t td_KernelCreate(ze_module_handle_t m, const ze_kernel_desc_t *desc,
                                   ze_kernel_handle_t *out) {
  (void)m;
  if (!desc || !desc->pKernelName || !out)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  for (uint32_t i = 0; i < TD_NKERNELS; i++)
    if (!strcmp(td_kernels[i].name, desc->pKernelName)) {
      *out = calloc(1, sizeof(**out));
      if (!*out)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
      (*out)->index = i;
      (*out)->group[0] = (*out)->group[1] = (*out)->group[2] = 1;
      return ZE_RESULT_SUCCESS;
    }
  return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
}
static ze_result_t td_KernelDestroy(ze_kernel_handle_t k) { free(k); return ZE_RESULT_SUCCESS; }
static ze_result_t td_KernelSetGroupSize(ze_kernel_handle_t k, uint32_t x, uint32_t y, uint32_t z) {
  k->group[0] = x, k->group[1] = y, k->group[2] = z;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_KernelSuggestGroupSize(ze_kernel_handle_t k, uint32_t gx, uint32_t gy,
                                             uint32_t gz, uint32_t *x, uint32_t *y, uint32_t *z) {
  (void)k, (void)gy, (void)gz;
  *x = gx % 64 == 0 ? 64 : 1;
  *y = *z = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_KernelSetArgumentValue(ze_kernel_handle_t k, uint32_t i, size_t size,
                                             const void *v) {
  if (i >= td_kernels[k->index].nargs)
    return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
  if (size > sizeof(k->args[i]))
    return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
  memset(k->args[i], 0, sizeof(k->args[i]));
  if (v)
    memcpy(k->args[i], v, size);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_KernelGetName(ze_kernel_handle_t k, size_t *size, char *name) {
  const char *n = td_kernels[k->index].name;
  if (name && *size)
    snprintf(name, *size, "%s", n);
  *size = strlen(n) + 1;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t td_EventPoolCreate(ze_context_handle_t c, const ze_event_pool_desc_t *desc,
                                      uint32_t n, ze_device_handle_t *devs,
                                      ze_event_pool_handle_t *out) {
  (void)c, (void)n, (void)devs;
  *out = calloc(1, sizeof(**out));
  if (!*out)
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  (*out)->count = desc ? desc->count : 0;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_EventPoolDestroy(ze_event_pool_handle_t p) {
  free(p);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_EventCreate(ze_event_pool_handle_t p, const ze_event_desc_t *desc,
                                  ze_event_handle_t *out) {
  if (!p || !desc || !out)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (desc->index >= p->count)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  *out = calloc(1, sizeof(**out));
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
static ze_result_t td_EventDestroy(ze_event_handle_t e) { free(e); return ZE_RESULT_SUCCESS; }
static ze_result_t td_EventHostSignal(ze_event_handle_t e) {
  pthread_mutex_lock(&td_lock);
  e->start = e->end = td_now();
  e->signaled = true;
  pthread_cond_broadcast(&td_cond);
  pthread_mutex_unlock(&td_lock);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_EventHostSynchronize(ze_event_handle_t e, uint64_t timeout) {
  return td_wait(&e->signaled, false, NULL, timeout);
}
static ze_result_t td_EventQueryStatus(ze_event_handle_t e) {
  return td_wait(&e->signaled, false, NULL, 0);
}
static ze_result_t td_EventHostReset(ze_event_handle_t e) {
  pthread_mutex_lock(&td_lock);
  e->signaled = false;
  pthread_mutex_unlock(&td_lock);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_EventQueryKernelTimestamp(ze_event_handle_t e,
                                                ze_kernel_timestamp_result_t *r) {
  pthread_mutex_lock(&td_lock);
  bool done = e->signaled;
  r->global.kernelStart = r->context.kernelStart = e->start;
  r->global.kernelEnd = r->context.kernelEnd = e->end;
  pthread_mutex_unlock(&td_lock);
  return done ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

static ze_result_t td_FenceCreate(ze_command_queue_handle_t q, const ze_fence_desc_t *desc,
                                  ze_fence_handle_t *out) {
  (void)q;
  *out = calloc(1, sizeof(**out));
  if (!*out)
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  (*out)->signaled = desc && (desc->flags & ZE_FENCE_FLAG_SIGNALED);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_FenceDestroy(ze_fence_handle_t f) { free(f); return ZE_RESULT_SUCCESS; }
static ze_result_t td_FenceHostSynchronize(ze_fence_handle_t f, uint64_t timeout) {
  return td_wait(&f->signaled, false, NULL, timeout);
}
static ze_result_t td_FenceQueryStatus(ze_fence_handle_t f) {
  return td_wait(&f->signaled, false, NULL, 0);
}
static ze_result_t td_FenceReset(ze_fence_handle_t f) {
  pthread_mutex_lock(&td_lock);
  f->signaled = false;
  pthread_mutex_unlock(&td_lock);
  return ZE_RESULT_SUCCESS;
}

static ze_result_t td_CommandQueueCreate(ze_context_handle_t c, ze_device_handle_t d,
                                         const ze_command_queue_desc_t *desc,
                                         ze_command_queue_handle_t *out) {
  (void)c, (void)d;
  ze_command_queue_handle_t q = calloc(1, sizeof(*q));
  if (!q)
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  q->synchronous = desc && desc->mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
  if (pthread_create(&q->worker, NULL, td_worker, q) != 0) {
    free(q);
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  }
  *out = q;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_CommandQueueSynchronize(ze_command_queue_handle_t q, uint64_t timeout) {
  return td_wait(NULL, true, q, timeout);
}
static ze_result_t td_CommandQueueDestroy(ze_command_queue_handle_t q) {
  pthread_mutex_lock(&td_lock);
  q->quit = true;
  pthread_cond_broadcast(&td_cond);
  pthread_mutex_unlock(&td_lock);
  pthread_join(q->worker, NULL);
  free(q);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_CommandQueueExecuteCommandLists(ze_command_queue_handle_t q, uint32_t n,
                                                      ze_command_list_handle_t *lists,
                                                      ze_fence_handle_t fence) {
  if (!q || (n && !lists))
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  td_batch_t *b = calloc(1, sizeof(*b));
  if (!b || !(b->lists = malloc((n ? n : 1) * sizeof(*lists)))) {
    free(b);
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  }
  memcpy(b->lists, lists, n * sizeof(*lists));
  b->count = n;
  b->fence = fence;
  pthread_mutex_lock(&td_lock);
  if (q->tail)
    q->tail->next = b;
  else
    q->head = b;
  q->tail = b;
  pthread_cond_broadcast(&td_cond);
  pthread_mutex_unlock(&td_lock);
  return q->synchronous ? td_CommandQueueSynchronize(q, UINT64_MAX) : ZE_RESULT_SUCCESS;
}

static ze_result_t td_CommandListCreate(ze_context_handle_t c, ze_device_handle_t d,
                                        const ze_command_list_desc_t *desc,
                                        ze_command_list_handle_t *out) {
  (void)c, (void)d, (void)desc;
  *out = calloc(1, sizeof(**out));
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
static ze_result_t td_CommandListCreateImmediate(ze_context_handle_t c, ze_device_handle_t d,
                                                 const ze_command_queue_desc_t *desc,
                                                 ze_command_list_handle_t *out) {
  (void)c, (void)d, (void)desc;
  *out = calloc(1, sizeof(**out));
  if (!*out)
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  (*out)->immediate = true;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_CommandListDestroy(ze_command_list_handle_t l) {
  td_list_free_cmds(l);
  free(l->cmds);
  free(l);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_CommandListClose(ze_command_list_handle_t l) {
  (void)l;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_CommandListReset(ze_command_list_handle_t l) {
  td_list_free_cmds(l);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t td_CommandListAppendBarrier(ze_command_list_handle_t l, ze_event_handle_t s,
                                               uint32_t n, ze_event_handle_t *w) {
  td_cmd_t c = {.type = C_BARRIER, .signal = s};
  return td_append(l, &c, n, w);
}
static ze_result_t td_CommandListAppendMemoryCopy(ze_command_list_handle_t l, void *dst,
                                                  const void *src, size_t size,
                                                  ze_event_handle_t s, uint32_t n,
                                                  ze_event_handle_t *w) {
  if (!dst || !src)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  td_cmd_t c = {.type = C_COPY, .dst = dst, .src = src, .size = size, .signal = s};
  return td_append(l, &c, n, w);
}
static ze_result_t td_CommandListAppendMemoryFill(ze_command_list_handle_t l, void *ptr,
                                                  const void *pattern, size_t psize, size_t size,
                                                  ze_event_handle_t s, uint32_t n,
                                                  ze_event_handle_t *w) {
  if (!ptr || !pattern)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (!psize || psize > 128 || size % psize)
    return ZE_RESULT_ERROR_INVALID_SIZE;
  td_cmd_t c = {.type = C_FILL, .dst = ptr, .size = size, .pattern_size = psize, .signal = s};
  memcpy(c.pattern, pattern, psize);
  return td_append(l, &c, n, w);
}
static ze_result_t td_CommandListAppendLaunchKernel(ze_command_list_handle_t l,
                                                    ze_kernel_handle_t k,
                                                    const ze_group_count_t *g, ze_event_handle_t s,
                                                    uint32_t n, ze_event_handle_t *w) {
  if (!k || !g)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  td_cmd_t c = {.type = C_KERNEL, .fn = td_kernels[k->index].fn, .signal = s};
  c.items = (uint64_t)g->groupCountX * k->group[0] * g->groupCountY * k->group[1] *
            g->groupCountZ * k->group[2];
  memcpy(c.args, k->args, sizeof(c.args));
  return td_append(l, &c, n, w);
}
static ze_result_t td_CommandListAppendSignalEvent(ze_command_list_handle_t l, ze_event_handle_t e) {
  td_cmd_t c = {.type = C_SIGNAL, .signal = e};
  return td_append(l, &c, 0, NULL);
}
static ze_result_t td_CommandListAppendWaitOnEvents(ze_command_list_handle_t l, uint32_t n,
                                                    ze_event_handle_t *w) {
  td_cmd_t c = {.type = C_WAIT};
  return td_append(l, &c, n, w);
}
static ze_result_t td_CommandListAppendEventReset(ze_command_list_handle_t l, ze_event_handle_t e) {
  td_cmd_t c = {.type = C_RESET, .signal = e};
  return td_append(l, &c, 0, NULL);
}
static ze_result_t td_CommandListAppendWriteGlobalTimestamp(ze_command_list_handle_t l,
                                                            uint64_t *dst, ze_event_handle_t s,
                                                            uint32_t n, ze_event_handle_t *w) {
  td_cmd_t c = {.type = C_TIMESTAMP, .dst = dst, .signal = s};
  return td_append(l, &c, n, w);
}

/* ---- the tables ------------------------------------------------------------ */
#define TD_TABLE(prefix, name, type, ...)                                                 \
  TD_EXPORT ze_result_t prefix##Get##name##ProcAddrTable(ze_api_version_t v, type *t) {  \
    if (!t)                                                                              \
      return ZE_RESULT_ERROR_INVALID_NULL_POINTER;                                       \
    if (ZE_MAJOR_VERSION(v) != ZE_MAJOR_VERSION(ZE_API_VERSION_CURRENT))                 \
      return ZE_RESULT_ERROR_UNSUPPORTED_VERSION;                                        \
    memset(t, 0, sizeof(*t));                                                            \
    __VA_ARGS__                                                                          \
    return ZE_RESULT_SUCCESS;                                                            \
  }

TD_TABLE(ze, Global, ze_global_dditable_t, t->pfnInit = td_Init;)
TD_TABLE(ze, Driver, ze_driver_dditable_t, t->pfnGet = td_DriverGet;
         t->pfnGetApiVersion = td_DriverGetApiVersion; t->pfnGetProperties = td_DriverGetProperties;
         t->pfnGetIpcProperties = td_DriverGetIpcProperties;
         t->pfnGetExtensionProperties = td_DriverGetExtensionProperties;
         t->pfnGetExtensionFunctionAddress = td_DriverGetExtensionFunctionAddress;)
TD_TABLE(ze, Device, ze_device_dditable_t, t->pfnGet = td_DeviceGet;
         t->pfnGetSubDevices = td_DeviceGetSubDevices; t->pfnGetProperties = td_DeviceGetProperties;
         t->pfnGetComputeProperties = td_DeviceGetComputeProperties;
         t->pfnGetModuleProperties = td_DeviceGetModuleProperties;
         t->pfnGetCommandQueueGroupProperties = td_DeviceGetCommandQueueGroupProperties;
         t->pfnGetMemoryProperties = td_DeviceGetMemoryProperties;
         t->pfnGetMemoryAccessProperties = td_DeviceGetMemoryAccessProperties;
         t->pfnGetGlobalTimestamps = td_DeviceGetGlobalTimestamps;
         t->pfnGetStatus = td_DeviceGetStatus;)
TD_TABLE(ze, Context, ze_context_dditable_t, t->pfnCreate = td_ContextCreate;
         t->pfnDestroy = td_ContextDestroy; t->pfnGetStatus = td_ContextGetStatus;)
TD_TABLE(ze, CommandQueue, ze_command_queue_dditable_t, t->pfnCreate = td_CommandQueueCreate;
         t->pfnDestroy = td_CommandQueueDestroy;
         t->pfnExecuteCommandLists = td_CommandQueueExecuteCommandLists;
         t->pfnSynchronize = td_CommandQueueSynchronize;)
TD_TABLE(ze, CommandList, ze_command_list_dditable_t, t->pfnCreate = td_CommandListCreate;
         t->pfnCreateImmediate = td_CommandListCreateImmediate;
         t->pfnDestroy = td_CommandListDestroy; t->pfnClose = td_CommandListClose;
         t->pfnReset = td_CommandListReset; t->pfnAppendBarrier = td_CommandListAppendBarrier;
         t->pfnAppendMemoryCopy = td_CommandListAppendMemoryCopy;
         t->pfnAppendMemoryFill = td_CommandListAppendMemoryFill;
         t->pfnAppendLaunchKernel = td_CommandListAppendLaunchKernel;
         t->pfnAppendSignalEvent = td_CommandListAppendSignalEvent;
         t->pfnAppendWaitOnEvents = td_CommandListAppendWaitOnEvents;
         t->pfnAppendEventReset = td_CommandListAppendEventReset;
         t->pfnAppendWriteGlobalTimestamp = td_CommandListAppendWriteGlobalTimestamp;)
TD_TABLE(ze, Fence, ze_fence_dditable_t, t->pfnCreate = td_FenceCreate;
         t->pfnDestroy = td_FenceDestroy; t->pfnHostSynchronize = td_FenceHostSynchronize;
         t->pfnQueryStatus = td_FenceQueryStatus; t->pfnReset = td_FenceReset;)
TD_TABLE(ze, EventPool, ze_event_pool_dditable_t, t->pfnCreate = td_EventPoolCreate;
         t->pfnDestroy = td_EventPoolDestroy;)
TD_TABLE(ze, Event, ze_event_dditable_t, t->pfnCreate = td_EventCreate;
         t->pfnDestroy = td_EventDestroy; t->pfnHostSignal = td_EventHostSignal;
         t->pfnHostSynchronize = td_EventHostSynchronize; t->pfnQueryStatus = td_EventQueryStatus;
         t->pfnHostReset = td_EventHostReset;
         t->pfnQueryKernelTimestamp = td_EventQueryKernelTimestamp;)
TD_TABLE(ze, Module, ze_module_dditable_t, t->pfnCreate = td_ModuleCreate;
         t->pfnDestroy = td_ModuleDestroy; t->pfnGetKernelNames = td_ModuleGetKernelNames;)
TD_TABLE(ze, ModuleBuildLog, ze_module_build_log_dditable_t,
         t->pfnDestroy = td_ModuleBuildLogDestroy; t->pfnGetString = td_ModuleBuildLogGetString;)
TD_TABLE(ze, Kernel, ze_kernel_dditable_t, t->pfnCreate = td_KernelCreate;
         t->pfnDestroy = td_KernelDestroy; t->pfnSetGroupSize = td_KernelSetGroupSize;
         t->pfnSuggestGroupSize = td_KernelSuggestGroupSize;
         t->pfnSetArgumentValue = td_KernelSetArgumentValue; t->pfnGetName = td_KernelGetName;)
TD_TABLE(ze, Mem, ze_mem_dditable_t, t->pfnAllocShared = td_MemAllocShared;
         t->pfnAllocDevice = td_MemAllocDevice; t->pfnAllocHost = td_MemAllocHost;
         t->pfnFree = td_MemFree;)
/* Required by the loader, left empty. */
TD_TABLE(ze, Image, ze_image_dditable_t, ) TD_TABLE(ze, Sampler, ze_sampler_dditable_t, )
TD_TABLE(ze, PhysicalMem, ze_physical_mem_dditable_t, )
TD_TABLE(ze, VirtualMem, ze_virtual_mem_dditable_t, ) TD_TABLE(zet, Device, zet_device_dditable_t, )
TD_TABLE(zet, Context, zet_context_dditable_t, )
TD_TABLE(zet, CommandList, zet_command_list_dditable_t, )
TD_TABLE(zet, Module, zet_module_dditable_t, ) TD_TABLE(zet, Kernel, zet_kernel_dditable_t, )
TD_TABLE(zet, MetricGroup, zet_metric_group_dditable_t, )
TD_TABLE(zet, Metric, zet_metric_dditable_t, )
TD_TABLE(zet, MetricStreamer, zet_metric_streamer_dditable_t, )
TD_TABLE(zet, MetricQueryPool, zet_metric_query_pool_dditable_t, )
TD_TABLE(zet, MetricQuery, zet_metric_query_dditable_t, )
TD_TABLE(zet, Debug, zet_debug_dditable_t, ) TD_TABLE(zet, TracerExp, zet_tracer_exp_dditable_t, )
TD_TABLE(zes, Driver, zes_driver_dditable_t, ) TD_TABLE(zes, Device, zes_device_dditable_t, )
TD_TABLE(zes, Scheduler, zes_scheduler_dditable_t, )
TD_TABLE(zes, PerformanceFactor, zes_performance_factor_dditable_t, )
TD_TABLE(zes, Power, zes_power_dditable_t, ) TD_TABLE(zes, Frequency, zes_frequency_dditable_t, )
TD_TABLE(zes, Engine, zes_engine_dditable_t, ) TD_TABLE(zes, Standby, zes_standby_dditable_t, )
TD_TABLE(zes, Firmware, zes_firmware_dditable_t, ) TD_TABLE(zes, Memory, zes_memory_dditable_t, )
TD_TABLE(zes, FabricPort, zes_fabric_port_dditable_t, )
TD_TABLE(zes, Temperature, zes_temperature_dditable_t, ) TD_TABLE(zes, Psu, zes_psu_dditable_t, )
TD_TABLE(zes, Fan, zes_fan_dditable_t, ) TD_TABLE(zes, Led, zes_led_dditable_t, )
TD_TABLE(zes, Ras, zes_ras_dditable_t, ) TD_TABLE(zes, Diagnostics, zes_diagnostics_dditable_t, )
