/* xptiNotifySubscribers from signal handlers (issue 8, row 7): SIGALRM
 * and SIGPROF fire every 100 us while the main thread mallocs, frees and
 * creates trace points (taking the framework's locks).  A handler that
 * allocated or locked would deadlock on a lock the interrupted code holds:
 * the test's `timeout` turns that into a failure.  The handlers also use
 * the other functions the header calls async-signal-safe.  Every
 * notification must reach the counting callback. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

static atomic_ulong delivered, sent, lookups_bad;
static uint8_t g_stream;
static xpti_trace_event_data_t *g_event;
static uint32_t g_string_id;

static void count_cb(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e,
                     uint64_t i, const void *u) {
  (void)p, (void)i, (void)u;
  if (t == XPTI_TRACE_SIGNAL && e == g_event)
    atomic_fetch_add_explicit(&delivered, 1, memory_order_relaxed);
}

static void on_signal(int sig) {
  (void)sig;
  if (!xptiTraceEnabled() || !xptiCheckTraceEnabled(g_stream, XPTI_TRACE_SIGNAL) ||
      xptiFindEvent(g_event->unique_id) != g_event || !xptiLookupString(g_string_id) ||
      xptiQueryPayloadByUID(g_event->unique_id) == NULL)
    atomic_fetch_add_explicit(&lookups_bad, 1, memory_order_relaxed);
  if (xptiNotifySubscribers(g_stream, XPTI_TRACE_SIGNAL, NULL, g_event, 0, NULL) ==
      XPTI_RESULT_SUCCESS)
    atomic_fetch_add_explicit(&sent, 1, memory_order_relaxed);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.5;
  xptiForceSetTraceEnabled(true);
  g_stream = xptiRegisterStream("signal");
  CHECK_EQ(xptiRegisterCallback(g_stream, XPTI_TRACE_SIGNAL, count_cb), XPTI_RESULT_SUCCESS);
  xpti_payload_t p = xpti_payload_make("in-handler", "signal.c", 1, 1, NULL);
  g_event = xptiMakeEvent("in-handler", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  CHECK(g_event != NULL);
  char *string_copy;
  g_string_id = xptiRegisterString("signal-string", &string_copy);
  if (!g_event)
    return CHECK_DONE();

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval every = {{0, 100}, {0, 100}};
  CHECK_EQ(setitimer(ITIMER_REAL, &every, NULL), 0);
  CHECK_EQ(setitimer(ITIMER_PROF, &every, NULL), 0);

  /* the interrupted side: the heap and the framework's locks, busy */
  void *slot[256] = {0};
  unsigned long rounds = 0;
  char name[64];
  int32_t obj = xptiRegisterObject("v", 1, 0);
  /* At least `seconds`, and on until 100 handler notifications (TSan
   * holds signals back to its own points: fewer per second), at most
   * ten times as long. */
  double start = now_s(), end = start + seconds, limit = start + 10 * seconds;
  for (double t = start; t < end || (atomic_load(&sent) < 100 && t < limit); t = now_s()) {
    for (int i = 0; i < 256; i++) {
      free(slot[i]);
      slot[i] = malloc((size_t)(16 + (rounds * 7919 + (unsigned long)i * 131) % 8192));
    }
    snprintf(name, sizeof name, "main-%lu", rounds % 20000);
    xpti_payload_t q = xpti_payload_make(name, "signal.c", (uint32_t)rounds, 2, NULL);
    xpti_trace_event_data_t *e =
        xptiMakeEvent(name, &q, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
    if (e)
      xptiAddMetadata(e, name, obj);
    char *copy;
    xptiRegisterString(name, &copy);
    rounds++;
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  setitimer(ITIMER_PROF, &off, NULL);
  for (int i = 0; i < 256; i++)
    free(slot[i]);

  unsigned long s = atomic_load(&sent), d = atomic_load(&delivered);
  printf("%lu rounds, %lu notifications from handlers, %lu delivered\n", rounds, s, d);
  CHECK(s >= 100); /* the handlers did run, many times */
  CHECK_EQ(d, s);
  CHECK_EQ(atomic_load(&lookups_bad), 0);
  return CHECK_DONE();
}
