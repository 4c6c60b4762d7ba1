/* Causal profiling fixture: a two-stage pipeline through a bounded queue
 * (mutex and condition variables).  The producer's line is 2.5 times
 * shorter than the consumer's, so the producer waits on a full queue and
 * only the consumer's line (the slow stage) decides the throughput.
 * P_PCT / C_PCT scale each stage's work (compile-time, percent).
 *
 * usage: causal_pipeline SECONDS [pipe]   (prints "items N"; progress point
 * COZ_PROGRESS_NAMED("item") per item consumed).  With "pipe" the queue
 * is a pipe of one page (512 items): the producer waits in write(), the
 * consumer in read(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include <time.h>

#include <xptrace/causal.h>

#include "causal_work.h"

#ifndef P_PCT
#define P_PCT 100
#endif
#ifndef C_PCT
#define C_PCT 100
#endif
#define P_WORK (400000L * P_PCT / 100)
#define C_WORK (1000000L * C_PCT / 100)
enum { SLOTS = 4 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static double queue[SLOTS];
static int head, count, done;
static long consumed;
static int pipe_fd[2] = {-1, -1};

CAUSAL_WORK_FN(produce, P_WORK) /* LINE_P */

CAUSAL_WORK_FN(consume, C_WORK) /* LINE_C */

static void *pipe_producer(void *arg) {
  double end = *(double *)arg, x = 1.0;
  while (fixture_now() < end) {
    x = produce(x);
    if (write(pipe_fd[1], &x, sizeof x) != sizeof x)
      break;
  }
  close(pipe_fd[1]);
  return NULL;
}

static void *pipe_consumer(void *arg) {
  double x, sum = 0;
  (void)arg;
  while (read(pipe_fd[0], &x, sizeof x) == sizeof x) {
    sum += consume(x);
    ++consumed;
    COZ_PROGRESS_NAMED("item"); /* Coz's spelling: counted by Coz too */
  }
  volatile double sink = sum;
  (void)sink;
  return NULL;
}

static void *producer(void *arg) {
  double end = *(double *)arg, x = 1.0;
  for (;;) {
    x = produce(x);
    pthread_mutex_lock(&lock);
    while (count == SLOTS && !done)
      pthread_cond_wait(&not_full, &lock);
    if (fixture_now() >= end)
      done = 1;
    if (done) {
      pthread_cond_signal(&not_empty);
      pthread_mutex_unlock(&lock);
      return NULL;
    }
    queue[(head + count++) % SLOTS] = x;
    pthread_cond_signal(&not_empty);
    pthread_mutex_unlock(&lock);
  }
}

static void *consumer(void *arg) {
  (void)arg;
  double sum = 0;
  for (;;) {
    pthread_mutex_lock(&lock);
    while (count == 0 && !done)
      pthread_cond_wait(&not_empty, &lock);
    if (count == 0) {
      pthread_mutex_unlock(&lock);
      break;
    }
    double x = queue[head];
    head = (head + 1) % SLOTS;
    --count;
    pthread_cond_signal(&not_full);
    pthread_mutex_unlock(&lock);
    sum += consume(x);
    ++consumed;
    COZ_PROGRESS_NAMED("item"); /* Coz's spelling: counted by Coz too */
  }
  volatile double sink = sum;
  (void)sink;
  return NULL;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2, t0 = fixture_now(), end = t0 + seconds;
  pthread_t p, c;
  if (argc > 2 && strcmp(argv[2], "pipe") == 0) {
    if (pipe(pipe_fd) != 0)
      return 1;
    fcntl(pipe_fd[1], F_SETPIPE_SZ, 4096);
    pthread_create(&p, NULL, pipe_producer, &end);
    pthread_create(&c, NULL, pipe_consumer, NULL);
  } else {
    pthread_create(&p, NULL, producer, &end);
    pthread_create(&c, NULL, consumer, NULL);
  }
  pthread_join(p, NULL);
  pthread_join(c, NULL);
  printf("items %ld\n%.6f s per item\n", consumed, (fixture_now() - t0) / (double)(consumed ? consumed : 1));
  return 0;
}
