/* Per-call cost of function tracing: a tight loop calling one small
 * non-inlined function N times; prints ns per iteration of the loop,
 * timed inside the program (start-up and the writing of traces are not
 * counted).  Built once per way in (see CMakeLists.txt); run_functions.sh
 * runs every build bare, under xptrace and under uftrace, in one run.
 * Timed in thread CPU time: the machines here are shared. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* Long enough (a 3-byte and a 6-byte instruction first, no RIP-relative
 * one) that both xptrace and uftrace can patch its entry unmodified. */
__attribute__((noinline)) int small(int x) {
  int y = x * 3 + 1;
  __asm__ volatile("imul $7, %0, %0\n\tadd $0x12345, %0" : "+r"(y));
  return y;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: other load on the machine does not count */
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  volatile int acc = 0;
  double t0 = now_ns();
  if (argc > 2 && !strcmp(argv[2], "rdtsc")) {
    /* The floor of any tracer that stamps entry and exit: two rdtsc. */
#if defined(__x86_64__)
    volatile unsigned long long stamp;
    for (long i = 0; i < n; ++i) {
      stamp = __rdtsc();
      acc += small((int)i);
      stamp = __rdtsc();
    }
    (void)stamp;
#endif
  } else {
    for (long i = 0; i < n; ++i)
      acc += small((int)i);
  }
  double t1 = now_ns();
  printf("%.3f\n", (t1 - t0) / (double)n);
  return acc == 12345 ? 1 : 0;
}
