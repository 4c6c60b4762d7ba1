/* libxptrace_causal.so — causal profiling inside the program, loaded with
 * LD_PRELOAD by `xptrace causal` (docs/causal.md).
 *
 * A thread of ours runs experiments: it selects a line (given, or one of
 * the lines recently sampled), a virtual speedup (0 half of the time, the
 * baseline; else 5..100 % in steps of 5), publishes them for the sample
 * handler (causal_sync.c) for one window, then appends the window's
 * effective duration (wall time less the delays inserted) and the progress
 * points' deltas to causal-<pid>.coz in Coz's format.  Results are on disk
 * as soon as each window ends, whatever way the program ends later. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "causal_internal.h"
#include "xpt_fd.h"
#include "xpt_files.h"
#include "xpt_msg.h"

causal_cfg_t causal_cfg;

enum { RECENT = 4096 };

static struct {
  _Atomic(causal_lines_t *) table;
  _Atomic(uint64_t) *line_samples; /* per line id, set before table */
  atomic_int selected;             /* line id, -1 none */
  _Atomic int64_t speedup;         /* % of each selected sample's span owed */
  atomic_uint_fast64_t selected_hits;
  atomic_int recent[RECENT];
  atomic_uint recent_next;
  atomic_bool stopping;
  long discarded;     /* experiments that could not be measured */
  long load_discarded; /* experiments disturbed by load */
  double load_max, load_typical; /* the worst such window's wait fraction, its median */
  double load_hist[CAUSAL_LOAD_HISTORY]; /* the last windows' wait fractions */
  int load_n;
  uint64_t busy_run, busy_wait; /* all measured windows' runnable time and its wait */
  atomic_bool active; /* sampling threads */
  bool started;
  pthread_t thread;
  int fd;
  uint64_t start_ns;
} X = {.selected = -1, .fd = -1};

void causal_exp_sample(causal_thread_t *t, uintptr_t pc, int hits, int64_t span_ns) {
  causal_lines_t *tab = atomic_load_explicit(&X.table, memory_order_acquire);
  if (!tab)
    return;
  int32_t line = causal_lines_find(tab, pc);
  t->last_line = line;
  if (line < 0)
    return;
  atomic_fetch_add_explicit(&X.line_samples[line], (uint64_t)hits, memory_order_relaxed);
  unsigned slot = atomic_fetch_add_explicit(&X.recent_next, 1, memory_order_relaxed) % RECENT;
  atomic_store_explicit(&X.recent[slot], line, memory_order_relaxed);
  if (line != atomic_load_explicit(&X.selected, memory_order_acquire))
    return;
  int64_t d = atomic_load_explicit(&X.speedup, memory_order_relaxed) * span_ns / 100;
  atomic_fetch_add_explicit(&X.selected_hits, (uint64_t)hits, memory_order_relaxed);
  if (d > 0) {
    /* Every other thread owes d; this one is even. */
    atomic_fetch_add_explicit(&causal_global_ns, d, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->local_ns, d, memory_order_relaxed);
  }
}

void causal_exp_tail(causal_thread_t *t, int64_t span_ns) {
  int32_t line = t->last_line;
  if (line < 0 || span_ns <= 0 || line != atomic_load_explicit(&X.selected, memory_order_acquire))
    return;
  int64_t d = atomic_load_explicit(&X.speedup, memory_order_relaxed) * span_ns / 100;
  if (d > 0) {
    atomic_fetch_add_explicit(&causal_global_ns, d, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->local_ns, d, memory_order_relaxed);
  }
}

bool causal_exp_selected(int32_t line) {
  return line >= 0 && line == atomic_load_explicit(&X.selected, memory_order_relaxed);
}

bool causal_exp_active(void) { return atomic_load(&X.active); }

void causal_exp_forked(void) {
  atomic_store(&X.selected, -1);
  atomic_store(&X.active, false);
  X.started = false;
  if (X.fd >= 0) /* the parent's profile: the child writes nothing */
    close(X.fd);
  X.fd = -1;
}

/* ---- settings ------------------------------------------------------------- */

static long env_long(const char *name, long fallback, long lo, long hi) {
  const char *s = getenv(name);
  if (!s || !*s)
    return fallback;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) {
    xpt_msg("xptrace: %s='%s' is not a number from %ld to %ld; using %ld\n", name, s, lo, hi,
            fallback);
    return fallback;
  }
  return v;
}

static void settings_read(void) {
  causal_cfg.dir = secure_getenv("XPTRACE_OUTPUT");
  causal_cfg.line = getenv("XPTRACE_CAUSAL_LINE");
  causal_cfg.speedup = (int)env_long("XPTRACE_CAUSAL_SPEEDUP", -1, 0, 100);
  causal_cfg.source_scope = getenv("XPTRACE_CAUSAL_SOURCE_SCOPE");
  causal_cfg.binary_scope = getenv("XPTRACE_CAUSAL_BINARY_SCOPE");
  causal_cfg.progress = getenv("XPTRACE_CAUSAL_PROGRESS");
  causal_cfg.window_ms = env_long("XPTRACE_CAUSAL_WINDOW_MS", 500, 10, 3600000);
  causal_cfg.max_experiments = env_long("XPTRACE_CAUSAL_EXPERIMENTS", 0, 0, 1000000000);
  causal_cfg.max_seconds = (double)env_long("XPTRACE_CAUSAL_DURATION", 0, 0, 100000000);
  causal_cfg.period_us = env_long("XPTRACE_CAUSAL_PERIOD_US", 1000, 100, 1000000);
  causal_cfg.cpu_only = env_long("XPTRACE_CAUSAL_CPU_ONLY", 0, 0, 1) == 1;
  const char *sampler = getenv("XPTRACE_CAUSAL_SAMPLER");
  causal_cfg.timer_sampling = sampler && !strcmp(sampler, "timer");
  if (sampler && *sampler && strcmp(sampler, "timer") && strcmp(sampler, "perf"))
    xpt_msg("xptrace: XPTRACE_CAUSAL_SAMPLER='%s' is neither perf nor timer; using perf\n",
            sampler);
}

/* ---- output ------------------------------------------------------------------ */

static void out_write(const char *buf, size_t n) {
  while (X.fd >= 0 && n) {
    ssize_t w = write(X.fd, buf, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return;
    buf += w;
    n -= (size_t)w;
  }
}

static void out_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out_printf(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0)
    out_write(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void out_open(void) {
  const char *dir = causal_cfg.dir && *causal_cfg.dir ? causal_cfg.dir : xpt_output_dir();
  if (!dir)
    return;
  char name[64];
  snprintf(name, sizeof name, "causal-%d.coz", (int)getpid());
  X.fd = xpt_create_file(dir, name, NULL, 0);
  if (X.fd < 0)
    xpt_msg("xptrace: causal: cannot create %s/%s: %s\n", dir, name, strerror(errno));
  X.fd = xpt_fd_raise(X.fd); /* held while the program runs: out of its way */
}

/* ---- experiments ------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Sleep up to ms, ending early when stopping. */
static void nap(long ms) {
  uint64_t end = causal_now_ns() + (uint64_t)ms * 1000000u;
  for (;;) {
    if (atomic_load(&X.stopping))
      return;
    uint64_t now = causal_now_ns();
    if (now >= end)
      return;
    uint64_t step = end - now < 10000000u ? end - now : 10000000u;
    struct timespec ts = {0, (long)step};
    nanosleep(&ts, NULL);
  }
}

static int32_t pick_line(causal_lines_t *tab, int32_t fixed) {
  if (fixed >= 0)
    return fixed;
  unsigned n = atomic_load(&X.recent_next);
  if (n == 0)
    return -1;
  unsigned k = n < RECENT ? n : RECENT;
  int32_t line = atomic_load(&X.recent[rng() % k]);
  return line >= 0 && (size_t)line < tab->nnames ? line : -1;
}

static int pick_speedup(long n) {
  if (causal_cfg.speedup >= 0) /* fixed: alternate with the baseline */
    return n % 2 ? 0 : causal_cfg.speedup;
  return rng() % 2 ? 0 : (int)(rng() % 20 + 1) * 5;
}

static void counts_now(size_t *c, int n) {
  for (int i = 0; i < n; ++i)
    c[i] = __atomic_load_n(&causal_points[i].counter.count, __ATOMIC_RELAXED);
}

static void report_points(const size_t *before, const size_t *after, int n) {
  for (int i = 0; i < n; ++i) {
    const causal_point_t *p = &causal_points[i];
    if (p->type == XPTRACE_CAUSAL_THROUGHPUT) {
      out_printf("throughput-point\tname=%s\tdelta=%zu\n", p->name, after[i] - before[i]);
    } else if (p->type == XPTRACE_CAUSAL_BEGIN) {
      for (int j = 0; j < n; ++j) {
        if (causal_points[j].type == XPTRACE_CAUSAL_END &&
            strcmp(causal_points[j].name, p->name) == 0) {
          out_printf("latency-point\tname=%s\tarrivals=%zu\tdepartures=%zu\tdifference=%zd\n",
                     p->name, after[i] - before[i], after[j] - before[j],
                     (ssize_t)(after[i] - after[j]));
        }
      }
    }
  }
}

/* Whether the window just ended, whose threads were runnable `run` ns
 * and waited `wait` ns of it for a CPU, was disturbed by load
 * (causal_load.c): then counted, not written.  Every window joins the
 * history, so a lasting change of load becomes the new normal. */
static bool load_disturbed(uint64_t run, uint64_t wait) {
  if (run == 0 || wait > run)
    return false; /* no sample (a program that waits), or no schedstat */
  double frac = (double)wait / (double)run;
  X.busy_run += run;
  X.busy_wait += wait;
  int n = X.load_n < CAUSAL_LOAD_HISTORY ? X.load_n : CAUSAL_LOAD_HISTORY;
  bool out = causal_load_outlier(X.load_hist, n, frac);
  if (out && frac > X.load_max) { /* for the line at exit */
    X.load_max = frac;
    X.load_typical = causal_load_median(X.load_hist, n);
  }
  if (out)
    ++X.load_discarded;
  X.load_hist[X.load_n++ % CAUSAL_LOAD_HISTORY] = frac;
  return out;
}

static void *experiments(void *arg) {
  (void)arg;
  causal_lines_t *tab = causal_lines_build(causal_cfg.binary_scope, causal_cfg.source_scope);
  if (!tab) {
    xpt_msg("xptrace: causal: no source line in scope (debug information missing, or "
            "--source-scope/--binary-scope match nothing); no experiment run\n");
    return NULL;
  }
  int32_t fixed = -1;
  if (causal_cfg.line && *causal_cfg.line) {
    fixed = causal_lines_lookup(tab, causal_cfg.line);
    if (fixed < 0) {
      xpt_msg("xptrace: causal: line '%s' has no code in scope; no experiment run\n",
              causal_cfg.line);
      return NULL;
    }
  }
  X.line_samples = calloc(tab->nnames, sizeof *X.line_samples);
  if (!X.line_samples)
    return NULL;
  atomic_store_explicit(&X.table, tab, memory_order_release);
  rng_state = causal_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
  long done = 0;
  size_t before[CAUSAL_MAX_POINTS], after[CAUSAL_MAX_POINTS];
  while (!atomic_load(&X.stopping)) {
    if ((causal_cfg.max_experiments && done >= causal_cfg.max_experiments) ||
        (causal_cfg.max_seconds > 0 &&
         (double)(causal_now_ns() - X.start_ns) / 1e9 >= causal_cfg.max_seconds))
      break;
    int32_t line = pick_line(tab, fixed);
    if (line < 0) {
      nap(10);
      continue;
    }
    int speedup = pick_speedup(done);
    int npts0 = atomic_load(&causal_npoints);
    counts_now(before, npts0);
    uint64_t hits0 = atomic_load(&X.selected_hits);
    int64_t delay0 = atomic_load(&causal_global_ns);
    uint64_t run0 = atomic_load(&causal_runnable_sum), wait0 = atomic_load(&causal_wait_sum);
    uint64_t t0 = causal_now_ns();
    atomic_store(&X.speedup, (int64_t)speedup);
    atomic_store_explicit(&X.selected, line, memory_order_release);
    nap(causal_cfg.window_ms);
    atomic_store_explicit(&X.selected, -1, memory_order_release);
    uint64_t t1 = causal_now_ns();
    if (atomic_load(&X.stopping))
      break; /* a cut window is not reported */
    /* A point first visited during the window counted from 0. */
    int npts = atomic_load(&causal_npoints);
    for (int i = npts0; i < npts; ++i)
      before[i] = 0;
    counts_now(after, npts);
    int64_t delays = atomic_load(&causal_global_ns) - delay0;
    int64_t wall = (int64_t)(t1 - t0), duration = wall - delays;
    /* Delays are paid lazily: one owed at the window's end is counted but
     * not yet slept, and on a busy machine that left durations at or
     * below zero.  An experiment with under 1 % of its window left is not
     * measured: discarded and counted, never written. */
    if (duration < wall / 100 || duration <= 0) {
      ++X.discarded;
      continue;
    }
    if (load_disturbed(atomic_load(&causal_runnable_sum) - run0,
                       atomic_load(&causal_wait_sum) - wait0))
      continue;
    out_printf("experiment\tselected=%s\tspeedup=%.2f\tduration=%lld\tselected-samples=%llu\n",
               tab->names[line], speedup / 100.0, (long long)duration,
               (unsigned long long)(atomic_load(&X.selected_hits) - hits0));
    report_points(before, after, npts);
    ++done;
  }
  return NULL;
}

/* ---- load and exit ----------------------------------------------------------- */

__attribute__((constructor)) static void causal_load(void) {
  settings_read();
  causal_sync_resolve();
  causal_io_resolve();
  causal_futex_resolve();
  X.start_ns = causal_now_ns();
  out_open();
  if (X.fd < 0)
    return;
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  out_printf("startup\ttime=%llu\n",
             (unsigned long long)rt.tv_sec * 1000000000ull + (unsigned long long)rt.tv_nsec);
  if (!causal_sync_init()) {
    xpt_msg("xptrace: causal: cannot handle SIGPROF: %s; no experiment run\n", strerror(errno));
    return;
  }
  atomic_store(&X.active, true);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  X.started = causal_real_create(&X.thread, NULL, experiments, NULL) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  causal_thread_start(causal_self());
}

__attribute__((destructor)) static void causal_unload(void) {
  causal_thread_stop(causal_self());
  atomic_store(&X.active, false);
  atomic_store(&X.stopping, true);
  if (X.started) {
    X.started = false;
    pthread_join(X.thread, NULL);
  }
  if (X.fd < 0)
    return;
  if (atomic_load(&causal_timer_threads) && !causal_cfg.timer_sampling)
    xpt_msg("xptrace: causal: perf events refused (perf_event_paranoid); sampled with CPU-time "
            "timers, which fire at the kernel's tick: predictions are less exact\n");
  if (X.discarded)
    xpt_msg("xptrace: causal: %ld experiment(s) discarded: their delays left under 1 %% of the "
            "window (a busy machine)\n",
            X.discarded);
  if (X.load_discarded)
    xpt_msg("xptrace: causal: %ld experiment(s) discarded: disturbed by load (their threads "
            "waited for a CPU up to %.0f %% of their runnable time, about %.0f %% in the "
            "windows around them)\n",
            X.load_discarded, 100 * X.load_max, 100 * X.load_typical);
  /* More runnable threads than CPUs (other work, or the program's own):
   * a delay paid there changes how the scheduler shares the CPUs, which a
   * real speedup does not, and predictions move (docs/causal.md, Limits). */
  double busy = X.busy_run ? (double)X.busy_wait / (double)X.busy_run : 0;
  if (busy >= CAUSAL_BUSY_WARN)
    xpt_msg("xptrace: causal: the program's threads waited for a CPU %.0f %% of their runnable "
            "time (more runnable threads than CPUs): predictions are less exact there (up to "
            "30 points measured at 2 busy processes per core; docs/causal.md, Limits)\n",
            100 * busy);
  causal_lines_t *tab = atomic_load(&X.table);
  for (size_t i = 0; tab && i < tab->nnames; ++i) {
    uint64_t n = atomic_load(&X.line_samples[i]);
    if (n)
      out_printf("samples\tlocation=%s\tcount=%llu\n", tab->names[i], (unsigned long long)n);
  }
  out_printf("runtime\ttime=%llu\n", (unsigned long long)(causal_now_ns() - X.start_ns));
  /* Whole-run visits per point: "shutdown" is a record Coz's viewer
   * ignores; ours carries the totals (docs/causal.md). */
  int npts = atomic_load(&causal_npoints);
  for (int i = 0; i < npts; ++i)
    out_printf("shutdown\tpoint=%s\ttype=%s\tcount=%zu\n", causal_points[i].name,
               causal_points[i].type == XPTRACE_CAUSAL_THROUGHPUT ? "throughput"
               : causal_points[i].type == XPTRACE_CAUSAL_BEGIN    ? "begin"
                                                                  : "end",
               __atomic_load_n(&causal_points[i].counter.count, __ATOMIC_RELAXED));
  close(X.fd);
  X.fd = -1;
}
