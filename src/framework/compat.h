/* Between the C dispatcher and its C++ unit (compat.cpp): plain C types
 * only, so both languages read it. */
#ifndef XPTIFW_COMPAT_H
#define XPTIFW_COMPAT_H

#include <stdint.h>

#include "xpti/xpti_trace_framework.h"

#ifndef XPTIFW_HIDDEN
#define XPTIFW_HIDDEN __attribute__((visibility("hidden")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Implemented in compat.cpp; never throw.  NULL / false: no memory. */
XPTIFW_HIDDEN void *compat_map_new(void);
XPTIFW_HIDDEN bool compat_map_insert(void *map, uint32_t key, int32_t value);
XPTIFW_HIDDEN void *compat_objects_new(xpti_trace_event_data_t *event);

/* Implemented in C (registry.c). */
XPTIFW_HIDDEN void *tracepoint_cxx_objects(const xpti_trace_event_data_t *event);

#ifdef __cplusplus
}
#endif
#endif
