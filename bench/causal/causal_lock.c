/* Causal benchmark fixture: lock contention.  Two threads loop: line W
 * (work outside the lock, 0.8 units) then line L (work inside one mutex,
 * 1 unit).  The mutex is busy all the time, so only L decides the
 * throughput: L 50 % faster gives ~+30 %, W faster gives ~0.
 * W_PCT / L_PCT scale each line's work (compile-time, percent).
 *
 * usage: causal_lock SECONDS   (prints "N s per op"; COZ_PROGRESS_NAMED("op")) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <xptrace/causal.h>

#include "../../tests/causal/causal_work.h"

#ifndef W_PCT
#define W_PCT 100
#endif
#ifndef L_PCT
#define L_PCT 100
#endif
#define UNIT 300000L
#define W_WORK (8 * UNIT / 10 * W_PCT / 100)
#define L_WORK (UNIT * L_PCT / 100)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double end_time, shared_x = 1.0;
static long ops;

CAUSAL_WORK_FN(outside, W_WORK) /* LINE_W */

CAUSAL_WORK_FN(inside, L_WORK) /* LINE_L */

static void *worker(void *arg) {
  double x = 1.0;
  (void)arg;
  while (fixture_now() < end_time) {
    x = outside(x);
    pthread_mutex_lock(&lock);
    shared_x = inside(shared_x);
    ++ops;
    pthread_mutex_unlock(&lock);
    COZ_PROGRESS_NAMED("op"); /* Coz's spelling: counted by Coz too */
  }
  volatile double sink = x;
  (void)sink;
  return NULL;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2, t0 = fixture_now();
  end_time = t0 + seconds;
  pthread_t t[2];
  for (int i = 0; i < 2; ++i)
    pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < 2; ++i)
    pthread_join(t[i], NULL);
  printf("ops %ld\n%.6f s per op\n", ops, (fixture_now() - t0) / (double)(ops ? ops : 1));
  return 0;
}
