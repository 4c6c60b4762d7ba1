/* Causal benchmark fixture: the hottest line is off the critical path.
 * The main thread's line C (1 unit per round) makes the progress; a
 * background thread runs line H (3 units per round, twice C's samples)
 * that nothing waits for.  Truth on a quiet machine with a CPU each:
 * C 50 % faster gives ~+50 %, H faster gives 0.
 * C_PCT / H_PCT scale each line's work (compile-time, percent).
 *
 * usage: causal_offpath SECONDS   (prints "N s per round"; COZ_PROGRESS_NAMED("round")) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <xptrace/causal.h>

#include "../../tests/causal/causal_work.h"

#ifndef C_PCT
#define C_PCT 100
#endif
#ifndef H_PCT
#define H_PCT 100
#endif
#define UNIT 600000L
#define C_WORK (UNIT * C_PCT / 100)
#define H_WORK (3 * UNIT * H_PCT / 100)

static int stop;

CAUSAL_WORK_FN(critical, C_WORK) /* LINE_C */

CAUSAL_WORK_FN(hot, H_WORK) /* LINE_H */

static void *background(void *arg) {
  double x = 1.0;
  (void)arg;
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
    x = hot(x);
  volatile double sink = x;
  (void)sink;
  return NULL;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2, t0 = fixture_now(), end = t0 + seconds, x = 1.0;
  long rounds = 0;
  pthread_t bg;
  pthread_create(&bg, NULL, background, NULL);
  while (fixture_now() < end) {
    x = critical(x);
    ++rounds;
    COZ_PROGRESS_NAMED("round"); /* Coz's spelling: counted by Coz too */
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  pthread_join(bg, NULL);
  printf("rounds %ld\n%.6f s per round\n", rounds, (fixture_now() - t0) / (double)(rounds ? rounds : 1));
  volatile double sink = x;
  (void)sink;
  return 0;
}
