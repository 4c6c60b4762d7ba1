/* xptrace common — time windows for every recorder: see xpt_windows.h. */
#include "xpt_windows.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "sampler_config.h" /* the period syntax, shared with the sampler */
#include "xpt_msg.h"
#include "xpt_shared.h"

static sampler_period_t win_periods[SAMPLER_MAX_PERIODS];
static size_t win_nperiods;
static pthread_once_t win_once = PTHREAD_ONCE_INIT;

static void win_parse(void) {
  const char *text = getenv("XPTRACE_PERIODS");
  if (!text || !*text)
    return;
  char bad[64];
  if (!sampler_parse_periods(text, win_periods, &win_nperiods, bad, sizeof bad)) {
    win_nperiods = 0;
    xpt_msg("xptrace: XPTRACE_PERIODS: '%s' is not clock:delay:duration:cycles; recording the "
            "whole run\n",
            bad[0] ? bad : text);
  }
}

bool xpt_windows_configured(void) {
  pthread_once(&win_once, win_parse);
  return win_nperiods > 0;
}

static uint64_t win_now(clockid_t clock, bool *ok) {
  struct timespec ts;
  *ok = clock_gettime(clock, &ts) == 0;
  return *ok ? (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec : 0;
}

/* Waits `seconds` on a period clock; false when that clock is gone (the
 * main thread ended): the windows stop there. */
static bool win_wait(const xpt_shared_t *s, enum sampler_period_clock which, double seconds) {
  clockid_t clock = which == SAMPLER_PERIOD_REALTIME          ? CLOCK_MONOTONIC
                    : which == SAMPLER_PERIOD_PROCESS_CPUTIME ? CLOCK_PROCESS_CPUTIME_ID
                                                              : s->win_main_clock;
  bool ok;
  uint64_t target = win_now(clock, &ok) + (uint64_t)(seconds * 1e9);
  while (ok) {
    uint64_t now = win_now(clock, &ok);
    if (!ok || now >= target)
      break;
    uint64_t left = target - now;
    /* Threads together spend CPU time faster than the wall clock runs;
     * one thread's never does, so sleeping `left` cannot overshoot. */
    if (which == SAMPLER_PERIOD_PROCESS_CPUTIME && left > 10000000u)
      left = 10000000u;
    if (left < 100000u)
      left = 100000u;
    struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  return ok;
}

static void win_set(xpt_shared_t *s, bool open) {
  bool ok;
  uint64_t now = win_now(CLOCK_MONOTONIC, &ok);
  pthread_mutex_lock(&s->lock);
  atomic_store(&s->win_open, open);
  xpt_window_fn fns[XPT_WINDOW_FNS];
  unsigned n = s->win_nfns;
  memcpy(fns, s->win_fns, sizeof fns);
  pthread_mutex_unlock(&s->lock);
  for (unsigned i = 0; i < n; ++i)
    fns[i](open, now);
}

static void *win_controller(void *arg) {
  xpt_shared_t *s = arg;
  prctl(PR_SET_NAME, "xptrace-windows", 0, 0, 0);
  win_set(s, false); /* a forked child starts closed, whatever its parent was */
  for (size_t i = 0; i < win_nperiods; ++i) {
    const sampler_period_t *p = &win_periods[i];
    for (uint64_t c = 0; p->cycles == 0 || c < p->cycles; ++c) {
      if (!win_wait(s, p->clock, p->delay))
        return NULL;
      win_set(s, true);
      bool ok = win_wait(s, p->clock, p->duration);
      win_set(s, false);
      if (!ok)
        return NULL;
    }
  }
  return NULL;
}

static void win_launch(xpt_shared_t *s) {
  if (pthread_getcpuclockid(pthread_self(), &s->win_main_clock) != 0)
    s->win_main_clock = CLOCK_PROCESS_CPUTIME_ID;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* no signal of the program lands here */
  pthread_t id;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&id, &attr, win_controller, s);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    xpt_msg("xptrace: cannot start the time-window thread (%s); recording the whole run\n",
            strerror(rc));
    win_set(s, true);
  }
}

/* A forked child starts the windows again from its own start. */
static void win_fork_child(void) {
  xpt_shared_t *s = xpt_shared();
  int running = 2;
  if (!atomic_compare_exchange_strong(&s->win_state, &running, 1))
    return; /* not started, or another copy's handler restarted it */
  /* Closed before the child's code runs on, not when its controller gets
   * a CPU: its first window is a delay away.  The child has one thread
   * here, so the list needs no lock, and the callbacks in their
   * registration form (time 0) only store a flag. */
  atomic_store(&s->win_open, false);
  for (unsigned i = 0; i < s->win_nfns && i < XPT_WINDOW_FNS; ++i)
    s->win_fns[i](false, 0);
  win_launch(s);
  atomic_store(&s->win_state, 2);
}

bool xpt_windows_start(xpt_window_fn fn) {
  if (!xpt_windows_configured())
    return false;
  xpt_shared_t *s = xpt_shared();
  pthread_mutex_lock(&s->lock);
  if (s->win_nfns < XPT_WINDOW_FNS)
    s->win_fns[s->win_nfns++] = fn;
  else
    fn = NULL;
  bool open = atomic_load(&s->win_open);
  pthread_mutex_unlock(&s->lock);
  if (fn)
    fn(open, 0);
  int expected = 0;
  if (atomic_compare_exchange_strong(&s->win_state, &expected, 1)) {
    pthread_atfork(NULL, NULL, win_fork_child);
    win_launch(s);
    atomic_store(&s->win_state, 2);
  }
  return true;
}
