/* One progress line on a terminal for post-processing that takes more
 * than a second (finish, merge, report): rewritten in place by a thread,
 * cleared at the end; never written when stderr is no terminal (a pipe, a
 * log).  XPTRACE_PROGRESS_AFTER (seconds, default 1) delays the first
 * line; 0 draws it at once. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

static struct {
  pthread_mutex_t lock; /* the line: drawn, cleared */
  pthread_cond_t wake;
  pthread_t thread;
  bool running, stop, shown;
  char what[256];
  struct timespec start;
  _Atomic uint64_t done, total;
} pg = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static double since(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void fmt_bytes(char *buf, size_t len, uint64_t b) {
  if (b >= 1ull << 30)
    snprintf(buf, len, "%.2f GB", (double)b / (1ull << 30));
  else
    snprintf(buf, len, "%.1f MB", (double)b / (1ull << 20));
}

/* Under pg.lock. */
static void draw(void) {
  char line[512], d[32], t[32];
  uint64_t done = atomic_load(&pg.done), total = atomic_load(&pg.total);
  int n;
  if (total && done <= total) {
    fmt_bytes(d, sizeof d, done);
    fmt_bytes(t, sizeof t, total);
    n = snprintf(line, sizeof line, "\r%s: %s of %s (%.0f%%), %.0f s\033[K", pg.what, d, t,
                 100.0 * (double)done / (double)total, since(&pg.start));
  } else if (done) {
    n = snprintf(line, sizeof line, "\r%s: %llu done, %.0f s\033[K", pg.what,
                 (unsigned long long)done, since(&pg.start));
  } else {
    n = snprintf(line, sizeof line, "\r%s, %.0f s\033[K", pg.what, since(&pg.start));
  }
  if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) > 0)
    pg.shown = true;
}

static double delay_s(void) {
  static double after = -1; /* read once */
  if (after < 0) {
    const char *v = getenv("XPTRACE_PROGRESS_AFTER");
    char *end;
    double x = v && *v ? strtod(v, &end) : 1.0;
    after = v && *v && (*end || !(x >= 0)) ? 1.0 : x;
  }
  return after;
}

static void *ticker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&pg.lock);
  while (!pg.stop) {
    if (since(&pg.start) >= delay_s())
      draw();
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 250 * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    while (!pg.stop && pthread_cond_timedwait(&pg.wake, &pg.lock, &until) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&pg.lock);
  return NULL;
}

void progress_begin(const char *what, uint64_t total) {
  if (pg.running || !isatty(STDERR_FILENO))
    return;
  snprintf(pg.what, sizeof pg.what, "%s", what);
  atomic_store(&pg.done, 0);
  atomic_store(&pg.total, total);
  clock_gettime(CLOCK_MONOTONIC, &pg.start);
  pg.stop = pg.shown = false;
  if (delay_s() == 0) { /* at once, whatever the thread's timing */
    pthread_mutex_lock(&pg.lock);
    draw();
    pthread_mutex_unlock(&pg.lock);
  }
  pg.running = pthread_create(&pg.thread, NULL, ticker, NULL) == 0;
  if (!pg.running)
    progress_clear();
}

void progress_set(uint64_t done) { atomic_store(&pg.done, done); }
void progress_add_total(uint64_t more) { atomic_fetch_add(&pg.total, more); }

void progress_clear(void) {
  pthread_mutex_lock(&pg.lock);
  if (pg.shown && write(STDERR_FILENO, "\r\033[K", 4) > 0)
    pg.shown = false;
  pthread_mutex_unlock(&pg.lock);
}

void progress_end(void) {
  if (!pg.running)
    return;
  pthread_mutex_lock(&pg.lock);
  pg.stop = true;
  pthread_cond_signal(&pg.wake);
  pthread_mutex_unlock(&pg.lock);
  pthread_join(pg.thread, NULL);
  pg.running = false;
  progress_clear();
}
