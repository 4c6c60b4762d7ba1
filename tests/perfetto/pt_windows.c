/* Slices of 40 ms, one after another for `seconds`, plus an instant
 * every 10 ms, on the main thread and one worker: under XPTRACE_PERIODS
 * windows cut through some of them (windows_check.py says what must
 * survive).  With "fork" the main thread forks 0.35 s in (inside the
 * first window), while the worker runs, and the child runs the same
 * workload from its own start: its windows start again there.  Exits 0. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xpti/xpti_trace_framework.h"

static uint8_t stream;
static double seconds = 1.5;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *work(void *arg) {
  const char *name = arg;
  xpti_payload_t p = xpti_payload_make(name, __FILE__, name[0] == 'm' ? 1 : 2, 0, NULL);
  uint64_t instance = 0;
  xpti_trace_event_data_t *slice =
      xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
  xpti_payload_t q = xpti_payload_make("tick", __FILE__, 3, 0, NULL);
  xpti_trace_event_data_t *tick =
      xptiMakeEvent("tick", &q, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
  double end = now_s() + seconds;
  uint64_t i = 0;
  while (now_s() < end) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, slice, ++i, NULL);
    for (int k = 0; k < 4; k++) {
      xptiNotifySubscribers(stream, XPTI_TRACE_SIGNAL, NULL, tick, i, NULL);
      usleep(10000);
    }
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, slice, i, NULL);
  }
  return NULL;
}

static void run_workload(void) {
  pthread_t worker;
  pthread_create(&worker, NULL, work, "worker_slice");
  work("main_slice");
  pthread_join(worker, NULL);
}

int main(int argc, char **argv) {
  if (argc > 1)
    seconds = atof(argv[1]);
  bool forking = argc > 2 && strcmp(argv[2], "fork") == 0;
  stream = xptiRegisterStream("windows.test");
  xptiInitialize("windows.test", 1, 0, "1.0");
  if (!forking) {
    run_workload();
    xptiFinalize("windows.test");
    return 0;
  }
  pthread_t worker;
  pthread_create(&worker, NULL, work, "worker_slice");
  usleep(350000);
  pid_t child = fork();
  if (child == 0) {
    /* at once: the child's first window is 0.25 s away, so this instant
     * is outside it, whatever the parent's window was at the fork */
    xpti_payload_t q = xpti_payload_make("tick", __FILE__, 3, 0, NULL);
    uint64_t instance = 0;
    xpti_trace_event_data_t *tick =
        xptiMakeEvent("tick", &q, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
    xptiNotifySubscribers(stream, XPTI_TRACE_SIGNAL, NULL, tick, 0, NULL);
    run_workload();
    xptiFinalize("windows.test");
    exit(0);
  }
  work("main_slice");
  pthread_join(worker, NULL);
  int status = -1;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return 1;
  xptiFinalize("windows.test");
  return 0;
}
