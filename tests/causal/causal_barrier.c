/* Causal profiling fixture: two threads meet at a barrier every round.
 * Thread A's line does 2 units of work, thread B's line 1 unit, so A's
 * line is the critical path until it is twice as fast: making it 50 %
 * faster makes each round 50 % shorter, 100 % faster still 50 % (B's
 * line is then the critical path), and B's line never helps (0 %).
 * A_PCT / B_PCT scale each line's work (compile-time, percent).
 *
 * usage: causal_barrier SECONDS   (prints "rounds N"; progress point
 * COZ_PROGRESS_NAMED("round") per round) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <xptrace/causal.h>

#include "causal_work.h"

#ifndef A_PCT
#define A_PCT 100
#endif
#ifndef B_PCT
#define B_PCT 100
#endif
#define UNIT 600000L
#define A_WORK (2 * UNIT * A_PCT / 100)
#define B_WORK (UNIT * B_PCT / 100)

static pthread_barrier_t barrier;
static double end_time;
static int done;
static long rounds;

CAUSAL_WORK_FN(work_a, A_WORK) /* LINE_A */

CAUSAL_WORK_FN(work_b, B_WORK) /* LINE_B */

static void *thread_a(void *arg) {
  double x = *(double *)arg;
  for (;;) {
    x = work_a(x);
    if (fixture_now() >= end_time)
      __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
    pthread_barrier_wait(&barrier);
    ++rounds;
    COZ_PROGRESS_NAMED("round"); /* Coz's spelling: counted by Coz too */
    if (__atomic_load_n(&done, __ATOMIC_RELAXED))
      break;
    pthread_barrier_wait(&barrier); /* B has read `done` too */
  }
  *(double *)arg = x;
  return NULL;
}

static void *thread_b(void *arg) {
  double x = *(double *)arg;
  for (;;) {
    x = work_b(x);
    pthread_barrier_wait(&barrier);
    if (__atomic_load_n(&done, __ATOMIC_RELAXED))
      break;
    pthread_barrier_wait(&barrier);
  }
  *(double *)arg = x;
  return NULL;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2, t0 = fixture_now();
  end_time = t0 + seconds;
  pthread_barrier_init(&barrier, NULL, 2);
  double xa = 1.0, xb = 1.0;
  pthread_t a, b;
  pthread_create(&a, NULL, thread_a, &xa);
  pthread_create(&b, NULL, thread_b, &xb);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("rounds %ld\n%.6f s per round\n", rounds, (fixture_now() - t0) / (double)(rounds ? rounds : 1));
  volatile double sink = xa + xb;
  (void)sink;
  return 0;
}
