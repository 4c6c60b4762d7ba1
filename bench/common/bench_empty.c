/* Empty functions in their own shared object: calling them measures the
 * cost of any dispatch into another library (the floor of a callback). */
#include <stdint.h>

#include "xpti/xpti_data_types.h"

#define BENCH_EMPTY_API __attribute__((visibility("default")))

BENCH_EMPTY_API void xpti_bench_empty(void);
BENCH_EMPTY_API void xpti_bench_empty_callback(uint16_t trace_type, xpti_trace_event_data_t *parent,
                                               xpti_trace_event_data_t *event, uint64_t instance,
                                               const void *user_data);

/* The asm keeps the compiler from treating the functions as pure. */
void xpti_bench_empty(void) { __asm__ volatile(""); }

void xpti_bench_empty_callback(uint16_t trace_type, xpti_trace_event_data_t *parent,
                               xpti_trace_event_data_t *event, uint64_t instance,
                               const void *user_data) {
  (void)trace_type;
  (void)parent;
  (void)event;
  (void)instance;
  (void)user_data;
  __asm__ volatile("");
}
