/* xptrace — OpenCL API tracing (C11, usable from C++).
 *
 * The tracing layer libxptrace_opencl.so (loaded by ocl-icd through
 * OPENCL_LAYERS) exports these functions.  A tool links the layer, or
 * dlopens it by the same path given in OPENCL_LAYERS, creates a tracer,
 * registers prologue/epilogue callbacks and enables it:
 *
 *   xpt_cl_tracer_handle_t h;
 *   xpt_cl_tracer_desc_t desc = {XPT_CL_TRACER_DESC_VERSION, &my_data};
 *   xpt_cl_tracer_create(&desc, &h);
 *   xpt_cl_tracer_register_clSetKernelArg(h, XPT_CL_EPILOGUE, on_set_arg);
 *   xpt_cl_tracer_set_enabled(h, true);
 *
 * Guarantees: a call that ran a tracer's prologue runs its epilogue; one
 * that did not never does, whatever other threads enable or disable
 * meanwhile.  Epilogues run in reverse order of prologues.  OpenCL calls
 * made from inside a callback are not traced.  Destroy waits for the
 * tracer's callbacks in flight; from inside one of them it returns
 * XPT_CL_ERROR_IN_CALLBACK.  Up to XPT_CL_MAX_TRACERS tracers. */
#ifndef XPTRACE_CL_TRACING_H
#define XPTRACE_CL_TRACING_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl_icd.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XPT_CL_API __attribute__((visibility("default")))
#define XPT_CL_MAX_TRACERS 32

typedef enum xpt_cl_result_t {
  XPT_CL_SUCCESS = 0,
  XPT_CL_ERROR_INVALID_ARGUMENT = -1,
  XPT_CL_ERROR_TRACER_ENABLED = -2, /* callbacks change only while disabled */
  XPT_CL_ERROR_OUT_OF_RESOURCES = -3,
  XPT_CL_ERROR_IN_CALLBACK = -4     /* destroy from the tracer's own callback */
} xpt_cl_result_t;

typedef enum xpt_cl_callback_site_t { XPT_CL_PROLOGUE = 0, XPT_CL_EPILOGUE = 1 } xpt_cl_callback_site_t;

/* ---- generated from cl_api.def ---------------------------------------- */
#define XPT_CL_ARGS_0(F, S)
#define XPT_CL_ARGS_1(F, S, a) F a
#define XPT_CL_ARGS_2(F, S, a, ...) F a S() XPT_CL_ARGS_1(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_3(F, S, a, ...) F a S() XPT_CL_ARGS_2(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_4(F, S, a, ...) F a S() XPT_CL_ARGS_3(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_5(F, S, a, ...) F a S() XPT_CL_ARGS_4(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_6(F, S, a, ...) F a S() XPT_CL_ARGS_5(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_7(F, S, a, ...) F a S() XPT_CL_ARGS_6(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_8(F, S, a, ...) F a S() XPT_CL_ARGS_7(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_9(F, S, a, ...) F a S() XPT_CL_ARGS_8(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_10(F, S, a, ...) F a S() XPT_CL_ARGS_9(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_11(F, S, a, ...) F a S() XPT_CL_ARGS_10(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_12(F, S, a, ...) F a S() XPT_CL_ARGS_11(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_13(F, S, a, ...) F a S() XPT_CL_ARGS_12(F, S, __VA_ARGS__)
#define XPT_CL_ARGS_14(F, S, a, ...) F a S() XPT_CL_ARGS_13(F, S, __VA_ARGS__)
/* Apply F to each (type, name) pair, S() between them. */
#define XPT_CL_ARGS(n, F, S, ...) XPT_CL_ARGS_##n(F, S, ##__VA_ARGS__)
#define XPT_CL_COMMA() ,
#define XPT_CL_SEMI() ;
#define XPT_CL_PTR_MEMBER(type, name) type *p_##name
/* A member for the params struct of a function without arguments. */
#define XPT_CL_PLACEHOLDER_0 char no_arguments_;
#define XPT_CL_PLACEHOLDER_1
#define XPT_CL_PLACEHOLDER_2
#define XPT_CL_PLACEHOLDER_3
#define XPT_CL_PLACEHOLDER_4
#define XPT_CL_PLACEHOLDER_5
#define XPT_CL_PLACEHOLDER_6
#define XPT_CL_PLACEHOLDER_7
#define XPT_CL_PLACEHOLDER_8
#define XPT_CL_PLACEHOLDER_9
#define XPT_CL_PLACEHOLDER_10
#define XPT_CL_PLACEHOLDER_11
#define XPT_CL_PLACEHOLDER_12
#define XPT_CL_PLACEHOLDER_13
#define XPT_CL_PLACEHOLDER_14
#define XPT_CL_DECL(type, name) type name
#define XPT_CL_NAME(type, name) name
#define XPT_CL_ADDR(type, name) &name

/* Function-pointer argument types. */
#define XPT_CL_CALLBACK_TYPE(tname, ret, params) typedef ret(CL_CALLBACK *tname) params;
#include "cl_api.def"
#undef XPT_CL_CALLBACK_TYPE

/* Function ids: XPT_CL_FN_<name>. */
#define XPT_CL_FN(ret, name, n, ...) XPT_CL_FN_##name,
#define XPT_CL_FN_VOID(name, n, ...) XPT_CL_FN_##name,
#define XPT_CL_OPAQUE(name)
typedef enum xpt_cl_function_id_t {
#include "cl_api.def"
  XPT_CL_FN_COUNT
} xpt_cl_function_id_t;
#undef XPT_CL_FN
#undef XPT_CL_FN_VOID

/* Params structs: a pointer to every argument (p_<argument name>); a
 * prologue may change the arguments through them.  The no-argument
 * functions get a placeholder member. */
#define XPT_CL_FN(ret, name, n, ...)                                                         \
  typedef struct xpt_cl_##name##_params_t {                                                 \
    XPT_CL_ARGS(n, XPT_CL_PTR_MEMBER, XPT_CL_SEMI, ##__VA_ARGS__);                           \
    XPT_CL_PLACEHOLDER_##n                                                                  \
  } xpt_cl_##name##_params_t;                                                               \
  typedef void (*xpt_cl_##name##_cb_t)(xpt_cl_##name##_params_t * params, ret * result,     \
                                       void *user_data, void **instance_user_data,          \
                                       uint64_t correlation_id);
#define XPT_CL_FN_VOID(name, n, ...)                                                         \
  typedef struct xpt_cl_##name##_params_t {                                                 \
    XPT_CL_ARGS(n, XPT_CL_PTR_MEMBER, XPT_CL_SEMI, ##__VA_ARGS__);                           \
    XPT_CL_PLACEHOLDER_##n                                                                  \
  } xpt_cl_##name##_params_t;                                                               \
  typedef void (*xpt_cl_##name##_cb_t)(xpt_cl_##name##_params_t * params, void *result,     \
                                       void *user_data, void **instance_user_data,          \
                                       uint64_t correlation_id);
#include "cl_api.def"
#undef XPT_CL_FN
#undef XPT_CL_FN_VOID

/* A callback of any function: params points to that function's params
 * struct, result to its return value (NULL in prologues and for void
 * functions); the epilogue may change it. */
typedef void (*xpt_cl_callback_t)(void *params, void *result, void *user_data,
                                  void **instance_user_data, uint64_t correlation_id);

/* One member per function, in id order (NULL: no callback). */
#define XPT_CL_FN(ret, name, n, ...) xpt_cl_##name##_cb_t name;
#define XPT_CL_FN_VOID(name, n, ...) xpt_cl_##name##_cb_t name;
typedef struct xpt_cl_callbacks_t {
#include "cl_api.def"
} xpt_cl_callbacks_t;
#undef XPT_CL_FN
#undef XPT_CL_FN_VOID
#undef XPT_CL_OPAQUE

/* ---- tracers -------------------------------------------------------- */
#define XPT_CL_TRACER_DESC_VERSION 1
typedef struct xpt_cl_tracer_desc_t {
  uint32_t version;  /* XPT_CL_TRACER_DESC_VERSION */
  void *user_data;   /* passed to every callback of this tracer */
} xpt_cl_tracer_desc_t;

typedef struct xpt_cl_tracer *xpt_cl_tracer_handle_t;

/* A new tracer, disabled, with no callbacks. */
XPT_CL_API xpt_cl_result_t xpt_cl_tracer_create(const xpt_cl_tracer_desc_t *desc,
                                                xpt_cl_tracer_handle_t *tracer);
/* Wait for the tracer's callbacks in flight, then free it. */
XPT_CL_API xpt_cl_result_t xpt_cl_tracer_destroy(xpt_cl_tracer_handle_t tracer);
/* Set every prologue / epilogue from a table (tracer disabled). */
XPT_CL_API xpt_cl_result_t xpt_cl_tracer_set_prologues(xpt_cl_tracer_handle_t tracer,
                                                       const xpt_cl_callbacks_t *callbacks);
XPT_CL_API xpt_cl_result_t xpt_cl_tracer_set_epilogues(xpt_cl_tracer_handle_t tracer,
                                                       const xpt_cl_callbacks_t *callbacks);
/* One callback of one function (tracer disabled); NULL removes it. */
XPT_CL_API xpt_cl_result_t xpt_cl_tracer_register_callback(xpt_cl_tracer_handle_t tracer,
                                                           xpt_cl_callback_site_t site,
                                                           xpt_cl_function_id_t function,
                                                           xpt_cl_callback_t callback);
/* Every prologue and epilogue back to NULL (tracer disabled). */
XPT_CL_API xpt_cl_result_t xpt_cl_tracer_reset_callbacks(xpt_cl_tracer_handle_t tracer);
/* Enable or disable; always succeeds on a valid handle. */
XPT_CL_API xpt_cl_result_t xpt_cl_tracer_set_enabled(xpt_cl_tracer_handle_t tracer, bool enabled);
/* Name of a function id ("clSetKernelArg"), NULL when out of range. */
XPT_CL_API const char *xpt_cl_function_name(xpt_cl_function_id_t function);

/* Typed registration, one per function:
 * xpt_cl_tracer_register_<name>(tracer, site, xpt_cl_<name>_cb_t). */
#define XPT_CL_FN(ret, name, n, ...)                                                         \
  static inline xpt_cl_result_t xpt_cl_tracer_register_##name(                              \
      xpt_cl_tracer_handle_t tracer, xpt_cl_callback_site_t site, xpt_cl_##name##_cb_t cb) { \
    return xpt_cl_tracer_register_callback(tracer, site, XPT_CL_FN_##name,                  \
                                           (xpt_cl_callback_t)(void (*)(void))cb);          \
  }
#define XPT_CL_FN_VOID(name, n, ...) XPT_CL_FN(void, name, n, __VA_ARGS__)
#define XPT_CL_OPAQUE(name)
#include "cl_api.def"
#undef XPT_CL_FN
#undef XPT_CL_FN_VOID
#undef XPT_CL_OPAQUE

/* ---- XPTI streams ---------------------------------------------------
 * "opencl.api": function_with_args_begin / _end around every call, event
 * NULL, instance = correlation id, user data = xpt_cl_api_call_t, laid out
 * as XPTI's xpti_function_with_args_t (function_id, function_name,
 * args_data, ret_data, then the correlation id in place of user_data), so
 * any collector names the call with xpti_user_data_name(). */
typedef struct xpt_cl_api_call_t {
  uint32_t function_id;      /* xpt_cl_function_id_t */
  const char *function_name;
  void *args;                /* the function's params struct */
  void *return_value;        /* NULL in begin and for void functions */
  uint64_t correlation_id;
} xpt_cl_api_call_t;

/* "opencl.graph": task_begin / task_end of a command, sent when it has
 * completed, user data = xpt_cl_task_t (device times, CLOCK_MONOTONIC_RAW
 * on PoCL; 0 when profiling information was unavailable). */
typedef struct xpt_cl_task_t {
  uint64_t queued_ns, submit_ns, start_ns, end_ns;
  cl_command_queue queue;
  uint64_t queue_id;         /* 1, 2, ... in order of creation */
  cl_command_type command_type;
  const char *name;          /* kernel or command name */
  cl_int status;             /* CL_COMPLETE or an error */
  uint64_t instance;         /* node instance of this command */
  uint64_t bytes;            /* bytes moved, 0 for kernels */
} xpt_cl_task_t;

#ifdef __cplusplus
}
#endif
#endif /* XPTRACE_CL_TRACING_H */
