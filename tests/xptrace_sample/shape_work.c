/* Programs of known shape for the sampling accuracy tests
 * (test_shapes.py, bench/sampler): each thread measures its own CPU time
 * with the kernel's clocks and the program prints them, so a test
 * compares the profile with what really ran, whatever the load.
 *
 * usage: shape_work MODE [N] [MS]
 *   short N MS  one thread in long_work for N*MS ms of CPU, and N threads
 *               one after the other, each in st -> short_work for MS ms
 *   worker N MS the same, both kinds of thread started on one routine,
 *               worker (a thread pool's shape): long_work vs short_work
 *   read MS     compute_work spins MS ms of CPU in one thread while
 *               another spends MS ms of CPU in read_work: read() of
 *               /dev/zero, 64 KiB at a time (kernel time)
 *   loop S      for S seconds of wall time, calls spin_40, spin_30, spin_20
 *               and spin_10 for 4, 3, 2 and 1 ms of CPU in turn: in any
 *               window of many rounds, 40/30/20/10 (for attaching)
 *   phases A B  spins in phase_a for A seconds of wall time, then in
 *               phase_b for B seconds (for --periods)
 *   cphases A B the same in seconds of the process's CPU time
 *   offcpu N    thread "waiter", N cycles of 40 ms of wall time: 10 ms in
 *               wait_compute (spinning), 20 ms in sleep_part (nanosleep),
 *               10 ms in lock_part waiting for a mutex that thread
 *               "holder" holds then: 25/50/25 of its wall time; prints
 *               "wall waiter=S compute=S sleep=S lock=S" (its lifetime and
 *               what each part really took: the truth under load)
 *   offcpu N wait  the same, both threads started and named but waiting
 *               for a line on stdin, after "ready" (attaching to threads
 *               that run already, their whole work in the window);
 *               both print "tid waiter=TID holder=TID"
 *   many N      N threads named "many" started, waiting for a line on
 *               stdin after "ready", then each sleeps 5 ms in many_sleep
 *               (nanosleep) and spins 10 ms of CPU in many_spin; prints
 *               "threads N+1" (with main) and "cpu many=S"
 * Prints "cpu NAME=SECONDS ..." on stdout: the threads' CPU times (for
 * short: the long thread, all short threads together, and main). */
#include <fcntl.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spin `ms` of this thread's CPU time (user space but for the clock
 * reads, one per ~50 us). */
#define SPIN_FN(name, k)                                                  \
  __attribute__((noinline)) void name(double ms) {                        \
    double end = thread_cpu() + ms * 1e-3;                                \
    volatile uint64_t x = 1;                                              \
    while (thread_cpu() < end)                                            \
      for (int i = 0; i < 20000; ++i)                                     \
        x = x * 6364136223846793005ull + (k);                             \
  }
SPIN_FN(long_work, 1ull)
SPIN_FN(short_work, 3ull)
SPIN_FN(compute_work, 5ull)
SPIN_FN(spin_40, 7ull)
SPIN_FN(spin_30, 9ull)
SPIN_FN(spin_20, 11ull)
SPIN_FN(spin_10, 13ull)
SPIN_FN(phase_a, 15ull)
SPIN_FN(phase_b, 17ull)

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double process_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The same, in seconds of the process's CPU time: windows of CPU time
 * fall in the same phase however loaded the machine is. */
static int run_cpu_phases(double a, double b) {
  while (process_cpu() < a)
    phase_a(1);
  while (process_cpu() < a + b)
    phase_b(1);
  return 0;
}

static int run_phases(double a, double b) {
  double t0 = wall_now();
  while (wall_now() < t0 + a)
    phase_a(1);
  while (wall_now() < t0 + a + b)
    phase_b(1);
  return 0;
}

static int run_loop(double seconds) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  printf("ready\n");
  fflush(stdout);
  do {
    spin_40(4);
    spin_30(3);
    spin_20(2);
    spin_10(1);
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
  return 0;
}

static double ms = 1, long_cpu, short_cpu, read_cpu;
static int nshort = 500;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *long_thread(void *arg) {
  (void)arg;
  long_work(ms * nshort);
  long_cpu = thread_cpu();
  return NULL;
}

/* Only calls short_work: a sample of st itself is a wrong attribution. */
__attribute__((noinline)) static void *st(void *arg) {
  (void)arg;
  short_work(ms);
  double c = thread_cpu();
  pthread_mutex_lock(&lock);
  short_cpu += c;
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* One routine for both kinds: arg NULL runs the long work. */
__attribute__((noinline)) static void *worker(void *arg) {
  return arg ? st(arg) : long_thread(arg);
}

static int run_short(bool one_routine) {
  pthread_t l;
  if (pthread_create(&l, NULL, one_routine ? worker : long_thread, NULL) != 0)
    return 1;
  for (int i = 0; i < nshort; ++i) {
    pthread_t s;
    if (pthread_create(&s, NULL, one_routine ? worker : st, &nshort) != 0)
      return 1;
    pthread_join(s, NULL);
  }
  pthread_join(l, NULL);
  printf("cpu long=%.6f short=%.6f main=%.6f\n", long_cpu, short_cpu, thread_cpu());
  return 0;
}

__attribute__((noinline)) void read_work(double msec) {
  int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  static char buf[64 * 1024];
  double end = thread_cpu() + msec * 1e-3;
  while (fd >= 0 && thread_cpu() < end)
    for (int i = 0; i < 8; ++i)
      if (read(fd, buf, sizeof buf) < 0)
        break;
  if (fd >= 0)
    close(fd);
}

static void *reader(void *arg) {
  (void)arg;
  read_work(ms);
  read_cpu = thread_cpu();
  return NULL;
}

static void *computer(void *arg) {
  (void)arg;
  compute_work(ms);
  long_cpu = thread_cpu();
  return NULL;
}

static int run_read(void) {
  pthread_t a, b;
  if (pthread_create(&a, NULL, computer, NULL) != 0 || pthread_create(&b, NULL, reader, NULL) != 0)
    return 1;
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("cpu compute=%.6f read=%.6f main=%.6f\n", long_cpu, read_cpu, thread_cpu());
  return 0;
}

/* offcpu: cycles on a shared clock, both threads sleeping to absolute
 * times, so the shares hold whatever the load delays. */
static double t_start;
static int ncycles = 25;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static long waiter_tid, holder_tid;

static void sleep_until(double t) {
  struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
    ;
}

__attribute__((noinline)) void wait_compute(double until) {
  volatile uint64_t x = 1;
  while (wall_now() < until)
    for (int i = 0; i < 2000; ++i)
      x = x * 6364136223846793005ull + 19;
}

__attribute__((noinline)) void sleep_part(double until) {
  double left = until - wall_now();
  if (left > 0) { /* nanosleep itself: the relative sleep a program would write */
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

__attribute__((noinline)) void lock_part(void) {
  pthread_mutex_lock(&held);
  pthread_mutex_unlock(&held);
}

/* Attaching: the threads wait here, named, until the line comes. */
static pthread_mutex_t go_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go_cond = PTHREAD_COND_INITIALIZER;
static bool go = true;

static void wait_go(void) {
  pthread_mutex_lock(&go_lock);
  while (!go)
    pthread_cond_wait(&go_cond, &go_lock);
  pthread_mutex_unlock(&go_lock);
}

static void *waiter(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "waiter");
  waiter_tid = syscall(SYS_gettid);
  wait_go();
  /* What each part really took: on a loaded machine a preempted thread
   * leaves wait_compute late and sleeps less. */
  double t0 = wall_now(), part[3] = {0, 0, 0};
  for (int k = 0; k < ncycles; ++k) {
    double c = t_start + 0.040 * k, t1 = wall_now();
    wait_compute(c + 0.010);
    double t2 = wall_now();
    sleep_part(c + 0.030);
    double t3 = wall_now();
    lock_part(); /* the holder has it until c + 0.040 */
    double t4 = wall_now();
    part[0] += t2 - t1, part[1] += t3 - t2, part[2] += t4 - t3;
  }
  printf("wall waiter=%.6f compute=%.6f sleep=%.6f lock=%.6f\n", wall_now() - t0, part[0], part[1], part[2]);
  return NULL;
}

static void *holder(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "holder");
  holder_tid = syscall(SYS_gettid);
  wait_go();
  for (int k = 0; k < ncycles; ++k) {
    double c = t_start + 0.040 * k;
    sleep_until(c + 0.015); /* while the waiter sleeps: it finds the mutex taken */
    pthread_mutex_lock(&held);
    sleep_until(c + 0.040);
    pthread_mutex_unlock(&held);
  }
  return NULL;
}

/* "ready", then the waiting threads go when a line comes on stdin (the
 * test attaches in between); false at end of input. */
static bool release_on_go(bool restart_clock) {
  char line[16];
  printf("ready\n");
  fflush(stdout);
  if (!fgets(line, sizeof line, stdin))
    return false;
  pthread_mutex_lock(&go_lock);
  if (restart_clock)
    t_start = wall_now() + 0.005;
  go = true;
  pthread_cond_broadcast(&go_cond);
  pthread_mutex_unlock(&go_lock);
  return true;
}

static int run_offcpu(bool wait) {
  pthread_t w, h;
  go = !wait;
  t_start = wall_now() + 0.005;
  pthread_create(&h, NULL, holder, NULL);
  pthread_create(&w, NULL, waiter, NULL);
  if (wait && !release_on_go(true))
    return 2;
  pthread_join(w, NULL);
  pthread_join(h, NULL);
  printf("tid waiter=%ld holder=%ld\n", waiter_tid, holder_tid);
  return 0;
}

/* many: threads that each block once and compute a little (attaching
 * with too few file descriptors for all of them). */
static double many_cpu;

__attribute__((noinline)) void many_sleep(void) {
  struct timespec ts = {0, 5000000};
  nanosleep(&ts, NULL);
}

__attribute__((noinline)) void many_spin(void) {
  volatile uint64_t x = 1;
  double t0 = thread_cpu();
  while (thread_cpu() - t0 < 0.010)
    for (int i = 0; i < 2000; ++i)
      x = x * 6364136223846793005ull + 19;
}

static void *many_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "many");
  wait_go();
  many_sleep();
  many_spin();
  double c = thread_cpu();
  pthread_mutex_lock(&lock);
  many_cpu += c;
  pthread_mutex_unlock(&lock);
  return NULL;
}

static int run_many(int n) {
  pthread_t *t = calloc((size_t)n, sizeof *t);
  if (!t)
    return 2;
  go = false;
  for (int i = 0; i < n; ++i)
    if (pthread_create(&t[i], NULL, many_thread, NULL) != 0)
      return 2;
  if (!release_on_go(false))
    return 2;
  for (int i = 0; i < n; ++i)
    pthread_join(t[i], NULL);
  free(t);
  printf("threads %d\ncpu many=%.6f\n", n + 1, many_cpu);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "short") == 0 || strcmp(mode, "worker") == 0) {
    nshort = argc > 2 ? atoi(argv[2]) : 500;
    ms = argc > 3 ? atof(argv[3]) : 1;
    return nshort > 0 && ms > 0 ? run_short(mode[0] == 'w') : 2;
  }
  if (strcmp(mode, "read") == 0) {
    ms = argc > 2 ? atof(argv[2]) : 500;
    return ms > 0 ? run_read() : 2;
  }
  if (strcmp(mode, "phases") == 0 && argc > 3)
    return run_phases(atof(argv[2]), atof(argv[3]));
  if (strcmp(mode, "cphases") == 0 && argc > 3)
    return run_cpu_phases(atof(argv[2]), atof(argv[3]));
  if (strcmp(mode, "loop") == 0)
    return run_loop(argc > 2 ? atof(argv[2]) : 10);
  if (strcmp(mode, "offcpu") == 0) {
    ncycles = argc > 2 ? atoi(argv[2]) : 25;
    return ncycles > 0 ? run_offcpu(argc > 3 && strcmp(argv[3], "wait") == 0) : 2;
  }
  if (strcmp(mode, "many") == 0 && argc > 2 && atoi(argv[2]) > 0)
    return run_many(atoi(argv[2]));
  fprintf(stderr, "usage: shape_work short N MS | read MS | loop S\n");
  return 2;
}
