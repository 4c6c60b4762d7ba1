/* Programs of known shape for the sampler benchmark (bench/sampler).
 * Built -O2 -g without frame pointers, like distribution code.
 *
 * usage: sampler_shapes MODE [N]
 *   split     four threads at once in spin_40, spin_30, spin_20, spin_10
 *             (CPU work 4:3:2:1, N units in all)
 *   short N   one long thread (long_spin) next to N short threads run one
 *             after another (short_spin): equal CPU in both
 *   blocked   two threads, equal work: one blocks every signal
 *             (blocked_spin), the other does not (free_spin)
 *   deep N    recursion N frames deep, working at the bottom (main_spin)
 *   spin N    one thread, N units in main_spin (overhead)
 *   none      returns at once (fixed cost) */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;
enum { UNIT = 20 * 1000 * 1000 }; /* about 25 ms of CPU */

/* Distinct constants: identical functions would be folded into one. */
#define SPIN(name, k)                                                     \
  __attribute__((noinline)) void name(long iterations) {                 \
    uint64_t x = sink;                                                   \
    for (long i = 0; i < iterations; ++i) {                              \
      x = x * 6364136223846793005ull + (k);                              \
      __asm__ volatile("" : "+r"(x));                                    \
    }                                                                    \
    sink = x;                                                            \
  }
SPIN(spin_40, 1ull)
SPIN(spin_30, 3ull)
SPIN(spin_20, 5ull)
SPIN(spin_10, 7ull)
SPIN(long_spin, 9ull)
SPIN(short_spin, 11ull)
SPIN(blocked_spin, 13ull)
SPIN(free_spin, 15ull)
SPIN(main_spin, 17ull)

typedef struct job {
  void (*fn)(long);
  long iterations;
  int block;
} job_t;

static void *worker(void *arg) {
  job_t *j = arg;
  if (j->block) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
  }
  j->fn(j->iterations);
  return NULL;
}

static int run_jobs(job_t *jobs, int n) {
  pthread_t t[8];
  for (int i = 0; i < n; ++i)
    if (pthread_create(&t[i], NULL, worker, &jobs[i]) != 0)
      return 1;
  for (int i = 0; i < n; ++i)
    pthread_join(t[i], NULL);
  return 0;
}

__attribute__((noinline)) int recurse(int n, long work) {
  if (n <= 1) {
    main_spin(work);
    return 0;
  }
  int r = recurse(n - 1, work); /* not a tail call: every frame stays */
  __asm__ volatile("" : "+r"(r));
  return r + 1;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  long n = argc > 2 ? atol(argv[2]) : 0;
  if (strcmp(mode, "split") == 0) {
    long u = (n > 0 ? n : 100) * (long)UNIT / 10;
    job_t j[4] = {{spin_40, 4 * u, 0}, {spin_30, 3 * u, 0}, {spin_20, 2 * u, 0}, {spin_10, u, 0}};
    return run_jobs(j, 4);
  }
  if (strcmp(mode, "short") == 0) {
    long each = UNIT / 10;
    job_t lj = {long_spin, (n > 0 ? n : 500) * each, 0};
    pthread_t lt;
    if (pthread_create(&lt, NULL, worker, &lj) != 0)
      return 1;
    for (long i = 0; i < (n > 0 ? n : 500); ++i) {
      job_t sj = {short_spin, each, 0};
      pthread_t t;
      if (pthread_create(&t, NULL, worker, &sj) != 0)
        return 1;
      pthread_join(t, NULL);
    }
    pthread_join(lt, NULL);
    return 0;
  }
  if (strcmp(mode, "blocked") == 0) {
    long u = (n > 0 ? n : 40) * (long)UNIT;
    job_t j[2] = {{blocked_spin, u, 1}, {free_spin, u, 0}};
    return run_jobs(j, 2);
  }
  if (strcmp(mode, "deep") == 0)
    return recurse(n > 0 ? (int)n : 200, 40L * UNIT) < 0;
  if (strcmp(mode, "spin") == 0) {
    main_spin((n > 0 ? n : 40) * (long)UNIT);
    return 0;
  }
  if (strcmp(mode, "none") == 0)
    return 0;
  fprintf(stderr, "usage: sampler_shapes split|short N|blocked|deep N|spin N|none\n");
  return 2;
}
