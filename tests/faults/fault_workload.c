/* Fixture for the fault tests (issue 8): a traced program that ends, or
 * is hurt, in one known way.  Every mode records PAIRS begin/end pairs of
 * the trace point "work" (stream "fault") unless said otherwise.
 *   fault_workload MODE [N]
 *   exit | _exit | kill | abort | segv: PAIRS pairs, then that ending
 *   exec: PAIRS pairs, then exec of itself in mode exit (PAIRS more)
 *   closefds: PAIRS pairs, every descriptor from 3 closed, 8 files of its
 *     own opened and written, 20000 pairs
 *   orphan: PAIRS pairs, then a forked child records PAIRS pairs and
 *     ends 2 s after its parent
 *   fork-open: a "work" begin, then a fork inside it: the child records
 *     PAIRS pairs and the inherited slice's end, the parent waits for it
 *     and records the end
 *   sigint-term: SIGINT ignored; PAIRS pairs, SIGINT, PAIRS pairs, SIGTERM
 *   malloc-loop: pairs and malloc/free on 2 threads until killed
 *   caller-events: PAIRS pairs of "stack_event" (an event on the stack)
 *     and of "heap_event" (heap, freed and scribbled after each notify)
 *   signal-notify: an instant "tick" from a SIGALRM handler every 200 us
 *     (a timer aimed at the main thread)
 *     while the main thread mallocs and records pairs until 500 ticks were
 *     handled (20 s at most); prints
 *     the number of ticks sent
 *   signal-names: as signal-notify, but each tick is a function
 *     begin/end pair named sig0..sig4095 in turn (user data, no event):
 *     new names and rows, so the collectors' tables grow in the handler
 *   atexit: an atexit handler registered before tracing starts records
 *     PAIRS pairs "late", a destructor records PAIRS pairs "dtor"; main
 *     records 1 pair "work"
 *   threads N [M]: N threads, each M pairs (default PAIRS)
 *   churn N: N short threads, 4 alive at a time, 1 pair each; prints the
 *     peak RSS in KiB and how many distinct thread ids they had (the
 *     kernel reuses ids: pid_max is 32768 on small machines) */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xpti/xpti_trace_framework.h"

#define PAIRS 1000

static uint8_t stream;
static xpti_trace_event_data_t *work_ev;

static xpti_trace_event_data_t *make_event(const char *name, int line) {
  xpti_payload_t p = xpti_payload_make(name, "fault_workload.c", (uint32_t)line, 1, NULL);
  uint64_t instance = 0;
  return xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
}

static void pairs(xpti_trace_event_data_t *ev, int n) {
  for (int i = 0; i < n; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, (uint64_t)i, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, (uint64_t)i, NULL);
  }
}

static void start(void) {
  stream = xptiRegisterStream("fault");
  xptiInitialize("fault", 1, 0, "1.0");
  work_ev = make_event("work", __LINE__);
  if (!work_ev) {
    fprintf(stderr, "fault_workload: no event (tracing off?)\n");
    exit(3);
  }
}

/* ---- malloc-loop ---- */
static void *malloc_loop(void *arg) {
  (void)arg;
  for (unsigned i = 0;; i++) {
    /* Mostly inside malloc and free: where a signal must find it. */
    void *p[64];
    for (int k = 0; k < 64; k++)
      p[k] = malloc(16 + ((i * 7919u + (unsigned)k * 104729u) % 65536));
    pairs(work_ev, 1);
    for (int k = 0; k < 64; k++)
      free(p[k]);
  }
  return NULL;
}

/* ---- caller-events ---- */
static void caller_events(void) {
  for (int i = 0; i < PAIRS; i++) {
    xpti_payload_t p = xpti_payload_make("stack_event", "fault_workload.c", 1, 1, NULL);
    xpti_trace_event_data_t ev;
    memset(&ev, 0, sizeof ev);
    ev.unique_id = 0; /* not the framework's: no id */
    ev.reserved.payload = &p;
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, &ev, (uint64_t)i, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, &ev, (uint64_t)i, NULL);
    memset(&ev, 0x5a, sizeof ev); /* the caller's memory is the caller's */
  }
  for (int i = 0; i < PAIRS; i++) {
    xpti_payload_t *p = malloc(sizeof *p);
    xpti_trace_event_data_t *ev = calloc(1, sizeof *ev);
    char *name = strdup("heap_event");
    *p = xpti_payload_make(name, "fault_workload.c", 2, 1, NULL);
    ev->unique_id = 0xfeed0000u + 7; /* a caller's own id, the same each time */
    ev->reserved.payload = p;
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, (uint64_t)i, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, (uint64_t)i, NULL);
    memset(name, 'x', strlen(name));
    memset(p, 0x5a, sizeof *p);
    memset(ev, 0x5a, sizeof *ev);
    free(name);
    free(p);
    free(ev);
  }
}

/* ---- signal-notify ---- */
static xpti_trace_event_data_t *tick_ev;
static _Atomic int ticks;

static void on_alarm(int sig) {
  (void)sig;
  int saved = errno;
  xptiNotifySubscribers(stream, XPTI_TRACE_SIGNAL, NULL, tick_ev, 0, NULL);
  atomic_fetch_add(&ticks, 1);
  errno = saved;
}

enum { TICK_NAMES = 4096 };
static char tick_names[TICK_NAMES][8];

static void on_alarm_named(int sig) {
  (void)sig;
  int saved = errno;
  const char *name = tick_names[(unsigned)atomic_load(&ticks) % TICK_NAMES];
  xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, 0, name);
  xptiNotifySubscribers(stream, XPTI_TRACE_FUNCTION_END, NULL, NULL, 0, name);
  atomic_fetch_add(&ticks, 1);
  errno = saved;
}

static void signal_notify(int named) {
  tick_ev = make_event("tick", __LINE__);
  pairs(tick_ev, 0);
  for (int n = 0; n < TICK_NAMES; n++)
    snprintf(tick_names[n], sizeof tick_names[n], "sig%d", n);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = named ? on_alarm_named : on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  /* A timer aimed at this thread: a process-wide one may hit any thread. */
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGALRM;
  sev._sigev_un._tid = (pid_t)syscall(SYS_gettid); /* sigev_notify_thread_id */
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) {
    perror("fault_workload: timer_create");
    exit(6);
  }
  struct itimerspec every = {{0, 200000}, {0, 200000}};
  timer_settime(timer, 0, &every, NULL);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  unsigned i = 0;
  do {
    void *p[16];
    for (int k = 0; k < 16; k++)
      p[k] = malloc(32 + ((i * 31u + (unsigned)k * 977u) % 4096));
    if (i++ % 16 == 0)
      pairs(work_ev, 1);
    for (int k = 0; k < 16; k++)
      free(p[k]);
    clock_gettime(CLOCK_MONOTONIC, &now);
    /* Until 500 ticks were handled, not for a time: on a busy machine the
     * thread runs seldom and a 0.5 s loop saw under 100 (a timer's
     * signal waits pending, one at a time); 20 s at most. */
  } while (atomic_load(&ticks) < 500 &&
           (now.tv_sec - t0.tv_sec) * 1000000000L + (now.tv_nsec - t0.tv_nsec) < 20000000000L);
  timer_delete(timer);
  printf("ticks %d pairs %u\n", atomic_load(&ticks), (i + 15) / 16);
}

/* ---- atexit ---- */
static void late_handler(void) {
  xpti_trace_event_data_t *ev = make_event("late", __LINE__);
  pairs(ev, PAIRS);
}

static int dtor_wanted;
__attribute__((destructor)) static void program_destructor(void) {
  if (dtor_wanted)
    pairs(make_event("dtor", __LINE__), PAIRS);
}

/* ---- threads, churn ---- */
static void *thread_pairs(void *arg) {
  pairs(work_ev, (int)(intptr_t)arg);
  return NULL;
}

enum { TID_MAX = 1 << 22 }; /* the kernel's highest pid_max */
static _Atomic uint64_t tids_seen[TID_MAX / 64];
static _Atomic int distinct_tids;
static void *churn_thread(void *arg) {
  unsigned tid = (unsigned)syscall(SYS_gettid) % TID_MAX;
  uint64_t bit = UINT64_C(1) << (tid % 64);
  if (!(atomic_fetch_or(&tids_seen[tid / 64], bit) & bit))
    atomic_fetch_add(&distinct_tids, 1);
  return thread_pairs(arg);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "exit";
  int n = argc > 2 ? atoi(argv[2]) : 0;
  if (!strcmp(mode, "atexit"))
    atexit(late_handler); /* before tracing starts */
  start();
  if (!strcmp(mode, "exit")) {
    pairs(work_ev, PAIRS);
    exit(0);
  } else if (!strcmp(mode, "_exit")) {
    pairs(work_ev, PAIRS);
    _exit(0);
  } else if (!strcmp(mode, "kill")) {
    pairs(work_ev, PAIRS);
    kill(getpid(), SIGKILL);
  } else if (!strcmp(mode, "abort")) {
    pairs(work_ev, PAIRS);
    abort();
  } else if (!strcmp(mode, "segv")) {
    pairs(work_ev, PAIRS);
    raise(SIGSEGV);
  } else if (!strcmp(mode, "exec")) {
    pairs(work_ev, PAIRS);
    execl("/proc/self/exe", argv[0], "exit", (char *)NULL);
    return 4;
  } else if (!strcmp(mode, "closefds")) {
    /* A daemon-like program closes every descriptor, then opens files of
     * its own (which may get the recorder's numbers). */
    pairs(work_ev, PAIRS);
    for (int fd = 3; fd < 1024; fd++)
      close(fd);
    FILE *own[8];
    for (int i = 0; i < 8; i++) {
      char name[32];
      snprintf(name, sizeof name, "own-%d", i);
      own[i] = fopen(name, "w");
      if (own[i]) {
        fputs("mine\n", own[i]);
        fflush(own[i]);
      }
    }
    /* Ours are held high (src/common/xpt_fd.h): the program's files take
     * those numbers too. */
    for (int fd = 0; fd < 16; fd++)
      if (own[fd % 8])
        dup2(fileno(own[fd % 8]), (fd < 8 ? 512 : 1000 - 8) + fd);
    pairs(work_ev, 20000);
    usleep(200000); /* the recorder's copying thread runs meanwhile */
    for (int i = 0; i < 8; i++)
      if (own[i])
        fclose(own[i]);
    return 0;
  } else if (!strcmp(mode, "orphan")) {
    /* The child outlives its parent (and xptrace's wait); the parent
     * ends once the child has recorded (its recording exists). */
    pairs(work_ev, PAIRS);
    int ready[2];
    if (pipe(ready) != 0)
      return 5;
    pid_t pid = fork();
    if (pid == 0) {
      pairs(work_ev, PAIRS);
      (void)!write(ready[1], "r", 1);
      sleep(2);
      exit(0);
    }
    char c;
    return pid > 0 && read(ready[0], &c, 1) == 1 ? 0 : 5;
  } else if (!strcmp(mode, "fork-open")) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, work_ev, 7, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      pairs(work_ev, PAIRS);
      xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, work_ev, 7, NULL);
      exit(0);
    }
    int status = 1;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
      return 5;
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, work_ev, 7, NULL);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 6;
  } else if (!strcmp(mode, "sigint-term")) {
    signal(SIGINT, SIG_IGN);
    pairs(work_ev, PAIRS);
    raise(SIGINT);
    pairs(work_ev, PAIRS);
    raise(SIGTERM);
  } else if (!strcmp(mode, "malloc-loop")) {
    pthread_t t;
    pthread_create(&t, NULL, malloc_loop, NULL);
    malloc_loop(NULL);
  } else if (!strcmp(mode, "caller-events")) {
    caller_events();
    return 0;
  } else if (!strcmp(mode, "signal-notify") || !strcmp(mode, "signal-names")) {
    signal_notify(!strcmp(mode, "signal-names"));
    return 0;
  } else if (!strcmp(mode, "atexit")) {
    dtor_wanted = 1;
    pairs(work_ev, 1);
    return 0;
  } else if (!strcmp(mode, "threads")) {
    pthread_t t[256];
    n = n < 1 ? 1 : n > 256 ? 256 : n;
    intptr_t each = argc > 3 ? atoi(argv[3]) : PAIRS;
    for (int i = 0; i < n; i++)
      pthread_create(&t[i], NULL, thread_pairs, (void *)each);
    for (int i = 0; i < n; i++)
      pthread_join(t[i], NULL);
    return 0;
  } else if (!strcmp(mode, "churn")) {
    for (int i = 0; i < n; i += 4) {
      pthread_t t[4];
      int k = n - i < 4 ? n - i : 4;
      for (int j = 0; j < k; j++)
        pthread_create(&t[j], NULL, churn_thread, (void *)(intptr_t)1);
      for (int j = 0; j < k; j++)
        pthread_join(t[j], NULL);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("maxrss_kib %ld\n", ru.ru_maxrss);
    printf("distinct_tids %d\n", atomic_load(&distinct_tids));
    return 0;
  }
  fprintf(stderr, "fault_workload: unknown mode %s\n", mode);
  return 2;
}
