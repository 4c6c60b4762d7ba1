/* Cost of one recorded begin/end notification in the perfetto collector,
 * next to the floors of PERF.md measured in the same run, and the bytes
 * the trace spends per slice.
 *   trace_record [pairs per repetition] [repetitions]
 * The collector is loaded from ../lib next to this program. */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_empty.h"
#include "bench_floors.h"
#include "xpti/xpti_trace_framework.h"

static double time_pairs(uint8_t stream, xpti_trace_event_data_t *ev, long pairs,
                         const char *name) {
  uint64_t t0 = bench_now_ns();
  for (long i = 0; i < pairs; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, (uint64_t)i, name);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, (uint64_t)i, name);
  }
  return (double)(bench_now_ns() - t0) / (2.0 * (double)pairs);
}

/* Bursts of 1024 pairs with 1 ms pauses: only the bursts are timed (the
 * pauses let the kernel write back the recording's pages). */
static double time_bursts(uint8_t stream, xpti_trace_event_data_t *ev, long bursts) {
  uint64_t total = 0;
  for (long b = 0; b < bursts; b++) {
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < 1024; i++) {
      xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, (uint64_t)i, NULL);
      xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, (uint64_t)i, NULL);
    }
    total += bench_now_ns() - t0;
    struct timespec pause_for = {0, 1000000};
    nanosleep(&pause_for, NULL);
  }
  return (double)total / (2.0 * 1024.0 * (double)bursts);
}

static double time_named(uint8_t stream, long pairs) {
  uint64_t t0 = bench_now_ns();
  for (long i = 0; i < pairs; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, (uint64_t)i, "fn");
    xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_END, NULL, NULL, (uint64_t)i, "fn");
  }
  return (double)(bench_now_ns() - t0) / (2.0 * (double)pairs);
}

/* The collector takes every type of a stream through one stream-wide
 * callback: this empty one gives the dispatch cost of that path. */
static __attribute__((noinline)) void empty_stream_callback(uint8_t stream, uint16_t type,
                                                            xpti_trace_event_data_t *parent,
                                                            xpti_trace_event_data_t *event,
                                                            uint64_t instance,
                                                            const void *user_data) {
  (void)stream, (void)type, (void)parent, (void)event, (void)instance, (void)user_data;
  __asm__ volatile("");
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Size of the trace a forked child writes after n slices (named: NULL
 * event and a name), -1 when it wrote none. */
static long child_trace_size(const char *out, uint8_t stream, xpti_trace_event_data_t *ev,
                             long n, int named) {
  (void)stream, (void)ev;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) { /* a program of its own, not a fork: its sequence ids are short */
    char count[32];
    snprintf(count, sizeof count, "%ld", n);
    execl("/proc/self/exe", "trace_record", "--size-child", count, named ? "named" : "event",
          (char *)NULL);
    _exit(127);
  }
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid)
    return -1;
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/size-%d/trace.perfetto-trace", out, (int)pid);
  return file_size(path);
}

/* trace_record --size-child N named|event: records N slices into
 * $XPTRACE_OUTPUT/size-<pid>/ and exits (the trace is written at exit). */
static int size_child(long n, bool named) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/size-%d", getenv("XPTRACE_OUTPUT"), (int)getpid());
  setenv("XPTRACE_OUTPUT", dir, 1);
  xptiInitialize("bench.trace", 1, 0, "1.0");
  uint8_t stream = xptiRegisterStream("bench.trace");
  xpti_payload_t p = xpti_payload_make("bench_task", "trace_record.c", __LINE__, 1, NULL);
  xpti_trace_event_data_t *ev =
      xptiMakeEvent("bench_task", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  if (named)
    time_named(stream, n);
  else
    time_pairs(stream, ev, n, NULL);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--size-child") && getenv("XPTRACE_OUTPUT"))
    return size_child(atol(argv[2]), !strcmp(argv[3], "named"));
  long pairs = argc > 1 ? atol(argv[1]) : 200000;
  int reps = argc > 2 ? atoi(argv[2]) : 7;
  if (pairs <= 0 || reps <= 0 || reps > 64) {
    fprintf(stderr, "usage: trace_record [pairs > 0] [repetitions 1..64]\n");
    return 2;
  }
  char exe[PATH_MAX], lib[PATH_MAX + 64], out[] = "/tmp/xptrace-bench-XXXXXX";
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return 1;
  exe[n] = '\0';
  *strrchr(exe, '/') = '\0';
  snprintf(lib, sizeof lib, "%s/../lib/libxpti_perfetto.so", exe);
  if (!mkdtemp(out))
    return 1;
  /* The dispatcher reads its environment when it loads: set it, run again. */
  if (!getenv("XPTI_SUBSCRIBERS")) {
    setenv("XPTI_TRACE_ENABLE", "1", 1);
    setenv("XPTI_SUBSCRIBERS", lib, 1);
    setenv("XPTRACE_OUTPUT", out, 0);
    setenv("XPTRACE_BUFFER_SIZE", "1G", 0);
    execv("/proc/self/exe", argv);
    perror("trace_record: execv");
    return 1;
  }
  rmdir(out);
  snprintf(out, sizeof out, "%s", getenv("XPTRACE_OUTPUT") ? getenv("XPTRACE_OUTPUT") : ".");

  bench_floors_t floors;
  bench_floors_measure(&floors, 7);
  bench_floors_print(stdout, &floors);

  if (xptiInitialize("bench.trace", 1, 0, "1.0") != XPTI_RESULT_SUCCESS) {
    fprintf(stderr, "trace_record: collector not loaded (%s)\n", lib);
    return 1;
  }
  uint8_t stream = xptiRegisterStream("bench.trace");
  uint8_t empty_stream = xptiRegisterStream("bench.empty");
  xptiRegisterCallback(empty_stream, XPTI_TRACE_TASK_BEGIN, xpti_bench_empty_callback);
  xptiRegisterCallback(empty_stream, XPTI_TRACE_TASK_END, xpti_bench_empty_callback);
  uint8_t every_stream = xptiRegisterStream("bench.empty_every");
  xptiRegisterStreamCallback(every_stream, empty_stream_callback);
  xpti_payload_t p = xpti_payload_make("bench_task", "trace_record.c", __LINE__, 1, NULL);
  xpti_trace_event_data_t *ev =
      xptiMakeEvent("bench_task", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);

  double rec[64], named[64], empty[64], every[64], burst[64], every_burst[64];
  for (int r = 0; r < reps; r++) {
    empty[r] = time_pairs(empty_stream, ev, pairs, NULL);
    every[r] = time_pairs(every_stream, ev, pairs, NULL);
    rec[r] = time_pairs(stream, ev, pairs, NULL);
    named[r] = time_named(stream, pairs);
    every_burst[r] = time_bursts(every_stream, ev, 100);
    burst[r] = time_bursts(stream, ev, 100);
  }
  double m_burst = bench_median(burst, (size_t)reps);
  double m_every_burst = bench_median(every_burst, (size_t)reps);
  double m_rec = bench_median(rec, (size_t)reps), m_named = bench_median(named, (size_t)reps);
  double m_empty = bench_median(empty, (size_t)reps);
  double m_every = bench_median(every, (size_t)reps);
  double tls = floors.ns[BENCH_FLOOR_TLS_RECORD];
  double tls_clock = tls - floors.ns[BENCH_FLOOR_RDTSC] + floors.ns[BENCH_FLOOR_CLOCK];
  printf("\nperfetto collector, per notification (median of %d x %ld begin/end pairs):\n", reps,
         pairs);
  printf("  empty callback (dispatch only)        %7.2f ns\n", m_empty);
  printf("  empty stream-wide callback            %7.2f ns\n", m_every);
  printf("  recorded event, with event            %7.2f ns  %.2fx TLS floor  %.2fx TLS floor with clock_gettime\n",
         m_rec, m_rec / tls, m_rec / tls_clock);
  printf("  recorded event, NULL event + name     %7.2f ns  %.2fx TLS floor\n", m_named,
         m_named / tls);
  printf("  recorder alone (minus stream dispatch) %6.2f ns  %.2fx TLS floor  %.2fx TLS floor with clock_gettime\n",
         m_rec - m_every, (m_rec - m_every) / tls, (m_rec - m_every) / tls_clock);

  printf("in bursts of 2048 records with 1 ms pauses:\n");
  printf("  empty stream-wide callback            %7.2f ns\n", m_every_burst);
  printf("  recorded event, with event            %7.2f ns  %.2fx TLS floor\n", m_burst,
         m_burst / tls);
  printf("  recorder alone (minus stream dispatch) %6.2f ns  %.2fx TLS floor\n",
         m_burst - m_every_burst, (m_burst - m_every_burst) / tls);

  /* Bytes per slice: forked children record n slices each and write
   * their own trace at exit (child-<pid>/ under the output folder). */
  long slices = 100000;
  long base = child_trace_size(out, stream, ev, 0, 0);
  long named_size = child_trace_size(out, stream, ev, slices, 1);
  long event_size = child_trace_size(out, stream, ev, slices, 0);
  printf("\ntrace size per begin/end slice (interned names, %ld slices):\n", slices);
  printf("  NULL event + name (no annotations)    %7.2f bytes\n",
         (double)(named_size - base) / (double)slices);
  printf("  event (properties on its first slice)  %6.2f bytes\n",
         (double)(event_size - base) / (double)slices);
  printf("(trace in %s)\n", out);
  return 0;
}
