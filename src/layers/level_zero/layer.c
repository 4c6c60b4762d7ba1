/* libze_tracing_layer.so.1: the Level Zero loader's API tracing layer
 * (document 003) on the tracer core, a drop-in for the loader's own.  The
 * loader dlopens it by that name when ZE_ENABLE_TRACING_LAYER=1, takes the
 * tracer functions from zelGetTracerApiProcAddrTable, forwards
 * zelTracer<Fn>RegisterCallback here by name, and hands every DDI table
 * through our zeGet<Table>ProcAddrTable, where the traceable entries are
 * swapped for wrappers.  With an XPTI dispatcher loaded the wrappers also
 * emit the streams level_zero.api and level_zero.graph.
 *
 * No function here is named like an API entry the loader exports (the
 * dynamic linker would bind our calls to the loader's copies); the
 * library is linked -Bsymbolic as well. */
#include <level_zero/layers/zel_tracing_api.h>
#include <level_zero/layers/zel_tracing_ddi.h>
#include <level_zero/loader/ze_loader.h>
#include <stdio.h>
#include <string.h>
#include <xpti/xpti_trace_framework.h>

#include "xpt_tracer.h"
#include "ze_layer.h"

#define ZE_EXPORT __attribute__((visibility("default")))

ze_layer_next_t ze_next;
XPT_TRACER_DOMAIN_DEFINE(static, ze_domain, XPT_ZE_FN_COUNT);
static uint8_t ze_api_stream = XPTI_INVALID_STREAM_ID;
uint8_t ze_graph_stream = XPTI_INVALID_STREAM_ID;
static bool ze_xpti_live; /* a dispatcher is loaded: ask it per call */

static const char *const ze_function_names[XPT_ZE_FN_COUNT] = {
#define XPT_ZE_FN(table, member, name, params, n, ...) "ze" #name,
#include "ze_api.def"
#undef XPT_ZE_FN
};

/* ---- wrappers ------------------------------------------------------- */
#define ZE_PARAMS(n, ...) XPT_ZE_ARGS(n, XPT_ZE_DECL, XPT_ZE_COMMA, ##__VA_ARGS__)
#define ZE_ARGS(n, ...) XPT_ZE_ARGS(n, XPT_ZE_NAME, XPT_ZE_COMMA, ##__VA_ARGS__)

#define ZE_HOOKED(id)                                                                     \
  __builtin_expect(atomic_load_explicit(&ze_domain_lists[id], memory_order_relaxed) != NULL, 0)

static inline void ze_notify(bool on, uint16_t type, xpti_function_with_args_t *data,
                             uint64_t id) {
  if (on && !xpt_tracer_in_callback())
    (void)xptiNotifySubscribers(ze_api_stream, type, NULL, NULL, id, data);
}

/* Callbacks run with their own type (the list stores them as the core's
 * generic pointer); prologues get ZE_RESULT_SUCCESS as Debian's layer
 * gives, epilogues the call's result, in reverse order. */
#define ZE_PROLOGUES(cbtype, l)                                                          \
  do {                                                                                   \
    xpt_tracer_self.state = XPT_TRACER_THREAD_IN_CALLBACK;                               \
    for (uint32_t i_ = 0; i_ < (l)->count; i_++) {                                       \
      instance[i_] = NULL;                                                               \
      if ((l)->entry[i_].prologue)                                                       \
        ((cbtype)(void (*)(void))(l)->entry[i_].prologue)(&params, ZE_RESULT_SUCCESS,                    \
                                          (l)->entry[i_].user_data, &instance[i_]);      \
    }                                                                                    \
    xpt_tracer_self.state = XPT_TRACER_THREAD_IN_CALL;                                   \
  } while (0)
#define ZE_EPILOGUES(cbtype, l)                                                          \
  do {                                                                                   \
    xpt_tracer_self.state = XPT_TRACER_THREAD_IN_CALLBACK;                               \
    for (uint32_t i_ = (l)->count; i_-- > 0;)                                            \
      if ((l)->entry[i_].epilogue)                                                       \
        ((cbtype)(void (*)(void))(l)->entry[i_].epilogue)(&params, result, (l)->entry[i_].user_data,     \
                                          &instance[i_]);                                \
    xpt_tracer_self.state = XPT_TRACER_THREAD_READY;                                     \
    atomic_store_explicit(&xpt_tracer_self.pin, NULL, memory_order_release);             \
  } while (0)

/* The slow path: tracers, then XPTI and the graph around the real call,
 * which takes the arguments as the prologues left them. */
#define XPT_ZE_FN(table, member, name, ptype, n, ...)                                    \
  static __attribute__((noinline)) ze_result_t ze_traced_##name(ZE_PARAMS(n, __VA_ARGS__)) { \
    ptype params = {XPT_ZE_ARGS(n, XPT_ZE_ADDR, XPT_ZE_COMMA, __VA_ARGS__)};             \
    ze_result_t result;                                                                  \
    const xpt_tracer_list_t *tracers =                                                   \
        xpt_tracer_enter_at(&ze_domain, &ze_domain_lists[XPT_ZE_FN_##name]);             \
    void *instance[XPT_TRACER_MAX];                                                      \
    if (tracers)                                                                         \
      ZE_PROLOGUES(ze_pfn##name##Cb_t, tracers);                                         \
    bool api_on = false, graph_on = false;                                               \
    if (__builtin_expect(ze_xpti_live, 0)) {                                             \
      api_on = xptiCheckTraceEnabled(ze_api_stream, 0);                                  \
      graph_on = ze_graph_fn(XPT_ZE_FN_##name) && xptiCheckTraceEnabled(ze_graph_stream, 0); \
    }                                                                                    \
    if (__builtin_expect((int)api_on | (int)graph_on, 0)) {                              \
      uint64_t id = api_on ? xpt_tracer_next_correlation_id() : 0;                       \
      xpti_function_with_args_t data = {XPT_ZE_FN_##name, "ze" #name, &params, NULL, NULL}; \
      ze_notify(api_on, XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN, &data, id);                 \
      ze_graph_call_t graph = {NULL, NULL, NULL};                                        \
      graph_on = graph_on && !xpt_tracer_in_callback();                                  \
      if (graph_on && ze_graph_before_fn(XPT_ZE_FN_##name))                              \
        ze_graph_before(XPT_ZE_FN_##name, &params, &graph);                              \
      result = ze_next.table.member(ZE_ARGS(n, __VA_ARGS__));                            \
      if (graph_on)                                                                      \
        ze_graph_after(XPT_ZE_FN_##name, &params, result, __builtin_return_address(0),   \
                       &graph);                                                          \
      data.ret_data = &result;                                                           \
      ze_notify(api_on, XPTI_TRACE_FUNCTION_WITH_ARGS_END, &data, id);                   \
    } else {                                                                             \
      result = ze_next.table.member(ZE_ARGS(n, __VA_ARGS__));                            \
    }                                                                                    \
    if (tracers)                                                                         \
      ZE_EPILOGUES(ze_pfn##name##Cb_t, tracers);                                         \
    return result;                                                                       \
  }                                                                                      \
  static ze_result_t ze_layer_##name(ZE_PARAMS(n, __VA_ARGS__)) {                        \
    if (ZE_HOOKED(XPT_ZE_FN_##name))                                                     \
      return ze_traced_##name(ZE_ARGS(n, __VA_ARGS__));                                  \
    return ze_next.table.member(ZE_ARGS(n, __VA_ARGS__));                                \
  }
#include "ze_api.def"
#undef XPT_ZE_FN

/* ---- the DDI tables --------------------------------------------------- */
static void ze_xpti_init(void) {
  static bool done;
  if (done)
    return;
  done = true;
  if (xptiInitialize("level_zero.api", 1, 0, "1.0") == XPTI_RESULT_FAIL)
    return;
  (void)xptiInitialize("level_zero.graph", 1, 0, "1.0");
  ze_api_stream = xptiRegisterStream("level_zero.api");
  ze_graph_stream = xptiRegisterStream("level_zero.graph");
  if (ze_api_stream == XPTI_INVALID_STREAM_ID || ze_graph_stream == XPTI_INVALID_STREAM_ID)
    return;
  ze_graph_init();
  ze_xpti_live = true;
}

/* Keeps the entry below us and puts ours in its place.  The loader may
 * hand a table twice; an entry that is already ours keeps the one saved. */
#define ZE_HOOK(table, member, name)                                                     \
  do {                                                                                   \
    __typeof__(ze_next.table) *t_ = ddi;                                                 \
    __typeof__(t_->member) ours_ = ze_xpti_live ? ze_traced_##name : ze_layer_##name;    \
    if (t_->member && t_->member != ze_traced_##name && t_->member != ze_layer_##name) { \
      ze_next.table.member = t_->member;                                                 \
      t_->member = ours_;                                                                \
    } else if (t_->member) {                                                             \
      t_->member = ours_;                                                                \
    }                                                                                    \
  } while (0)

typedef enum ze_table_tag {
#define XPT_ZE_TABLE(table, type, entries) ZE_TAG_##table,
#include "ze_api.def"
#undef XPT_ZE_TABLE
  ZE_TAG_COUNT
} ze_table_tag_t;

static void ze_hook_table(ze_table_tag_t tag, void *ddi) {
  ze_xpti_init();
#define XPT_ZE_FN(table, member, name, ptype, n, ...)                                    \
  if (tag == ZE_TAG_##table)                                                             \
    ZE_HOOK(table, member, name);
#include "ze_api.def"
#undef XPT_ZE_FN
}

static ze_result_t ze_version_ok(ze_api_version_t version) {
  return ZE_MAJOR_VERSION(version) == ZE_MAJOR_VERSION(ZE_API_VERSION_CURRENT)
             ? ZE_RESULT_SUCCESS
             : ZE_RESULT_ERROR_UNSUPPORTED_VERSION;
}

#define XPT_ZE_TABLE(table, type, entries)                                               \
  ZE_EXPORT ze_result_t zeGet##table##ProcAddrTable(ze_api_version_t version, type *ddi) { \
    if (!ddi)                                                                            \
      return ZE_RESULT_ERROR_INVALID_NULL_POINTER;                                       \
    ze_result_t rc = ze_version_ok(version);                                             \
    if (rc == ZE_RESULT_SUCCESS)                                                         \
      ze_hook_table(ZE_TAG_##table, ddi);                                                \
    return rc;                                                                           \
  }
#include "ze_api.def"
#undef XPT_ZE_TABLE

/* ---- tracer API ------------------------------------------------------- */
/* Stored as the core's pointer type, called back with their own. */
#define ZE_GENERIC(cb) ((xpt_tracer_fn_t)(void (*)(void))(cb))

static ze_result_t ze_result_of(int rc) {
  switch (rc) {
  case XPT_TRACER_OK: return ZE_RESULT_SUCCESS;
  case XPT_TRACER_ENABLED: return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  case XPT_TRACER_OUT_OF_RESOURCES: return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  case XPT_TRACER_IN_CALLBACK: return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
  default: return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
}

static ze_result_t ze_tracer_create(const zel_tracer_desc_t *desc, zel_tracer_handle_t *out) {
  if (!desc || !out)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  xpt_tracer_t *t;
  int rc = xpt_tracer_create(&ze_domain, desc->pUserData, &t);
  if (rc == XPT_TRACER_OK)
    *out = (zel_tracer_handle_t)t;
  return ze_result_of(rc);
}

static ze_result_t ze_tracer_destroy(zel_tracer_handle_t tracer) {
  if (!tracer)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return ze_result_of(xpt_tracer_destroy((xpt_tracer_t *)tracer));
}

/* The 1.0 functions of ze_callbacks_t, in one step: the first refusal
 * (tracer enabled) comes before anything changed. */
static ze_result_t ze_tracer_set_core(zel_tracer_handle_t tracer, bool epilogue,
                                      const zel_core_callbacks_t *cbs) {
  if (!tracer)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!cbs)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  int rc = XPT_TRACER_OK;
#define XPT_ZE_CB(group, member, name)                                                   \
  if (rc == XPT_TRACER_OK)                                                               \
    rc = xpt_tracer_set_callback((xpt_tracer_t *)tracer, epilogue, XPT_ZE_FN_##name,     \
                                 ZE_GENERIC(cbs->group.member));
#include "ze_api.def"
#undef XPT_ZE_CB
  return ze_result_of(rc);
}

static ze_result_t ze_tracer_set_prologues(zel_tracer_handle_t tracer, zel_core_callbacks_t *cbs) {
  return ze_tracer_set_core(tracer, false, cbs);
}

static ze_result_t ze_tracer_set_epilogues(zel_tracer_handle_t tracer, zel_core_callbacks_t *cbs) {
  return ze_tracer_set_core(tracer, true, cbs);
}

static ze_result_t ze_tracer_set_enabled(zel_tracer_handle_t tracer, ze_bool_t enable) {
  if (!tracer)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return ze_result_of(xpt_tracer_set_enabled((xpt_tracer_t *)tracer, enable != 0));
}

ZE_EXPORT ze_result_t zelGetTracerApiProcAddrTable(ze_api_version_t version,
                                                   zel_tracer_dditable_t *ddi) {
  if (!ddi)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  ze_result_t rc = ze_version_ok(version);
  if (rc != ZE_RESULT_SUCCESS)
    return rc;
  ddi->pfnCreate = ze_tracer_create;
  ddi->pfnDestroy = ze_tracer_destroy;
  ddi->pfnSetPrologues = ze_tracer_set_prologues;
  ddi->pfnSetEpilogues = ze_tracer_set_epilogues;
  ddi->pfnSetEnabled = ze_tracer_set_enabled;
  return ZE_RESULT_SUCCESS;
}

/* The loader's zelTracer<Fn>RegisterCallback looks these up by name. */
#define XPT_ZE_FN(table, member, name, ptype, n, ...)                                    \
  ZE_EXPORT ze_result_t zelTracer##name##RegisterCallback(                               \
      zel_tracer_handle_t tracer, zel_tracer_reg_t type, ze_pfn##name##Cb_t cb) {        \
    if (!tracer)                                                                         \
      return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;                                        \
    if (type != ZEL_REGISTER_PROLOGUE && type != ZEL_REGISTER_EPILOGUE)                  \
      return ZE_RESULT_ERROR_INVALID_ENUMERATION;                                        \
    return ze_result_of(xpt_tracer_set_callback((xpt_tracer_t *)tracer,                 \
                                                type == ZEL_REGISTER_EPILOGUE,           \
                                                XPT_ZE_FN_##name, ZE_GENERIC(cb))); \
  }
#include "ze_api.def"
#undef XPT_ZE_FN

/* Declared by zel_tracing_register_cb.h; the 1.8 loader forwards no such
 * call, so a tool reaches it here (linked, or dlsym on this library). */
ZE_EXPORT ze_result_t zelTracerResetAllCallbacks(zel_tracer_handle_t tracer) {
  if (!tracer)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return ze_result_of(xpt_tracer_reset((xpt_tracer_t *)tracer));
}

ZE_EXPORT ze_result_t zelLoaderGetVersion(zel_component_version_t *version) {
  if (!version)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(version, 0, sizeof(*version));
  snprintf(version->component_name, sizeof(version->component_name), "%s",
           "xptrace ze_tracing_layer");
  version->spec_version = ZE_API_VERSION_CURRENT;
  version->component_lib_version.major = 1;
  version->component_lib_version.minor = 8;
  version->component_lib_version.patch = 12;
  return ZE_RESULT_SUCCESS;
}

const char *ze_function_name(uint32_t fn) {
  return fn < XPT_ZE_FN_COUNT ? ze_function_names[fn] : NULL;
}
