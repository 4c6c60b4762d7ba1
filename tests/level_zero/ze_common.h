/* Shared by the Level Zero test programs: the usual setup through the
 * loader (driver, device, context, module, queue, list) and a check. */
#ifndef ZE_COMMON_H
#define ZE_COMMON_H

#include <level_zero/ze_api.h>
#include <stdio.h>
#include <stdlib.h>

#define ZE_CHECK(call)                                                                   \
  do {                                                                                   \
    ze_result_t rc_ = (call);                                                            \
    if (rc_ != ZE_RESULT_SUCCESS) {                                                      \
      fprintf(stderr, "%s:%d: %s: 0x%x\n", __FILE__, __LINE__, #call, (unsigned)rc_);    \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

typedef struct ze_env {
  ze_driver_handle_t driver;
  ze_device_handle_t device;
  ze_context_handle_t context;
  ze_module_handle_t module;
} ze_env_t;

static inline void ze_env_open(ze_env_t *e) {
  ZE_CHECK(zeInit(0));
  uint32_t n = 1;
  ZE_CHECK(zeDriverGet(&n, &e->driver));
  n = 1;
  ZE_CHECK(zeDeviceGet(e->driver, &n, &e->device));
  ze_context_desc_t cd = {ZE_STRUCTURE_TYPE_CONTEXT_DESC, NULL, 0};
  ZE_CHECK(zeContextCreate(e->driver, &cd, &e->context));
  static const uint8_t binary[] = "xptrace test kernels";
  ze_module_desc_t md = {ZE_STRUCTURE_TYPE_MODULE_DESC, NULL, ZE_MODULE_FORMAT_NATIVE,
                         sizeof(binary), binary, NULL, NULL};
  ZE_CHECK(zeModuleCreate(e->context, e->device, &md, &e->module, NULL));
}

static inline ze_kernel_handle_t ze_env_kernel(ze_env_t *e, const char *name) {
  ze_kernel_desc_t kd = {ZE_STRUCTURE_TYPE_KERNEL_DESC, NULL, 0, name};
  ze_kernel_handle_t k;
  ZE_CHECK(zeKernelCreate(e->module, &kd, &k));
  return k;
}

static inline ze_command_queue_handle_t ze_env_queue(ze_env_t *e) {
  ze_command_queue_desc_t qd = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, NULL, 0, 0, 0,
                                ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                                ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ze_command_queue_handle_t q;
  ZE_CHECK(zeCommandQueueCreate(e->context, e->device, &qd, &q));
  return q;
}

static inline ze_command_list_handle_t ze_env_list(ze_env_t *e) {
  ze_command_list_desc_t ld = {ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, NULL, 0, 0};
  ze_command_list_handle_t l;
  ZE_CHECK(zeCommandListCreate(e->context, e->device, &ld, &l));
  return l;
}

static inline void ze_env_close(ze_env_t *e) {
  ZE_CHECK(zeModuleDestroy(e->module));
  ZE_CHECK(zeContextDestroy(e->context));
}

#endif
