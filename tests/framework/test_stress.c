/* Threads notify, create trace points and register/unregister callbacks
 * at once; counts must be exact. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

#define THREADS 8
#define ITER 20000

static _Atomic uint64_t hits_stable, hits_toggle, hits_nested;
static uint8_t g_stream;
static pthread_barrier_t start;

static void stable_cb(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e,
                      uint64_t i, const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  atomic_fetch_add_explicit(&hits_stable, 1, memory_order_relaxed);
}
static void toggle_cb(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e,
                      uint64_t i, const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  atomic_fetch_add_explicit(&hits_toggle, 1, memory_order_relaxed);
}
static void nested_target(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e,
                          uint64_t i, const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  atomic_fetch_add_explicit(&hits_nested, 1, memory_order_relaxed);
}
/* registers a callback from inside a callback: must not deadlock */
static void registering_cb(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e,
                           uint64_t i, const void *u) {
  (void)t, (void)p, (void)i, (void)u;
  xpti_result_t r = xptiRegisterCallback(g_stream, XPTI_TRACE_SIGNAL, nested_target);
  if (r != XPTI_RESULT_SUCCESS && r != XPTI_RESULT_DUPLICATE)
    atomic_fetch_add(&hits_nested, 1000000);
  xptiNotifySubscribers(g_stream, XPTI_TRACE_SIGNAL, NULL, e, 0, NULL);
}

static xpti_trace_event_data_t *shared_event;
static _Atomic uint64_t instance_sum;

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  char name[32];
  pthread_barrier_wait(&start);
  for (int i = 0; i < ITER; i++) {
    xptiNotifySubscribers(g_stream, XPTI_TRACE_TASK_BEGIN, NULL, shared_event, (uint64_t)i, NULL);
    /* shared trace point: instance numbers are unique across threads */
    xpti_payload_t p = xpti_payload_make("shared", "stress.c", 1, 1, NULL);
    uint64_t inst;
    xpti_trace_event_data_t *e = xptiMakeEvent("shared", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst);
    if (e != shared_event)
      atomic_fetch_add(&instance_sum, 1ull << 60);
    atomic_fetch_add(&instance_sum, inst);
    /* private trace points created concurrently */
    if (i % 16 == 0) {
      snprintf(name, sizeof name, "t%d-%d", id, i);
      xpti_payload_t q = xpti_payload_make(name, "stress.c", 2, 2, NULL);
      xpti_trace_event_data_t *mine = xptiMakeEvent(name, &q, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
      if (!mine || xptiFindEvent(mine->unique_id) != mine ||
          strcmp(xptiQueryPayload(mine)->name, name))
        atomic_fetch_add(&instance_sum, 1ull << 61);
    }
  }
  return NULL;
}

static void *toggler(void *arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  for (int i = 0; i < 2000; i++) {
    xptiRegisterCallback(g_stream, XPTI_TRACE_TASK_BEGIN, toggle_cb);
    xptiUnregisterCallback(g_stream, XPTI_TRACE_TASK_BEGIN, toggle_cb);
  }
  return NULL;
}

int main(void) {
  xptiForceSetTraceEnabled(true);
  g_stream = xptiRegisterStream("stress");
  CHECK_EQ(xptiRegisterCallback(g_stream, XPTI_TRACE_TASK_BEGIN, stable_cb), XPTI_RESULT_SUCCESS);
  xpti_payload_t p = xpti_payload_make("shared", "stress.c", 1, 1, NULL);
  shared_event = xptiMakeEvent("shared", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  pthread_barrier_init(&start, NULL, THREADS + 1);
  pthread_t th[THREADS + 1];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
  pthread_create(&th[THREADS], NULL, toggler, NULL);
  for (int i = 0; i <= THREADS; i++)
    pthread_join(th[i], NULL);
  CHECK_EQ(atomic_load(&hits_stable), (uint64_t)THREADS * ITER);
  CHECK(atomic_load(&hits_toggle) <= (uint64_t)THREADS * ITER);
  /* instances 2 .. THREADS*ITER+1 each handed out exactly once */
  uint64_t n = (uint64_t)THREADS * ITER;
  CHECK_EQ(atomic_load(&instance_sum), (n + 1) * (n + 2) / 2 - 1);

  /* callbacks registering and notifying from inside callbacks */
  CHECK_EQ(xptiRegisterCallback(g_stream, XPTI_TRACE_TASK_END, registering_cb), XPTI_RESULT_SUCCESS);
  for (int i = 0; i < 10; i++)
    xptiNotifySubscribers(g_stream, XPTI_TRACE_TASK_END, NULL, shared_event, 0, NULL);
  CHECK_EQ(atomic_load(&hits_nested), 10);
  return CHECK_DONE();
}
