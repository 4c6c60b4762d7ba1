/* Internals shared by the Level Zero layer's files. */
#ifndef XPT_ZE_LAYER_H
#define XPT_ZE_LAYER_H

#include <level_zero/ze_ddi.h>
#include <level_zero/layers/zel_tracing_register_cb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Argument lists of ze_api.def entries: F applied to each (type, name),
 * S() between them. */
#define XPT_ZE_ARGS_0(F, S)
#define XPT_ZE_ARGS_1(F, S, a) F a
#define XPT_ZE_ARGS_2(F, S, a, ...) F a S() XPT_ZE_ARGS_1(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_3(F, S, a, ...) F a S() XPT_ZE_ARGS_2(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_4(F, S, a, ...) F a S() XPT_ZE_ARGS_3(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_5(F, S, a, ...) F a S() XPT_ZE_ARGS_4(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_6(F, S, a, ...) F a S() XPT_ZE_ARGS_5(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_7(F, S, a, ...) F a S() XPT_ZE_ARGS_6(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_8(F, S, a, ...) F a S() XPT_ZE_ARGS_7(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_9(F, S, a, ...) F a S() XPT_ZE_ARGS_8(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_10(F, S, a, ...) F a S() XPT_ZE_ARGS_9(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_11(F, S, a, ...) F a S() XPT_ZE_ARGS_10(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS_12(F, S, a, ...) F a S() XPT_ZE_ARGS_11(F, S, __VA_ARGS__)
#define XPT_ZE_ARGS(n, F, S, ...) XPT_ZE_ARGS_##n(F, S, ##__VA_ARGS__)
#define XPT_ZE_COMMA() ,
#define XPT_ZE_DECL(type, name) type name
#define XPT_ZE_NAME(type, name) name
#define XPT_ZE_ADDR(type, name) &name

/* Function ids: the order of ze_api.def. */
typedef enum xpt_ze_fn {
#define XPT_ZE_FN(table, member, name, params, n, ...) XPT_ZE_FN_##name,
#include "ze_api.def"
#undef XPT_ZE_FN
  XPT_ZE_FN_COUNT
} xpt_ze_fn_t;

/* The tables below us (the loader's, the validation layer's or the
 * driver's), one member per DDI table. */
typedef struct ze_layer_next {
#define XPT_ZE_TABLE(table, type, entries) type table;
#include "ze_api.def"
#undef XPT_ZE_TABLE
} ze_layer_next_t;
extern ze_layer_next_t ze_next;
extern uint8_t ze_graph_stream;

/* The functions the graph stream sees. */
static inline bool ze_graph_fn(uint32_t fn) {
  switch (fn) {
  case XPT_ZE_FN_CommandQueueCreate:
  case XPT_ZE_FN_CommandQueueExecuteCommandLists:
  case XPT_ZE_FN_CommandQueueSynchronize:
  case XPT_ZE_FN_CommandListCreate:
  case XPT_ZE_FN_CommandListCreateImmediate:
  case XPT_ZE_FN_CommandListReset:
  case XPT_ZE_FN_CommandListDestroy:
  case XPT_ZE_FN_CommandListAppendBarrier:
  case XPT_ZE_FN_CommandListAppendMemoryCopy:
  case XPT_ZE_FN_CommandListAppendMemoryFill:
  case XPT_ZE_FN_CommandListAppendLaunchKernel:
  case XPT_ZE_FN_CommandListAppendSignalEvent:
  case XPT_ZE_FN_CommandListAppendWaitOnEvents:
  case XPT_ZE_FN_CommandListAppendEventReset:
  case XPT_ZE_FN_EventCreate:
  case XPT_ZE_FN_EventDestroy:
  case XPT_ZE_FN_EventHostSynchronize:
  case XPT_ZE_FN_EventQueryStatus:
  case XPT_ZE_FN_EventHostReset:
  case XPT_ZE_FN_FenceHostSynchronize:
  case XPT_ZE_FN_ContextDestroy:
    return true;
  default:
    return false;
  }
}

/* Functions the graph sees before the call too: appends (an event of
 * ours in place of a NULL signal event), submissions (our events reset),
 * and what releases events or lists (their completions first). */
static inline bool ze_graph_before_fn(uint32_t fn) {
  switch (fn) {
  case XPT_ZE_FN_CommandListAppendBarrier:
  case XPT_ZE_FN_CommandListAppendMemoryCopy:
  case XPT_ZE_FN_CommandListAppendMemoryFill:
  case XPT_ZE_FN_CommandListAppendLaunchKernel:
  case XPT_ZE_FN_CommandQueueExecuteCommandLists:
  case XPT_ZE_FN_CommandListReset:
  case XPT_ZE_FN_CommandListDestroy:
  case XPT_ZE_FN_EventHostReset:
  case XPT_ZE_FN_EventDestroy:
  case XPT_ZE_FN_ContextDestroy:
    return true;
  default:
    return false;
  }
}

/* What ze_graph_before changed in the arguments, undone by ze_graph_after. */
typedef struct ze_graph_call {
  ze_event_handle_t internal; /* ours, in place of the program's NULL */
  ze_event_handle_t *slot;    /* the argument it went into */
  ze_context_handle_t context;
} ze_graph_call_t;

const char *ze_function_name(uint32_t fn);
void ze_graph_init(void);
void ze_graph_before(uint32_t fn, void *params, ze_graph_call_t *g);
/* After every call of a graph function (params: its params struct). */
void ze_graph_after(uint32_t fn, void *params, ze_result_t result, const void *caller,
                    ze_graph_call_t *g);

#endif
