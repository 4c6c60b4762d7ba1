/* Causal profiling fixture whose answer is known by construction: each
 * round runs A and B in two threads and joins both; A is the longer, so
 * making A's line faster speeds the program up, making B's does not.
 * A_PCT / B_PCT (compile-time, percent) scale the work of each line: the
 * build with A_PCT=75 really is "line A 25 % faster".
 * usage: causal_fixture ROUNDS [xptrace|coz] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xptrace/causal.h>

#ifndef A_PCT
#define A_PCT 100
#endif
#ifndef B_PCT
#define B_PCT 100
#endif
#define A_WORK (1600000L * A_PCT / 100)
#define B_WORK (600000L * B_PCT / 100)

static volatile double sink;

__attribute__((noinline)) static void *work_a(void *arg) {
  double x = 1.0;
  for (long i = 0; i < A_WORK; ++i) x = x * 1.0000001 + 1e-9; /* LINE_A */
  sink = x;
  return arg;
}

__attribute__((noinline)) static void *work_b(void *arg) {
  double x = 2.0;
  for (long i = 0; i < B_WORK; ++i) x = x * 1.0000001 + 1e-9; /* LINE_B */
  sink = x;
  return arg;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 1000;
  int coz = argc > 2 && strcmp(argv[2], "coz") == 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long r = 0; r < rounds; ++r) {
    pthread_t a, b;
    pthread_create(&a, NULL, work_a, NULL);
    pthread_create(&b, NULL, work_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (coz)
      COZ_PROGRESS_NAMED("round");
    else
      XPTRACE_PROGRESS("round");
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%.6f s per round\n",
         ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9) / (double)rounds);
  return 0;
}
