/* pt_handoff [fifo]: 10,000 tasks begun on one thread and ended on
 * another (a task handed on), then 100 "after" slices on the first
 * thread.  Default: all begun, then ended in reverse order; "fifo": ended
 * in order while the first thread still begins more (a queue).  The
 * recorder tracks a thread's open slices: the handed-on ones must not
 * fill that for good (after 4,096 every later begin of the thread was
 * dropped).  tests/perfetto/CMakeLists.txt wants all 100 "after" slices
 * and all 10,000 task begins in the trace. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

#define TASKS 10000
static uint8_t stream;
static xpti_trace_event_data_t *task, *after;
static uint64_t begun; /* fifo: tasks begun so far */

static void *begin_then_after(void *arg) {
  (void)arg;
  for (uint64_t i = 1; i <= TASKS; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, task, i, NULL);
    __atomic_store_n(&begun, i, __ATOMIC_RELEASE);
  }
  for (int i = 0; i < 100; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, after, 0, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, after, 0, NULL);
  }
  return NULL;
}

static void *end_in_order(void *arg) {
  (void)arg;
  for (uint64_t i = 1; i <= TASKS; i++) {
    while (__atomic_load_n(&begun, __ATOMIC_ACQUIRE) < i)
      sched_yield();
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, task, i, NULL);
  }
  return NULL;
}

static void *end_them(void *arg) {
  (void)arg;
  for (uint64_t i = TASKS; i >= 1; i--)
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, task, i, NULL);
  return NULL;
}

int main(int argc, char **argv) {
  bool fifo = argc > 1 && strcmp(argv[1], "fifo") == 0;
  xptiInitialize("handoff.test", 1, 0, "1.0");
  stream = xptiRegisterStream("handoff.test");
  xpti_payload_t pt = xpti_payload_make("task", "pt_handoff.c", 1, 0, NULL);
  xpti_payload_t pa = xpti_payload_make("after", "pt_handoff.c", 2, 0, NULL);
  task = xptiMakeEvent("task", &pt, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  after = xptiMakeEvent("after", &pa, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  if (!task || !after)
    return 1;
  pthread_t a, b;
  pthread_create(&a, NULL, begin_then_after, NULL);
  if (fifo)
    pthread_create(&b, NULL, end_in_order, NULL);
  pthread_join(a, NULL);
  if (!fifo)
    pthread_create(&b, NULL, end_them, NULL);
  pthread_join(b, NULL);
  puts("pt_handoff: done");
  return 0;
}
