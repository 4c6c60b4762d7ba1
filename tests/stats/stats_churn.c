/* Fixtures for issue 8 rows 11 and 7 under the statistics collector.
 *
 *   stats_churn churn N   N short-lived threads, at most 4 alive at once,
 *                         each one task begin/end of event "churn"; prints
 *                         "maxrss_kb <peak RSS>" and "vmhwm_kb <peak RSS>".
 *   stats_churn rows N    the same threads, each also a timed slice of
 *                         exactly (i+1) us, a function pair named by user
 *                         data "fn<i%3>", and (i%100==0) a begin left open.
 *   stats_churn signal    a SIGALRM handler (every 200 us) notifies a
 *                         signal instant "tick" while main loops begin/end
 *                         pairs and malloc/free for 0.5 s; prints
 *                         "handler_calls <n>".
 *   stats_churn names N   one thread, function pairs named by user data
 *                         "name<i>" for N names in one reused buffer, two
 *                         passes: N rows of count 2 (names are found by
 *                         content, and many names cost no scan of all). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

#include <xpti/xpti_trace_framework.h>
#include <xptrace/xptrace_protocol.h>

enum { ALIVE = 4 };

static uint8_t stream;
static xpti_trace_event_data_t *churn_ev, *loop_ev, *tick_ev;
static atomic_ulong handler_calls;
static bool rows_mode;
static uint16_t timed_type;
static xpti_trace_event_data_t *slice_ev, *open_ev;

static xpti_trace_event_data_t *make_event(const char *name, int line) {
  xpti_payload_t p = xpti_payload_make(name, "stats_churn.c", (uint32_t)line, 0, NULL);
  return xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
}

static void *churn_thread(void *arg) {
  uint64_t i = (uint64_t)(uintptr_t)arg;
  xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, churn_ev, i, NULL);
  xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, churn_ev, i, NULL);
  if (!rows_mode)
    return NULL;
  xptrace_timed_slice_t slice = {1000000, 1000000 + (i + 1) * 1000, 1, NULL, NULL};
  xptiNotifySubscribers(stream, timed_type, NULL, slice_ev, i, &slice);
  char name[16]; /* gone when the thread is: the collector keeps a copy */
  snprintf(name, sizeof name, "fn%d", (int)(i % 3));
  xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, i, name);
  xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_END, NULL, NULL, i, name);
  if (i % 100 == 0)
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, open_ev, i, NULL);
  return NULL;
}

static int churn(long n) {
  churn_ev = make_event("churn", __LINE__);
  slice_ev = make_event("slice", __LINE__);
  open_ev = make_event("open", __LINE__);
  timed_type = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
  pthread_t t[ALIVE];
  for (long done = 0; done < n;) {
    int k = 0;
    for (; k < ALIVE && done + k < n; ++k)
      if (pthread_create(&t[k], NULL, churn_thread, (void *)(uintptr_t)(done + k)) != 0) {
        perror("pthread_create");
        return 1;
      }
    for (int j = 0; j < k; ++j)
      pthread_join(t[j], NULL);
    done += k;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("maxrss_kb %ld\n", ru.ru_maxrss);
  /* ru_maxrss keeps the peak of the image before exec (the launcher's):
   * VmHWM is this program's own. */
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0)
      printf("vmhwm_kb %ld\n", atol(line + 6));
  if (f)
    fclose(f);
  return 0;
}

static void on_alarm(int sig) {
  (void)sig;
  atomic_fetch_add(&handler_calls, 1);
  xptiNotifySubscribers(stream, XPTI_TRACE_SIGNAL, NULL, tick_ev, 0, NULL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int signal_reentry(void) {
  loop_ev = make_event("loop", __LINE__);
  tick_ev = make_event("tick", __LINE__);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval every = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &every, NULL);
  unsigned long pairs = 0;
  for (double end = now_s() + 0.5; now_s() < end; ++pairs) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, loop_ev, pairs, NULL);
    void *volatile p = malloc(64 + pairs % 512);
    free(p);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, loop_ev, pairs, NULL);
  }
  setitimer(ITIMER_REAL, &off, NULL);
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGALRM);
  sigprocmask(SIG_BLOCK, &block, NULL); /* one may still be pending */
  printf("handler_calls %lu\npairs %lu\n", atomic_load(&handler_calls), pairs);
  return 0;
}

static int many_names(long n) {
  char name[32];
  for (int pass = 0; pass < 2; ++pass)
    for (long i = 0; i < n; ++i) {
      snprintf(name, sizeof name, "name%ld", i);
      xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, (uint64_t)i, name);
      xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_END, NULL, NULL, (uint64_t)i, name);
    }
  return 0;
}

int main(int argc, char **argv) {
  xptiInitialize("churn", 1, 0, "1.0");
  stream = xptiRegisterStream("churn");
  if (argc == 3 && strcmp(argv[1], "churn") == 0)
    return churn(atol(argv[2]));
  if (argc == 3 && strcmp(argv[1], "rows") == 0) {
    rows_mode = true;
    return churn(atol(argv[2]));
  }
  if (argc == 2 && strcmp(argv[1], "signal") == 0)
    return signal_reentry();
  if (argc == 3 && strcmp(argv[1], "names") == 0)
    return many_names(atol(argv[2]));
  fprintf(stderr, "usage: stats_churn churn N | rows N | signal | names N\n");
  return 2;
}
