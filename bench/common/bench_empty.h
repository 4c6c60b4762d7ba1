/* Empty functions living in libxpti_bench_empty.so (see bench_empty.c). */
#ifndef BENCH_EMPTY_H
#define BENCH_EMPTY_H
#include <stdint.h>

#include "xpti/xpti_data_types.h"

void xpti_bench_empty(void);
void xpti_bench_empty_callback(uint16_t trace_type, xpti_trace_event_data_t *parent,
                               xpti_trace_event_data_t *event, uint64_t instance,
                               const void *user_data);
#endif
