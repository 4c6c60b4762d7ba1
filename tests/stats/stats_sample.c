/* An instrumented program with known counts and sleeps, for the
 * statistics collector and `xptrace run` tests (check_stats.py holds the
 * expected numbers).  Usage: stats_sample [exit-status | "segv" | "term"]. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xpti/xpti_trace_framework.h>
#include <xptrace/xptrace_protocol.h>

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

static xpti_trace_event_data_t *make_event(const char *name, int line) {
  xpti_payload_t p = xpti_payload_make(name, "stats_sample.c", (uint32_t)line, 0, NULL);
  return xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
}

static uint8_t stream;

static void *worker(void *arg) {
  xpti_trace_event_data_t *ev = arg;
  for (int i = 0; i < 1000; ++i) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, (uint64_t)i, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, (uint64_t)i, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  xptiInitialize("sample", 1, 0, "1.0");
  xptiInitialize("sample.other", 1, 0, "1.0");
  xptiInitialize("sample", 1, 0, "1.0"); /* again: nothing may count twice */
  stream = xptiRegisterStream("sample");
  uint8_t other = xptiRegisterStream("sample.other");

  xpti_trace_event_data_t *outer = make_event("outer", __LINE__);
  xpti_trace_event_data_t *inner = make_event("inner", __LINE__);
  xpti_trace_event_data_t *nap = make_event("nap", __LINE__);
  xpti_trace_event_data_t *work = make_event("worker", __LINE__);
  xpti_trace_event_data_t *ping = make_event("ping", __LINE__);
  xpti_trace_event_data_t *node = make_event("node", __LINE__);
  xpti_trace_event_data_t *edge = make_event("edge", __LINE__);
  xpti_trace_event_data_t *stray = make_event("stray", __LINE__);
  xpti_trace_event_data_t *elsewhere = make_event("elsewhere", __LINE__);

  /* outer (>= 30 ms) holds 3 x inner (10 ms each): self time is small. */
  xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, outer, 1, NULL);
  for (int i = 0; i < 3; ++i) {
    xptiNotifySubscribers(stream, XPTI_TRACE_REGION_BEGIN, outer, inner, (uint64_t)i, NULL);
    sleep_ms(10);
    xptiNotifySubscribers(stream, XPTI_TRACE_REGION_END, outer, inner, (uint64_t)i, NULL);
  }
  xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, outer, 1, NULL);

  /* 10 x nap of 5 ms. */
  for (int i = 0; i < 10; ++i) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, nap, (uint64_t)i, NULL);
    sleep_ms(5);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, nap, (uint64_t)i, NULL);
  }

  /* A function without an event: its name comes as user data. */
  for (int i = 0; i < 4; ++i) {
    char name[16];
    strcpy(name, "cfunc"); /* a buffer that is reused */
    xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, 0, name);
    sleep_ms(1);
    xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_END, NULL, NULL, 0, name);
  }

  /* Single points: 7 signals, 3 nodes, 2 edges; one end with no begin. */
  for (int i = 0; i < 7; ++i)
    xptiNotifySubscribers(stream, XPTI_TRACE_SIGNAL, NULL, ping, (uint64_t)i, NULL);
  for (int i = 0; i < 3; ++i)
    xptiNotifySubscribers(stream, XPTI_TRACE_NODE_CREATE, NULL, node, (uint64_t)i, NULL);
  for (int i = 0; i < 2; ++i)
    xptiNotifySubscribers(stream, XPTI_TRACE_EDGE_CREATE, NULL, edge, (uint64_t)i, NULL);
  xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, stray, 1, NULL);

  /* A tool registered after xptiInitialize (after 20 others that never
   * notify): 6 pairs of its type 3.  A type that is neither predefined
   * nor a tool's: 2 instants. */
  char filler[16];
  for (int i = 0; i < 20; ++i) {
    snprintf(filler, sizeof filler, "filler%d", i);
    xptiRegisterUserDefinedTracePoint(filler, XPTI_TRACE_POINT_BEGIN(1));
  }
  uint16_t late_begin = xptiRegisterUserDefinedTracePoint("late", XPTI_TRACE_POINT_BEGIN(3));
  uint16_t late_end = xptiRegisterUserDefinedTracePoint("late", XPTI_TRACE_POINT_END(3));
  xpti_trace_event_data_t *late = make_event("latework", __LINE__);
  for (int i = 0; i < 6; ++i) {
    xptiNotifySubscribers(stream, late_begin, NULL, late, (uint64_t)i, NULL);
    xptiNotifySubscribers(stream, late_end, NULL, late, (uint64_t)i, NULL);
  }
  for (int i = 0; i < 2; ++i)
    xptiNotifySubscribers(stream, XPTI_TRACE_POINT_BEGIN(15), NULL, ping, (uint64_t)i, NULL);

  /* Work reported afterwards (xptrace timed slices): 3 spans of exactly
   * 1, 2 and 3 ms, whatever the host clock did meanwhile. */
  uint16_t timed = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
  xpti_trace_event_data_t *device = make_event("devwork", __LINE__);
  for (uint64_t i = 1; i <= 3; ++i) {
    xptrace_timed_slice_t slice = {1000000000u, 1000000000u + i * 1000000u, 1, "queue 1", NULL};
    xptiNotifySubscribers(stream, timed, NULL, device, i, &slice);
  }

  /* Two threads x 1000 empty worker tasks. */
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i)
    pthread_create(&threads[i], NULL, worker, work);
  for (int i = 0; i < 2; ++i)
    pthread_join(threads[i], NULL);

  /* Another stream: 5 x 2 ms (left out by XPTRACE_STREAMS=sample). */
  for (int i = 0; i < 5; ++i) {
    xptiNotifySubscribers(other, XPTI_TRACE_TASK_BEGIN, NULL, elsewhere, (uint64_t)i, NULL);
    sleep_ms(2);
    xptiNotifySubscribers(other, XPTI_TRACE_TASK_END, NULL, elsewhere, (uint64_t)i, NULL);
  }

  if (argc > 1 && (strcmp(argv[1], "segv") == 0 || strcmp(argv[1], "term") == 0)) {
    fflush(NULL);
    raise(argv[1][0] == 's' ? SIGSEGV : SIGTERM);
  }
  return argc > 1 ? atoi(argv[1]) : 0;
}
