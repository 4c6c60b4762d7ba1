/* Causal profiling fixture whose answer is known by construction: each
 * round runs A and B in two threads and joins both; A is the longer, so
 * making A's line faster speeds the program up, making B's does not.
 * A_PCT / B_PCT (compile-time, percent) scale the work of each line: the
 * build with A_PCT=50 really is "line A 50 % faster".
 *
 * usage: causal_fixture ROUNDS|SECONDSs [xptrace|coz|latency|none]
 * Progress per round: XPTRACE_PROGRESS("round"), COZ_PROGRESS_NAMED,
 * XPTRACE_BEGIN/END("round") (latency), or none; every build also calls
 * round_done() once per round (the --progress-function point), and with
 * FIXTURE_XPTI notifies task_end on stream "causal.fixture" instead.
 * FIXTURE_PLAIN: no xptrace header at all (an unmodified program).
 * Prints "rounds N" and the time per round; exits with status 3 when
 * ROUNDS is 7 (so that tests can see the status passed through). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FIXTURE_PLAIN
#include <xptrace/causal.h>
#endif
#ifdef FIXTURE_XPTI
#include <xpti/xpti_trace_framework.h>
#endif

#ifndef A_PCT
#define A_PCT 100
#endif
#ifndef B_PCT
#define B_PCT 100
#endif
#define A_WORK (4000000L * A_PCT / 100)
#define B_WORK (1600000L * B_PCT / 100)

static volatile double sink_a, sink_b; /* one per thread: no race */
static volatile long rounds_done;

__attribute__((noinline)) static void *work_a(void *arg) {
  double x = 1.0;
  for (long i = 0; i < A_WORK; ++i) x = x * 1.0000001 + 1e-9; /* LINE_A */
  sink_a = x;
  return arg;
}

__attribute__((noinline)) static void *work_b(void *arg) {
  double x = 2.0;
  for (long i = 0; i < B_WORK; ++i) x = x * 1.0000001 + 1e-9; /* LINE_B */
  sink_b = x;
  return arg;
}

/* Called once per round; external and not inlined so that it can be
 * patched by name. */
__attribute__((noinline)) void round_done(long r) {
  rounds_done = rounds_done + 1 + (r & 0);
  __asm__ volatile("" ::: "memory");
}

static int spinning;
static void *spin(void *arg) {
  __atomic_store_n(&spinning, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(&spinning, __ATOMIC_ACQUIRE) != 2)
    ;
  return arg;
}

int main(int argc, char **argv) {
  /* "8s": as many rounds as fit in 8 seconds. */
  char *unit = NULL;
  double arg = argc > 1 ? strtod(argv[1], &unit) : 100;
  int timed = unit && *unit == 's';
  long rounds = timed ? 1000000000L : (long)arg;
  const char *mode = argc > 2 ? argv[2] : "xptrace";
  int coz = strcmp(mode, "coz") == 0, latency = strcmp(mode, "latency") == 0,
      none = strcmp(mode, "none") == 0;
#ifdef FIXTURE_XPTI
  uint8_t stream = 0;
  xpti_trace_event_data_t *ev = NULL;
  if (xptiTraceEnabled()) {
    stream = xptiRegisterStream("causal.fixture");
    xptiInitialize("causal.fixture", 1, 0, "1.0");
    xpti_payload_t p = xpti_payload_make("round", __FILE__, __LINE__, 0, NULL);
    uint64_t instance;
    ev = xptiMakeEvent("round", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
  }
#endif
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long r = 0; r < rounds; ++r) {
    if (timed) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      if ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9 >= arg)
        break;
    }
    pthread_t a, b;
#ifndef FIXTURE_PLAIN
    if (latency)
      XPTRACE_BEGIN("round");
#endif
    pthread_create(&a, NULL, work_a, NULL);
    pthread_create(&b, NULL, work_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    round_done(r);
#ifdef FIXTURE_XPTI
    if (ev && xptiCheckTraceEnabled(stream, XPTI_TRACE_TASK_END))
      xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, (uint64_t)r, NULL);
#elif !defined FIXTURE_PLAIN
    if (latency)
      XPTRACE_END("round");
    else if (coz)
      COZ_PROGRESS_NAMED("round");
    else if (!none)
      XPTRACE_PROGRESS("round");
#endif
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
#ifdef FIXTURE_XPTI
  if (xptiTraceEnabled())
    xptiFinalize("causal.fixture");
#endif
  (void)coz, (void)latency, (void)none;
  if (strcmp(mode, "fds") == 0) {
    /* What the program sees of its fd table: a profiler's fds must not
     * take the numbers its own open() gets. */
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), low = 0;
    for (int i = 0; i < 256; ++i)
      low += fcntl(i, F_GETFD) != -1;
    printf("first free fd %d, %d fds below 256\n", fd, low);
    close(fd);
    /* A child forked while another thread runs: it inherits no fd of the
     * profiler's (the other thread's event belongs to the parent). */
    pthread_t spinner;
    pthread_create(&spinner, NULL, spin, NULL);
    while (!__atomic_load_n(&spinning, __ATOMIC_ACQUIRE))
      ;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
      int perf_fds = 0;
      for (int i = 0; i < 65536; ++i) {
        char path[64], target[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", i);
        ssize_t n = fcntl(i, F_GETFD) == -1 ? -1 : readlink(path, target, sizeof target - 1);
        if (n > 0) {
          target[n] = '\0';
          perf_fds += strstr(target, "perf_event") != NULL;
        }
      }
      printf("child: %d perf event fds\n", perf_fds);
      fflush(stdout);
      _exit(0);
    }
    waitpid(child, NULL, 0);
    __atomic_store_n(&spinning, 2, __ATOMIC_RELEASE);
    pthread_join(spinner, NULL);
  }
  printf("rounds %ld\n%.6f s per round\n", (long)rounds_done,
         ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9) /
             (double)(rounds_done ? rounds_done : 1));
  return rounds == 7 ? 3 : 0;
}
