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
 * Prints "cpu NAME=SECONDS ..." on stdout: the threads' CPU times (for
 * short: the long thread, all short threads together, and main). */
#include <fcntl.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  if (strcmp(mode, "loop") == 0)
    return run_loop(argc > 2 ? atof(argv[2]) : 10);
  fprintf(stderr, "usage: shape_work short N MS | read MS | loop S\n");
  return 2;
}
