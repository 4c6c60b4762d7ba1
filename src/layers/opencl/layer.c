/* libxptrace_opencl.so: an ocl-icd layer (OPENCL_LAYERS) that intercepts
 * every entry point of the ICD dispatch table, runs tracer callbacks and
 * emits the XPTI streams opencl.api and opencl.graph. */
#include <stddef.h>

#include "layer_internal.h"
#include "xpt_tracer.h"
#include "xpti/xpti_data_types.h"

/* Collectors read "opencl.api" user data as xpti_function_with_args_t. */
_Static_assert(offsetof(xpt_cl_api_call_t, function_name) ==
                   offsetof(xpti_function_with_args_t, function_name), "api call layout");
_Static_assert(offsetof(xpt_cl_api_call_t, args) == offsetof(xpti_function_with_args_t, args_data),
               "api call layout");
_Static_assert(offsetof(xpt_cl_api_call_t, return_value) ==
                   offsetof(xpti_function_with_args_t, ret_data), "api call layout");

#include <CL/cl_layer.h>
#include <stdio.h>
#include <string.h>
#include <xpti/xpti_trace_framework.h>

cl_icd_dispatch layer_next;
static cl_icd_dispatch layer_dispatch;
XPT_TRACER_DOMAIN_DEFINE(static, layer_domain, XPT_CL_FN_COUNT);
static uint8_t layer_api_stream = XPTI_INVALID_STREAM_ID;
uint8_t layer_graph_stream = XPTI_INVALID_STREAM_ID;
/* A dispatcher is loaded: ask it per call whether anyone listens. */
static bool layer_xpti_live;

#define XPT_CL_FN(ret, name, n, ...) #name,
#define XPT_CL_FN_VOID(name, n, ...) #name,
#define XPT_CL_OPAQUE(name)
static const char *const layer_function_names[XPT_CL_FN_COUNT] = {
#include <xptrace/cl_api.def>
};
#undef XPT_CL_FN
#undef XPT_CL_FN_VOID
#undef XPT_CL_OPAQUE

/* ---- wrappers ------------------------------------------------------- */
#define LAYER_VOID_0 void
#define LAYER_VOID_1
#define LAYER_VOID_2
#define LAYER_VOID_3
#define LAYER_VOID_4
#define LAYER_VOID_5
#define LAYER_VOID_6
#define LAYER_VOID_7
#define LAYER_VOID_8
#define LAYER_VOID_9
#define LAYER_VOID_10
#define LAYER_VOID_11
#define LAYER_VOID_12
#define LAYER_VOID_13
#define LAYER_VOID_14
#define LAYER_PARAMS(n, ...) LAYER_VOID_##n XPT_CL_ARGS(n, XPT_CL_DECL, XPT_CL_COMMA, ##__VA_ARGS__)
#define LAYER_ARGS(n, ...) XPT_CL_ARGS(n, XPT_CL_NAME, XPT_CL_COMMA, ##__VA_ARGS__)

/* A tracer has a callback on this function.  (With an XPTI dispatcher
 * loaded the traced functions are installed directly instead.) */
#define LAYER_HOOKED(id)                                                                   \
  __builtin_expect(atomic_load_explicit(&layer_domain_lists[id], memory_order_relaxed) != NULL, 0)

static inline void layer_notify(bool on, uint16_t type, xpt_cl_api_call_t *data) {
  if (on && !xpt_tracer_in_callback())
    (void)xptiNotifySubscribers(layer_api_stream, type, NULL, NULL, data->correlation_id, data);
}

/* The slow path: tracers, XPTI and graph around the real call.  Whether a
 * stream has a subscriber is asked per call (lock-free in the dispatcher),
 * so one that registers late is honoured.  The graph step sees the
 * arguments after the prologues changed them. */
#define LAYER_TRACED_BODY(id, name, result_ptr, call_expr)                                  \
  const xpt_tracer_list_t *tracers = xpt_tracer_enter_at(&layer_domain, &layer_domain_lists[id]); \
  void *instance[XPT_TRACER_MAX];                                                           \
  uint64_t correlation_id = 0;                                                              \
  if (tracers) {                                                                            \
    correlation_id = xpt_tracer_new_id();                                                   \
    xpt_tracer_prologues(tracers, &params, instance, correlation_id);                       \
  }                                                                                         \
  bool api_on = false, graph_on = false;                                                    \
  if (__builtin_expect(layer_xpti_live, 0)) {                                               \
    api_on = xptiCheckTraceEnabled(layer_api_stream, 0);                                    \
    graph_on = layer_graph_fn(id) &&                                                       \
               (layer_graph_always(id) || xptiCheckTraceEnabled(layer_graph_stream, 0));    \
  }                                                                                         \
  if (__builtin_expect((int)api_on | (int)graph_on, 0)) {                                   \
    xpt_cl_api_call_t data = {id, #name, &params, NULL, correlation_id};                     \
    if (api_on && !data.correlation_id)                                                     \
      data.correlation_id = xpt_tracer_next_correlation_id();                               \
    layer_notify(api_on, XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN, &data);                       \
    graph_call_t graph;                                                                     \
    graph.active = false;                                                                   \
    if (graph_on)                                                                           \
      graph_before(id, &params, &graph, __builtin_return_address(0));                       \
    call_expr;                                                                              \
    if (graph.active)                                                                       \
      graph_after(id, &params, result_ptr, &graph);                                         \
    data.return_value = result_ptr;                                                         \
    layer_notify(api_on, XPTI_TRACE_FUNCTION_WITH_ARGS_END, &data);                         \
  } else {                                                                                  \
    call_expr;                                                                              \
  }                                                                                         \
  if (tracers)                                                                              \
    xpt_tracer_epilogues(tracers, &params, result_ptr, instance, correlation_id);

#define XPT_CL_FN(ret, name, n, ...)                                                         \
  static __attribute__((noinline)) ret layer_traced_##name(LAYER_PARAMS(n, ##__VA_ARGS__)) { \
    xpt_cl_##name##_params_t params = {XPT_CL_ARGS(n, XPT_CL_ADDR, XPT_CL_COMMA, ##__VA_ARGS__)}; \
    ret result;                                                                             \
    LAYER_TRACED_BODY(XPT_CL_FN_##name, name, &result,                                      \
                      result = layer_next.name(LAYER_ARGS(n, ##__VA_ARGS__)))               \
    return result;                                                                          \
  }                                                                                         \
  static ret CL_API_CALL layer_##name(LAYER_PARAMS(n, ##__VA_ARGS__)) {                      \
    if (LAYER_HOOKED(XPT_CL_FN_##name))                                                     \
      return layer_traced_##name(LAYER_ARGS(n, ##__VA_ARGS__));                             \
    return layer_next.name(LAYER_ARGS(n, ##__VA_ARGS__));                                   \
  }
#define XPT_CL_FN_VOID(name, n, ...)                                                         \
  static __attribute__((noinline)) void layer_traced_##name(LAYER_PARAMS(n, ##__VA_ARGS__)) { \
    xpt_cl_##name##_params_t params = {XPT_CL_ARGS(n, XPT_CL_ADDR, XPT_CL_COMMA, ##__VA_ARGS__)}; \
    LAYER_TRACED_BODY(XPT_CL_FN_##name, name, NULL, layer_next.name(LAYER_ARGS(n, ##__VA_ARGS__))) \
  }                                                                                         \
  static void CL_API_CALL layer_##name(LAYER_PARAMS(n, ##__VA_ARGS__)) {                     \
    if (LAYER_HOOKED(XPT_CL_FN_##name)) {                                                   \
      layer_traced_##name(LAYER_ARGS(n, ##__VA_ARGS__));                                    \
      return;                                                                               \
    }                                                                                       \
    layer_next.name(LAYER_ARGS(n, ##__VA_ARGS__));                                          \
  }
#define XPT_CL_OPAQUE(name)
#include <xptrace/cl_api.def>
#undef XPT_CL_FN
#undef XPT_CL_FN_VOID
#undef XPT_CL_OPAQUE

/* ---- the layer entry points ----------------------------------------- */
static const char layer_name[] = "xptrace OpenCL tracing layer";

XPT_CL_API CL_API_ENTRY cl_int CL_API_CALL clGetLayerInfo(cl_layer_info param_name,
                                                         size_t param_value_size,
                                                         void *param_value,
                                                         size_t *param_value_size_ret) {
  const void *value;
  size_t size;
  cl_layer_api_version version = CL_LAYER_API_VERSION_100;
  switch (param_name) {
  case CL_LAYER_API_VERSION:
    value = &version;
    size = sizeof(version);
    break;
  case CL_LAYER_NAME:
    value = layer_name;
    size = sizeof(layer_name);
    break;
  default:
    return CL_INVALID_VALUE;
  }
  if (param_value) {
    if (param_value_size < size)
      return CL_INVALID_VALUE;
    memcpy(param_value, value, size);
  }
  if (param_value_size_ret)
    *param_value_size_ret = size;
  return CL_SUCCESS;
}

static void layer_xpti_init(void) {
  /* Streams are announced once (subscribers loaded at start register in
   * xptiTraceInit); a FAIL means no dispatcher, and then nothing can ever
   * listen.  Otherwise the per-call check decides. */
  if (xptiInitialize("opencl.api", 1, 0, "1.0") == XPTI_RESULT_FAIL)
    return;
  (void)xptiInitialize("opencl.graph", 1, 0, "1.0");
  layer_api_stream = xptiRegisterStream("opencl.api");
  layer_graph_stream = xptiRegisterStream("opencl.graph");
  if (layer_api_stream == XPTI_INVALID_STREAM_ID || layer_graph_stream == XPTI_INVALID_STREAM_ID)
    return;
  graph_init();
  layer_xpti_live = true;
}

XPT_CL_API CL_API_ENTRY cl_int CL_API_CALL clInitLayer(cl_uint num_entries,
                                                      const cl_icd_dispatch *target_dispatch,
                                                      cl_uint *num_entries_ret,
                                                      const cl_icd_dispatch **layer_dispatch_ret) {
  const cl_uint ours = (cl_uint)(sizeof(cl_icd_dispatch) / sizeof(void *));
  if (!target_dispatch || !num_entries_ret || !layer_dispatch_ret)
    return CL_INVALID_VALUE;
  /* A shorter table from an older loader: the missing tail stays NULL
   * below us, and our wrappers for it are never reached. */
  memset(&layer_next, 0, sizeof(layer_next));
  memcpy(&layer_next, target_dispatch,
         (num_entries < ours ? num_entries : ours) * sizeof(void *));
  layer_dispatch = layer_next; /* opaque entries pass straight through */
  layer_xpti_init();
  /* Decided once: with a dispatcher every call asks it, so the wrappers
   * that only look for tracers would be one more hop. */
#define XPT_CL_FN(ret, name, n, ...)                                                         \
  layer_dispatch.name = layer_xpti_live ? layer_traced_##name : layer_##name;
#define XPT_CL_FN_VOID(name, n, ...)                                                         \
  layer_dispatch.name = layer_xpti_live ? layer_traced_##name : layer_##name;
#define XPT_CL_OPAQUE(name)
#include <xptrace/cl_api.def>
#undef XPT_CL_FN
#undef XPT_CL_FN_VOID
#undef XPT_CL_OPAQUE
  *num_entries_ret = ours;
  *layer_dispatch_ret = &layer_dispatch;
  return CL_SUCCESS;
}

/* ---- tracer API ----------------------------------------------------- */
static xpt_cl_result_t layer_result(int rc) { return (xpt_cl_result_t)rc; }

XPT_CL_API xpt_cl_result_t xpt_cl_tracer_create(const xpt_cl_tracer_desc_t *desc,
                                                xpt_cl_tracer_handle_t *tracer) {
  if (!desc || !tracer || desc->version < 1)
    return XPT_CL_ERROR_INVALID_ARGUMENT;
  xpt_tracer_t *t;
  int rc = xpt_tracer_create(&layer_domain, desc->user_data, &t);
  if (rc == XPT_TRACER_OK)
    *tracer = (xpt_cl_tracer_handle_t)t;
  return layer_result(rc);
}

XPT_CL_API xpt_cl_result_t xpt_cl_tracer_destroy(xpt_cl_tracer_handle_t tracer) {
  return layer_result(xpt_tracer_destroy((xpt_tracer_t *)tracer));
}

static xpt_cl_result_t layer_set_all(xpt_cl_tracer_handle_t tracer, bool epilogue,
                                     const xpt_cl_callbacks_t *callbacks) {
  if (!callbacks)
    return XPT_CL_ERROR_INVALID_ARGUMENT;
  /* The callbacks table is one function pointer per id, in id order. */
  _Static_assert(sizeof(xpt_cl_callbacks_t) == XPT_CL_FN_COUNT * sizeof(xpt_tracer_fn_t),
                 "one callback per function");
  xpt_tracer_fn_t table[XPT_CL_FN_COUNT];
  memcpy(table, callbacks, sizeof(table));
  return layer_result(xpt_tracer_set_all((xpt_tracer_t *)tracer, epilogue, table));
}

XPT_CL_API xpt_cl_result_t xpt_cl_tracer_set_prologues(xpt_cl_tracer_handle_t tracer,
                                                       const xpt_cl_callbacks_t *callbacks) {
  return layer_set_all(tracer, false, callbacks);
}

XPT_CL_API xpt_cl_result_t xpt_cl_tracer_set_epilogues(xpt_cl_tracer_handle_t tracer,
                                                       const xpt_cl_callbacks_t *callbacks) {
  return layer_set_all(tracer, true, callbacks);
}

XPT_CL_API xpt_cl_result_t xpt_cl_tracer_register_callback(xpt_cl_tracer_handle_t tracer,
                                                           xpt_cl_callback_site_t site,
                                                           xpt_cl_function_id_t function,
                                                           xpt_cl_callback_t callback) {
  if (site != XPT_CL_PROLOGUE && site != XPT_CL_EPILOGUE)
    return XPT_CL_ERROR_INVALID_ARGUMENT;
  return layer_result(xpt_tracer_set_callback((xpt_tracer_t *)tracer, site == XPT_CL_EPILOGUE,
                                              (uint32_t)function, (xpt_tracer_fn_t)callback));
}

XPT_CL_API xpt_cl_result_t xpt_cl_tracer_reset_callbacks(xpt_cl_tracer_handle_t tracer) {
  return layer_result(xpt_tracer_reset((xpt_tracer_t *)tracer));
}

XPT_CL_API xpt_cl_result_t xpt_cl_tracer_set_enabled(xpt_cl_tracer_handle_t tracer, bool enabled) {
  return layer_result(xpt_tracer_set_enabled((xpt_tracer_t *)tracer, enabled));
}

XPT_CL_API const char *xpt_cl_function_name(xpt_cl_function_id_t function) {
  return (unsigned)function < XPT_CL_FN_COUNT ? layer_function_names[function] : NULL;
}
