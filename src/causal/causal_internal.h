/* libxptrace_causal.so internals: the line table (causal_lines.c), the
 * delays (causal_sync.c), progress points (causal_progress.c) and the
 * experiments (causal.c).  See docs/causal.md. */
#ifndef CAUSAL_INTERNAL_H
#define CAUSAL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xptrace/causal.h>

#define CAUSAL_API __attribute__((visibility("default")))

/* ---- lines: address ranges -> source line ids --------------------------- */

typedef struct {
  uintptr_t lo, hi; /* [lo, hi) */
  int32_t line;     /* index into causal_lines_t.names */
} causal_range_t;

typedef struct {
  causal_range_t *ranges; /* sorted, disjoint */
  size_t nranges;
  char **names; /* "file:line", one per line id */
  size_t nnames;
} causal_lines_t;

/* Every line of the in-scope binaries and sources; NULL when none (a
 * message said why).  Built once, never freed while the program runs. */
causal_lines_t *causal_lines_build(const char *binary_scope, const char *source_scope);
/* The line id of `ip`, or -1.  Async-signal-safe. */
int32_t causal_lines_find(const causal_lines_t *t, uintptr_t ip);
/* The line id of "file:N" (file matched as a path suffix), or -1. */
int32_t causal_lines_lookup(const causal_lines_t *t, const char *spec);

/* ---- delays --------------------------------------------------------------- */

typedef struct causal_thread {
  _Atomic int64_t local_ns; /* delay this thread has paid or was excused */
  int64_t blocked_at; /* global delay when it blocked */
  uint64_t pre_ns;    /* when it began its last wait */
  bool span_cut;      /* runnable_ns moved since the last sample (a wait) */
  atomic_int paying;
  bool live;
  uint64_t runnable_ns; /* CPU time + run-queue wait at the last sample */
  int32_t last_line;    /* line of the last sample, -1 none */
  uint64_t load_runnable, load_wait; /* runnable time and its wait, at the last sample */
} causal_thread_t;

extern _Atomic int64_t causal_global_ns; /* delay every thread owes in total */
/* Every thread's runnable time between its samples, and the part of it
 * spent waiting for a CPU (schedstat): how loaded the machine is. */
extern _Atomic uint64_t causal_runnable_sum, causal_wait_sum;
/* Set once a thread samples with a perf task-clock event / the timer. */
extern atomic_int causal_perf_threads, causal_timer_threads;
causal_thread_t *causal_self(void);
/* Pay what this thread owes (sleep), outside a signal handler or in one. */
void causal_catch_up(causal_thread_t *t);
/* Start sampling the calling thread (its CPU-time timer). */
void causal_thread_start(causal_thread_t *t);
void causal_thread_stop(causal_thread_t *t);
bool causal_sync_init(void);
/* The calling thread is about to wait (pays what it owes first) / waited,
 * woken by another thread (excused the delays added meanwhile) or not;
 * is about to wake another (counts its span, pays).  For the I/O and
 * futex wrappers (causal_io.c, causal_futex.c). */
void causal_pre_block(void);
void causal_post_block(bool woken);
void causal_pre_wake(void);
void causal_sync_resolve(void);
/* Look the wrapped calls' real functions up before the program runs. */
void causal_io_resolve(void);
void causal_futex_resolve(void);
int causal_real_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

/* ---- experiments (causal.c) ------------------------------------------------ */

/* One sample of thread t at `pc`, `hits` periods, standing for span_ns
 * of the thread's runnable time: count, delay. */
void causal_exp_sample(causal_thread_t *t, uintptr_t pc, int hits, int64_t span_ns);
/* Thread t ends span_ns after its last sample: that tail counts as the
 * last sample's line (a short thread's CPU-time timer fires at the
 * kernel's tick only, so its tail can be a large part of it). */
void causal_exp_tail(causal_thread_t *t, int64_t span_ns);
/* Whether `line` is the line of the experiment running now. */
bool causal_exp_selected(int32_t line);
/* Whether new threads are sampled. */
bool causal_exp_active(void);
void causal_exp_forked(void);

/* ---- load (causal_load.c) ------------------------------------------------------ */

enum { CAUSAL_LOAD_HISTORY = 16, CAUSAL_LOAD_MIN_HISTORY = 5 };
/* Whether a window whose threads waited for a CPU `frac` of their
 * runnable time was disturbed by load: well above the median of the
 * last windows' fractions hist[0..n) (any order). */
bool causal_load_outlier(const double *hist, int n, double frac);
/* The median of hist[0..n) (the last CAUSAL_LOAD_HISTORY at most); 0 if none. */
double causal_load_median(const double *hist, int n);

/* ---- progress points ------------------------------------------------------ */

enum { CAUSAL_MAX_POINTS = 128 };
typedef struct {
  char name[128];
  int type; /* XPTRACE_CAUSAL_THROUGHPUT / BEGIN / END */
  coz_counter_t counter;
} causal_point_t;

extern causal_point_t causal_points[CAUSAL_MAX_POINTS];
extern atomic_int causal_npoints;
coz_counter_t *causal_point_get(int type, const char *name);

/* The share of runnable time spent waiting for a CPU above which the
 * exit line says predictions are less exact: a quarter (a quiet machine's
 * runs wait a few %, 2 busy processes per core make it about 2/3). */
#define CAUSAL_BUSY_WARN 0.25

/* ---- settings --------------------------------------------------------------- */

typedef struct {
  const char *dir;          /* XPTRACE_OUTPUT */
  const char *line;         /* XPTRACE_CAUSAL_LINE: fixed line "file:N" */
  int speedup;              /* XPTRACE_CAUSAL_SPEEDUP: fixed %, -1 random */
  const char *source_scope; /* XPTRACE_CAUSAL_SOURCE_SCOPE glob */
  const char *binary_scope; /* XPTRACE_CAUSAL_BINARY_SCOPE glob */
  const char *progress;     /* XPTRACE_CAUSAL_PROGRESS stream:type,... */
  long window_ms;           /* XPTRACE_CAUSAL_WINDOW_MS */
  long max_experiments;     /* XPTRACE_CAUSAL_EXPERIMENTS, 0 unlimited */
  double max_seconds;       /* XPTRACE_CAUSAL_DURATION, 0 unlimited */
  long period_us;           /* XPTRACE_CAUSAL_PERIOD_US */
  bool cpu_only;            /* XPTRACE_CAUSAL_CPU_ONLY=1: delays per CPU period */
  bool timer_sampling;      /* XPTRACE_CAUSAL_SAMPLER=timer: no perf events */
} causal_cfg_t;
extern causal_cfg_t causal_cfg;

uint64_t causal_now_ns(void);

#endif /* CAUSAL_INTERNAL_H */
