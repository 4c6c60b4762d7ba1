/* Intel's process-wide defaults for its scoped helpers (issue 12). */
#include "internal.h"

static _Atomic uint16_t g_default_event_type = XPTI_EVENT_ALGORITHM;
static _Atomic uint16_t g_default_trace_type = XPTI_TRACE_FUNCTION_BEGIN;
static _Atomic bool g_scope_notify;

/* xpti_event_type_t is an enum class over uint16_t in C++: same bits. */
XPTI_EXPORT_API xpti_event_type_t xptiGetDefaultEventType(void) {
  return (xpti_event_type_t)atomic_load_explicit(&g_default_event_type, memory_order_relaxed);
}

XPTI_EXPORT_API xpti_result_t xptiSetDefaultEventType(xpti_event_type_t event_type) {
  if ((uint16_t)event_type == XPTI_EVENT_UNKNOWN)
    return XPTI_RESULT_INVALIDARG;
  atomic_store_explicit(&g_default_event_type, (uint16_t)event_type, memory_order_relaxed);
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API xpti_trace_type_t xptiGetDefaultTraceType(void) {
  return (xpti_trace_type_t)atomic_load_explicit(&g_default_trace_type, memory_order_relaxed);
}

XPTI_EXPORT_API xpti_result_t xptiSetDefaultTraceType(xpti_trace_type_t trace_type) {
  if ((uint16_t)trace_type == XPTI_TRACE_UNKNOWN_TYPE)
    return XPTI_RESULT_INVALIDARG;
  atomic_store_explicit(&g_default_trace_type, (uint16_t)trace_type, memory_order_relaxed);
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API void xptiEnableTracepointScopeNotification(bool enable) {
  atomic_store_explicit(&g_scope_notify, enable, memory_order_relaxed);
}

XPTI_EXPORT_API bool xptiCheckTracepointScopeNotification(void) {
  return atomic_load_explicit(&g_scope_notify, memory_order_relaxed);
}

void interop_reset(void) {
  atomic_store(&g_default_event_type, XPTI_EVENT_ALGORITHM);
  atomic_store(&g_default_trace_type, XPTI_TRACE_FUNCTION_BEGIN);
  atomic_store(&g_scope_notify, false);
}
