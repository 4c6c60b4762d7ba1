/* A subscriber for the good-setup tests: on every stream it is told
 * about it counts task_begin and task_end notifications.  The counters
 * are read by the tests through dlopen(RTLD_NOLOAD) + dlsym. */
#include <stdatomic.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

static atomic_uint inits, finishes, task_begins, task_ends;
static char first_stream[128];

static void count_task(uint16_t trace_type, xpti_trace_event_data_t *parent,
                       xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  (void)parent;
  (void)event;
  (void)instance;
  (void)user_data;
  if (trace_type == XPTI_TRACE_TASK_BEGIN)
    atomic_fetch_add(&task_begins, 1);
  else if (trace_type == XPTI_TRACE_TASK_END)
    atomic_fetch_add(&task_ends, 1);
}

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  uint8_t id = xptiRegisterStream(stream);
  (void)major;
  (void)minor;
  (void)version;
  xptiRegisterCallback(id, XPTI_TRACE_TASK_BEGIN, count_task);
  xptiRegisterCallback(id, XPTI_TRACE_TASK_END, count_task);
  if (atomic_fetch_add(&inits, 1) == 0)
    strncpy(first_stream, stream, sizeof first_stream - 1);
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) {
  (void)stream;
  atomic_fetch_add(&finishes, 1);
}

/* "inits", "finishes", "task_begins", "task_ends"; ~0u if unknown. */
XPTI_CALLBACK_API unsigned test_subscriber_count(const char *what) {
  if (strcmp(what, "inits") == 0)
    return atomic_load(&inits);
  if (strcmp(what, "finishes") == 0)
    return atomic_load(&finishes);
  if (strcmp(what, "task_begins") == 0)
    return atomic_load(&task_begins);
  if (strcmp(what, "task_ends") == 0)
    return atomic_load(&task_ends);
  return ~0u;
}

XPTI_CALLBACK_API const char *test_subscriber_first_stream(void) { return first_stream; }
