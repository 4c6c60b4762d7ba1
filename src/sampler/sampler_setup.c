/* xptrace timer sampler: what is set up once per process (sampler.c
 * does the sampling): the settings from the environment, the time windows
 * of --periods, the helper thread, the recording's folder and the signal
 * handlers. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sampler_internal.h"
#include "xpt_collector.h"

/* ---- settings (environment, read once at load) ------------------------ */

SAMPLER_HIDDEN sampler_cfg_t sampler_cfg;
SAMPLER_HIDDEN const char *const sampler_clock_names[SAMPLER_NCLOCKS] = {"cputime", "realtime"};

static void settings_bad(const char *name, const char *value, const char *what, const char *fallback) {
  xpt_msg("xptrace: %s='%s' is not %s; using %s\n", name, value, what, fallback);
}

static double settings_freq(const char *name, double fallback) {
  const char *text = getenv(name);
  double hz;
  if (!text || !*text)
    return fallback;
  if (sampler_parse_freq(text, &hz))
    return hz;
  char shown[32];
  snprintf(shown, sizeof shown, "%g", fallback);
  settings_bad(name, text, "a frequency in Hz (0 < f <= 100000)", shown);
  return fallback;
}

void sampler_settings_read(void) {
  sampler_cfg.on[SAMPLER_CPUTIME] = true;
  const char *text = getenv("XPTRACE_SAMPLE_CLOCK");
  if (text && *text && !sampler_parse_clock(text, sampler_cfg.on))
    settings_bad("XPTRACE_SAMPLE_CLOCK", text, "cputime, realtime or both", "cputime");
  double freq = settings_freq("XPTRACE_SAMPLE_FREQ", SAMPLER_DEFAULT_FREQ);
  sampler_cfg.freq[SAMPLER_CPUTIME] = settings_freq("XPTRACE_SAMPLE_CPUTIME_FREQ", freq);
  sampler_cfg.freq[SAMPLER_REALTIME] = settings_freq("XPTRACE_SAMPLE_REALTIME_FREQ", freq);
  sampler_cfg.depth = SAMPLER_DEFAULT_DEPTH;
  text = getenv("XPTRACE_SAMPLE_DEPTH");
  if (text && *text && !sampler_parse_depth(text, &sampler_cfg.depth))
    settings_bad("XPTRACE_SAMPLE_DEPTH", text, "a depth from 1 to 512", "256");
  text = getenv("XPTRACE_SAMPLE_PERIODS");
  if (text && *text) {
    char bad[64];
    if (!sampler_parse_periods(text, sampler_cfg.periods, &sampler_cfg.nperiods, bad, sizeof bad)) {
      sampler_cfg.nperiods = 0;
      xpt_msg(
              "xptrace: XPTRACE_SAMPLE_PERIODS: '%s' is not clock:delay:duration:cycles "
              "(clock realtime, cputime or process_cputime); sampling the whole run\n",
              bad[0] ? bad : text);
    }
  }
}

/* ---- time windows ----------------------------------------------------------- */

static uint64_t clock_ns(clockid_t clock, bool *ok) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) {
    *ok = false;
    return 0;
  }
  *ok = true;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Wait `seconds` on a period clock.  False when that clock is gone (the
 * main thread ended): the periods stop there. */
static bool period_wait(enum sampler_period_clock which, double seconds) {
  clockid_t clock = which == SAMPLER_PERIOD_REALTIME          ? CLOCK_MONOTONIC
                    : which == SAMPLER_PERIOD_PROCESS_CPUTIME ? CLOCK_PROCESS_CPUTIME_ID
                                                              : sampler.main_cpu_clock;
  bool ok;
  uint64_t target = clock_ns(clock, &ok) + (uint64_t)(seconds * 1e9);
  if (!ok)
    return false;
  for (;;) {
    uint64_t now = clock_ns(clock, &ok);
    if (!ok)
      return false;
    if (now >= target)
      return true;
    uint64_t left = target - now;
    if (which == SAMPLER_PERIOD_PROCESS_CPUTIME) {
      /* Several threads spend CPU time faster than the wall clock runs. */
      if (left > 10000000u)
        left = 10000000u;
    }
    /* A thread's CPU time never runs faster than the wall clock: sleeping
     * `left` of wall time cannot overshoot. */
    sleep_ns(left < 100000u ? 100000u : left);
  }
}

static void *controller_main(void *unused) {
  (void)unused;
  for (size_t i = 0; i < sampler_cfg.nperiods; ++i) {
    const sampler_period_t *p = &sampler_cfg.periods[i];
    for (uint64_t c = 0; p->cycles == 0 || c < p->cycles; ++c) {
      if (!period_wait(p->clock, p->delay))
        goto done;
      atomic_store(&sampler.window_open, true);
      bool ok = period_wait(p->clock, p->duration);
      atomic_store(&sampler.window_open, false);
      if (!ok)
        goto done;
    }
  }
done:
  atomic_store(&sampler.window_open, false);
  return NULL;
}

void sampler_windows_start(void) {
  atomic_store(&sampler.window_open, sampler_cfg.nperiods == 0);
  if (sampler_cfg.nperiods == 0)
    return;
  if (pthread_getcpuclockid(pthread_self(), &sampler.main_cpu_clock) != 0)
    sampler.main_cpu_clock = CLOCK_PROCESS_CPUTIME_ID;
  if (sampler_start_thread(controller_main, NULL) != 0) {
    xpt_msg("xptrace: cannot start the sampling period thread; sampling the whole run\n");
    atomic_store(&sampler.window_open, true);
  }
}

/* ---- the helper thread: libraries loaded since the last look ---------------- */

void *sampler_helper_main(void *unused) {
  (void)unused;
  for (;;) {
    struct timespec pause = {0, 50 * 1000000};
    nanosleep(&pause, NULL);
    if (atomic_load(&sampler.finished))
      return NULL;
    srec_lock();
    srec_grow_locked();
    srec_unlock();
    srec_scan_maps(false);
  }
  return NULL;
}

/* ---- output ---------------------------------------------------------------------- */

/* The output folder: the common one, except for a program exec'd by a
 * sampled process (same XPTRACE_OUTPUT): "<dir>/<program>-<pid>", so that
 * it does not mix with the first program's files. */
static const char *sampler_output_dir(char *buf, size_t len) {
  const char *dir = xpt_output_dir();
  if (!dir)
    return NULL;
  if (sampler.forked || sampler.root_pid == getpid() || !getenv("XPTRACE_OUTPUT"))
    return dir;
  snprintf(buf, len, "%s/%s-%d", dir, xpt_program_name(), (int)getpid());
  char why[PATH_MAX + 128];
  if (xpt_dir_prepare(buf, why, sizeof why) != 0) {
    xpt_msg("xptrace: %s", why);
    return NULL;
  }
  return buf;
}

bool sampler_recording_start(uint32_t flags) {
  char buf[PATH_MAX + 32];
  const char *dir;
  if (flags & SREC_FLAG_FORKED) {
    /* From the fork handler: the common folder code's own fork handler
     * may not have run yet (its lock still held), so the child's folder
     * is named here, as it would name it. */
    char why[PATH_MAX + 128];
    dir = buf;
    if (snprintf(buf, sizeof buf, "%.*s/child-%d", PATH_MAX - 32, sampler.dir, (int)getpid()) >= PATH_MAX) {
      dir = NULL;
    } else if (xpt_dir_prepare(buf, why, sizeof why) != 0) {
      xpt_msg("xptrace: %s", why);
      dir = NULL;
    }
  } else {
    dir = sampler_output_dir(buf, sizeof buf);
  }
  if (!dir) {
    xpt_msg("xptrace: sampler: no output folder; not sampling");
    return false;
  }
  snprintf(sampler.dir, sizeof sampler.dir, "%s", dir);
  srec_setup_t setup = {.depth = sampler_cfg.depth, .flags = flags};
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k) {
    setup.on[k] = sampler_cfg.on[k];
    setup.freq[k] = sampler_cfg.freq[k];
  }
  if (srec_open(dir, &setup) != 0)
    return false;
  srec_scan_maps(true);
  return true;
}

/* A free real-time signal for the real-time sampler. */
int sampler_pick_realtime_signal(void) {
  for (int sig = SIGRTMIN + 3; sig <= SIGRTMAX; ++sig) {
    struct sigaction cur;
    if (sampler_real_sigaction(sig, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
        cur.sa_handler == SIG_DFL)
      return sig;
  }
  return 0;
}

bool sampler_install_handler(int k, int sig, const int wanted[SAMPLER_NCLOCKS]) {
  struct sigaction cur;
  if (sampler_real_sigaction(sig, NULL, &cur) != 0)
    return false;
  /* An inherited SIG_IGN is no handler: ours ignores what is not ours. */
  if ((cur.sa_flags & SA_SIGINFO) || (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN)) {
    if (!sampler.quiet)
      xpt_msg("xptrace: SIG%s already has a handler; %s sampling disabled\n",
              sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", sampler_clock_names[k]);
    return false;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = sampler_on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  /* The two samplers never nest: each handler blocks both signals. */
  for (int j = 0; j < SAMPLER_NCLOCKS; ++j)
    if (wanted[j])
      sigaddset(&sa.sa_mask, wanted[j]);
  sampler.before[k] = cur;
  sampler.signo[k] = sig;
  if (sampler_real_sigaction(sig, &sa, NULL) != 0) {
    sampler.signo[k] = 0;
    return false;
  }
  return true;
}

