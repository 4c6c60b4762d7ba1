/* Fixture of known shape for `xptrace sample` (perf method).  Built -O2
 * without frame pointers: callers are known only by DWARF unwinding.
 *
 * usage: perf_work MODE [ARG]
 *   closefds      closes stdout and stderr, then works (main_spin)
 *   exit          works, then _exit(3)
 *   plugin PATH [FN]  dlopen PATH, 3 units in its FN (plugin_spin),
 *                 dlclose, then 1 unit in main_spin (plugin 75 %); prints
 *                 "closed" (flushed) after the dlclose, then each spin's
 *                 CPU seconds
 *   deep N        recursion N frames deep, working at the bottom
 *   forkexec      forks a child that execs "perf_work child" (child_spin,
 *                 2 units) while the parent works (main_spin, 1 unit)
 *   child         child_spin, 2 units
 *   short N [K]   one long thread (long_spin) and N short threads
 *                 (short_spin) of K steps (1 ms here) each, equal work
 *                 in all; prints each side's CPU seconds
 *   sigint        its own SIGINT handler, checked after the work
 *   syscalls N    N x 400,000 reads of 16 KiB from /dev/zero: CPU time
 *                 mostly in the kernel
 *   thread-syscalls N   the same in a second thread */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
enum { UNIT = 20 * 1000 * 1000 };

#define SPIN(name, k)                                                     \
  __attribute__((noinline)) void name(long iterations) {                 \
    uint64_t x = sink;                                                   \
    for (long i = 0; i < iterations; ++i) {                              \
      x = x * 6364136223846793005ull + (k);                              \
      __asm__ volatile("" : "+r"(x));                                    \
    }                                                                    \
    sink = x;                                                            \
  }
/* Distinct constants: identical functions would be folded into one. */
SPIN(main_spin, 1442695040888963407ull)
SPIN(child_spin, 1442695040888963409ull)
SPIN(long_spin, 1442695040888963411ull)
SPIN(short_spin, 1442695040888963413ull)

__attribute__((noinline)) int recurse(int n) {
  if (n <= 1) {
    main_spin(2L * UNIT);
    return 0;
  }
  int r = recurse(n - 1); /* not a tail call: every frame stays */
  __asm__ volatile("" : "+r"(r));
  return r + 1;
}

/* Each spin's own CPU time: equal work is not equal CPU time on a busy
 * machine (a shared core runs slower), and the samples follow the time. */
static double short_cpu, long_cpu; /* the short threads run one at a time */

static double spin_cpu(void (*spin)(long), long iterations) {
  struct timespec a, b;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  spin(iterations);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

static void *short_worker(void *arg) {
  short_cpu += spin_cpu(short_spin, (long)(intptr_t)arg);
  return NULL;
}

static void *long_worker(void *arg) {
  long_cpu = spin_cpu(long_spin, (long)(intptr_t)arg);
  return NULL;
}

/* One long thread and n short ones in turn, each k steps of work: the
 * same CPU in both. */
static int run_short(int n, long k) {
  pthread_t lt;
  enum { SHORT = UNIT / 20 };
  if (pthread_create(&lt, NULL, long_worker, (void *)(intptr_t)((long)n * k * SHORT)) != 0)
    return 1;
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, short_worker, (void *)(intptr_t)(k * SHORT)) != 0)
      return 1;
    pthread_join(t, NULL);
  }
  pthread_join(lt, NULL);
  printf("cpu long_spin %.6f short_spin %.6f\n", long_cpu, short_cpu);
  return 0;
}

static void on_int(int sig) { (void)sig; }

/* Time in the kernel, by far most of it: reads of 16 KiB from /dev/zero
 * (the kernel clears each buffer; getppid's loop was half user space on
 * some kernels, and the test's threshold sat on that boundary). */
static void kernel_work(long n) {
  static char buf[16384];
  int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  for (long i = 0; fd >= 0 && i < n * 400000; ++i)
    if (read(fd, buf, sizeof buf) < 0)
      break;
  if (fd >= 0)
    close(fd);
}

static void *syscalls_worker(void *arg) {
  kernel_work((long)(intptr_t)arg);
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "closefds") == 0) {
    close(1);
    close(2);
    main_spin(4L * UNIT);
    return 0;
  }
  if (strcmp(mode, "syscalls") == 0 && argc > 2) {
    kernel_work(atol(argv[2]));
    return 0;
  }
  if (strcmp(mode, "thread-syscalls") == 0 && argc > 2) {
    pthread_t t;
    if (pthread_create(&t, NULL, syscalls_worker, (void *)(intptr_t)atol(argv[2])) != 0)
      return 1;
    pthread_join(t, NULL);
    return 0;
  }
  if (strcmp(mode, "exit") == 0) {
    main_spin(4L * UNIT);
    _exit(3);
  }
  if (strcmp(mode, "plugin") == 0 && argc > 2) {
    void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    void (*fn)(long) = h ? (void (*)(long))dlsym(h, argc > 3 ? argv[3] : "plugin_spin") : NULL;
    if (!fn) {
      fprintf(stderr, "perf_work: %s\n", dlerror());
      return 1;
    }
    double plugin_cpu = spin_cpu(fn, 6);
    dlclose(h);
    /* A test may now replace the file (build ids). */
    printf("closed\n");
    fflush(stdout);
    double main_cpu = spin_cpu(main_spin, 2L * UNIT);
    printf("cpu plugin_spin %.6f main_spin %.6f\n", plugin_cpu, main_cpu);
    return 0;
  }
  if (strcmp(mode, "deep") == 0 && argc > 2)
    return recurse(atoi(argv[2])) < 0;
  if (strcmp(mode, "forkexec") == 0) {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
      return 1;
    self[len] = '\0';
    pid_t pid = fork();
    if (pid == 0) {
      execl(self, "perf_work", "child", (char *)NULL);
      _exit(127);
    }
    double main_cpu = spin_cpu(main_spin, 2L * UNIT);
    int status = 0;
    waitpid(pid, &status, 0);
    printf("cpu main_spin %.6f\n", main_cpu);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  if (strcmp(mode, "child") == 0) {
    printf("cpu child_spin %.6f\n", spin_cpu(child_spin, 4L * UNIT));
    return 0;
  }
  if (strcmp(mode, "short") == 0 && argc > 2)
    return run_short(atoi(argv[2]), argc > 3 ? atol(argv[3]) : 1);
  if (strcmp(mode, "sigint") == 0) {
    struct sigaction sa, cur;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_int;
    sigaction(SIGINT, &sa, NULL);
    main_spin(1L * UNIT);
    if (sigaction(SIGINT, NULL, &cur) != 0 || cur.sa_handler != on_int)
      return 1;
    printf("sigint=own\n");
    return 0;
  }
  fprintf(stderr, "usage: perf_work closefds|exit|plugin PATH [FN]|deep N|forkexec|short N [K]|sigint|syscalls N|thread-syscalls N\n");
  return 2;
}
