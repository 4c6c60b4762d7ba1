/* CPU-bound fixture for the sampler tests.  Built with -O1 -fno-inline -g
 * so that heavy_work (3 units) and light_work (1 unit) stay separate
 * frames with a known 3:1 cost ratio.
 *
 * usage: sampler_work MODE [UNITS]
 *   threads   two threads, each heavy_work then light_work, UNITS times
 *   fork      the same in the parent, and in a forked child that exits
 *   sigprof   installs its own SIGPROF handler (sigaction) with an
 *             ITIMER_PROF timer; fails unless its handler ran
 *   signal    the same through signal()
 *   exit      a worker thread calls exit() while working
 *   term      works, then kills itself with SIGTERM
 *   blocked   two threads, equal work: one blocks every signal and spins in
 *             blocked_spin, the other spins in free_spin
 *   split     four threads spinning in spin_40, spin_30, spin_20, spin_10
 *             (CPU work 4:3:2:1)
 *   handlers  installs its own SIGINT and SIGPROF handlers, works, then
 *             checks with sigaction that they are still its own
 * Prints "cpu_seconds=<process CPU time>" on stdout at the end. */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
static long units = 4;

/* One unit: about 25 ms of CPU here; only the ratio matters. */
enum { UNIT_ITERATIONS = 20 * 1000 * 1000 };

__attribute__((noinline)) static void spin(long iterations) {
  uint64_t x = sink;
  for (long i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  sink = x;
}

__attribute__((noinline)) void heavy_work(void) {
  for (int i = 0; i < 3; ++i)
    spin(UNIT_ITERATIONS);
  __asm__ volatile("");
}

__attribute__((noinline)) void light_work(void) {
  spin(UNIT_ITERATIONS);
  __asm__ volatile("");
}

__attribute__((noinline)) static void work(void) {
  for (long i = 0; i < units; ++i) {
    heavy_work();
    light_work();
  }
  __asm__ volatile("");
}

/* Leaf loops with their own names: the function holding the sampled
 * instruction needs no unwinding to be known. */
#define LEAF_SPIN(name)                                                   \
  __attribute__((noinline)) void name(long n) {                          \
    uint64_t x = sink;                                                    \
    for (long i = 0; i < n * UNIT_ITERATIONS; ++i) {                      \
      x = x * 6364136223846793005ull + 1442695040888963407ull;            \
      __asm__ volatile("" : "+r"(x));                                     \
    }                                                                     \
    sink = x;                                                             \
  }
LEAF_SPIN(blocked_spin)
LEAF_SPIN(free_spin)
LEAF_SPIN(spin_40)
LEAF_SPIN(spin_30)
LEAF_SPIN(spin_20)
LEAF_SPIN(spin_10)

static void *blocking_worker(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  blocked_spin(4 * units);
  return NULL;
}

static void *free_worker(void *arg) {
  (void)arg;
  free_spin(4 * units);
  return NULL;
}

/* Each split thread's CPU seconds: the shares' truth on a busy machine,
 * where equal work is not equal time. */
static double split_cpu[4];

static void *split_worker(void *arg) {
  static void (*const fns[4])(long) = {spin_40, spin_30, spin_20, spin_10};
  int i = (int)(intptr_t)arg;
  fns[i]((4 - i) * units);
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  split_cpu[i] = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  return NULL;
}

static int run_workers(void *(*fn)(void *), int n, bool index_arg) {
  pthread_t t[4];
  for (int i = 0; i < n; ++i)
    if (pthread_create(&t[i], NULL, fn, index_arg ? (void *)(intptr_t)i : NULL) != 0)
      return 1;
  for (int i = 0; i < n; ++i)
    pthread_join(t[i], NULL);
  return 0;
}

static int run_threads(void);

static void on_own(int sig) {
  (void)sig;
}

/* The program's own handlers stay its own, as sigaction reports them. */
static int run_own_handlers(void) {
  const int sigs[2] = {SIGINT, SIGPROF};
  for (int i = 0; i < 2; ++i) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_own;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sigs[i], &sa, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
      fprintf(stderr, "sampler_work: signal %d had an action before ours\n", sigs[i]);
      return 1;
    }
  }
  if (run_threads() != 0)
    return 1;
  for (int i = 0; i < 2; ++i) {
    struct sigaction cur;
    if (sigaction(sigs[i], NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) || cur.sa_handler != on_own) {
      fprintf(stderr, "sampler_work: signal %d: our handler was replaced\n", sigs[i]);
      return 1;
    }
  }
  printf("handlers=own\n");
  return 0;
}

static void *worker(void *arg) {
  (void)arg;
  work();
  return NULL;
}

static void *exiting_worker(void *arg) {
  (void)arg;
  work();
  printf("cpu_seconds=0\n");
  fflush(stdout);
  exit(0);
}

static void print_cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  printf("cpu_seconds=%.3f\n", cpu);
  fflush(stdout);
}

static int run_threads(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; ++i)
    if (pthread_create(&t[i], NULL, worker, NULL) != 0)
      return 1;
  for (int i = 0; i < 2; ++i)
    pthread_join(t[i], NULL);
  return 0;
}

static volatile sig_atomic_t prof_ticks;
static void on_prof(int sig) {
  (void)sig;
  ++prof_ticks;
}

static int run_own_sigprof(bool use_signal) {
  if (use_signal) {
    if (signal(SIGPROF, on_prof) == SIG_ERR)
      return 1;
  } else {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_prof;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    struct sigaction old;
    if (sigaction(SIGPROF, &sa, &old) != 0)
      return 1;
    /* The program sees the action it had before: the default. */
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
      fprintf(stderr, "sampler_work: previous SIGPROF action is not the default\n");
      return 1;
    }
  }
  struct itimerval it = {{0, 5000}, {0, 5000}};
  setitimer(ITIMER_PROF, &it, NULL);
  if (run_threads() != 0)
    return 1;
  work();
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  if (prof_ticks == 0) {
    fprintf(stderr, "sampler_work: own SIGPROF handler never ran\n");
    return 1;
  }
  printf("prof_ticks=%d\n", (int)prof_ticks);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "threads";
  if (argc > 2)
    units = atol(argv[2]);
  if (strcmp(mode, "threads") == 0) {
    if (run_threads() != 0)
      return 1;
  } else if (strcmp(mode, "fork") == 0) {
    pid_t pid = fork();
    if (pid < 0)
      return 1;
    if (pid == 0) {
      if (run_threads() != 0)
        _exit(1);
      exit(0); /* exit(), not _exit(): the child's output is written at exit */
    }
    work();
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return 1;
  } else if (strcmp(mode, "sigprof") == 0 || strcmp(mode, "signal") == 0) {
    if (run_own_sigprof(strcmp(mode, "signal") == 0) != 0)
      return 1;
  } else if (strcmp(mode, "exit") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, exiting_worker, NULL) != 0)
      return 1;
    for (;;)
      pause();
  } else if (strcmp(mode, "blocked") == 0) {
    pthread_t t[2];
    if (pthread_create(&t[0], NULL, blocking_worker, NULL) != 0 ||
        pthread_create(&t[1], NULL, free_worker, NULL) != 0)
      return 1;
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
  } else if (strcmp(mode, "split") == 0) {
    if (run_workers(split_worker, 4, true) != 0)
      return 1;
    printf("split_cpu spin_40=%.6f spin_30=%.6f spin_20=%.6f spin_10=%.6f\n", split_cpu[0], split_cpu[1],
           split_cpu[2], split_cpu[3]);
  } else if (strcmp(mode, "handlers") == 0) {
    if (run_own_handlers() != 0)
      return 1;
  } else if (strcmp(mode, "term") == 0) {
    work();
    print_cpu();
    raise(SIGTERM);
    return 3;
  } else {
    fprintf(stderr, "sampler_work: unknown mode %s\n", mode);
    return 2;
  }
  print_cpu();
  return 0;
}
