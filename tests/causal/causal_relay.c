/* Causal profiling fixture: a relay.  Threads A and B take turns: A's
 * line does 3 units of work and hands the turn to B, whose line does 1
 * unit and hands it back (one progress point per round), so each waits
 * blocked while the other works.  Thread C spins on its own line, off the
 * relay: it never holds a turn.  On an idle machine with 2 CPUs, making
 * A's line 100 % faster makes the program 75 % faster, C's line never
 * helps (0 %; tested at 50 %: at 100 % its delays fill the window).  The
 * turn passes through a raw futex (syscall(SYS_futex) wait and wake, as
 * a hand-written semaphore) or through two pipes, each thread waiting in
 * ppoll.  A thread woken by the other must be excused
 * the delays added while it waited: charged them, B sleeps A's delays
 * again after A's turn and A's line predicts ~0.
 * A_PCT / C_PCT scale each line's work (compile-time, percent).
 *
 * usage: causal_relay SECONDS futex|ppoll   (prints "rounds N") */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll; the bench builds it without CMake's definitions */
#endif
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <xptrace/causal.h>

#include "causal_work.h"

#ifndef A_PCT
#define A_PCT 100
#endif
#ifndef C_PCT
#define C_PCT 100
#endif
#define UNIT 300000L
#define A_WORK (3 * UNIT * A_PCT / 100)
#define B_WORK UNIT
#define C_WORK (UNIT * C_PCT / 100 + 1)

static double end_time;
static int done, use_futex;
static long rounds;
static unsigned turn;   /* futex word: 0 A's turn, 1 B's */
static int pipes[2][2]; /* [0]: to A, [1]: to B */

CAUSAL_WORK_FN(work_a, A_WORK) /* LINE_A */

CAUSAL_WORK_FN(work_b, B_WORK) /* LINE_B */

CAUSAL_WORK_FN(work_c, C_WORK) /* LINE_C */

/* Hand the turn to `to` (0 A, 1 B) and wait until it comes back. */
static void pass(int to) {
  if (use_futex) {
    __atomic_store_n(&turn, (unsigned)to, __ATOMIC_RELEASE);
    syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) == (unsigned)to)
      syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, (unsigned)to, NULL, NULL, 0);
    return;
  }
  char c = 'x';
  if (write(pipes[to][1], &c, 1) != 1)
    abort();
  struct pollfd p = {pipes[!to][0], POLLIN, 0};
  while (ppoll(&p, 1, NULL, NULL) != 1)
    ;
  if (read(pipes[!to][0], &c, 1) != 1)
    abort();
}

static void *thread_a(void *arg) {
  double x = *(double *)arg;
  for (;;) {
    x = work_a(x);
    if (fixture_now() >= end_time)
      __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
    pass(1);
    ++rounds;
    COZ_PROGRESS_NAMED("round");
    if (__atomic_load_n(&done, __ATOMIC_RELAXED))
      break; /* B saw `done` when its turn came, and handed it back */
  }
  *(double *)arg = x;
  return NULL;
}

static void *thread_b(void *arg) {
  double x = *(double *)arg;
  if (use_futex) {
    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) == 0)
      syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
  } else {
    struct pollfd p = {pipes[1][0], POLLIN, 0};
    char c;
    while (ppoll(&p, 1, NULL, NULL) != 1)
      ;
    if (read(pipes[1][0], &c, 1) != 1)
      abort();
  }
  while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
    x = work_b(x);
    pass(0);
  }
  if (use_futex) { /* A's last pass waits for the turn back */
    __atomic_store_n(&turn, 0, __ATOMIC_RELEASE);
    syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  } else if (write(pipes[0][1], "x", 1) != 1) {
    abort();
  }
  *(double *)arg = x;
  return NULL;
}

static void *thread_c(void *arg) {
  double x = *(double *)arg;
  while (!__atomic_load_n(&done, __ATOMIC_RELAXED))
    x = work_c(x);
  *(double *)arg = x;
  return NULL;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2, t0 = fixture_now();
  end_time = t0 + seconds;
  use_futex = argc > 2 && !strcmp(argv[2], "futex");
  if (!use_futex && (pipe(pipes[0]) || pipe(pipes[1])))
    return 1;
  double xa = 1.0, xb = 1.0, xc = 1.0;
  pthread_t a, b, c;
  pthread_create(&a, NULL, thread_a, &xa);
  pthread_create(&b, NULL, thread_b, &xb);
  pthread_create(&c, NULL, thread_c, &xc);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  pthread_join(c, NULL);
  printf("rounds %ld\n%.6f s per round\n", rounds,
         (fixture_now() - t0) / (double)(rounds ? rounds : 1));
  volatile double sink = xa + xb + xc;
  (void)sink;
  return 0;
}
