/* xptrace sampler — statistical call-stack sampling of any program,
 * loaded with LD_PRELOAD (see docs/sampler.md).
 *
 * Each thread gets POSIX timers that signal that very thread
 * (SIGEV_THREAD_ID): SIGPROF on its CPU-time clock, a real-time signal on
 * CLOCK_MONOTONIC.  The handler unwinds the interrupted stack with
 * libunwind into the thread's mmap'd buffer; a full buffer is pushed on a
 * lock-free list for the writer thread and a fresh one mapped.  No malloc,
 * lock or I/O in the handler.  At exit (or SIGINT/SIGTERM) the counts are
 * symbolized and written. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "sampler_internal.h"
#include "xpt_collector.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* Tags the sigev value of our timers, so that a program's own timer on
 * the same signal is told apart. */
#define SAMPLER_TIMER_TAG 0x5a3e1000

static const char *const clock_names[SAMPLER_NCLOCKS] = {"cputime", "realtime"};

/* ---- settings (environment, read once at load) ------------------------ */

static struct {
  bool on[SAMPLER_NCLOCKS];
  double freq[SAMPLER_NCLOCKS];
  unsigned depth;
  sampler_period_t periods[SAMPLER_MAX_PERIODS];
  size_t nperiods;
} cfg;

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

static void settings_read(void) {
  cfg.on[SAMPLER_CPUTIME] = true;
  const char *text = getenv("XPTRACE_SAMPLE_CLOCK");
  if (text && *text && !sampler_parse_clock(text, cfg.on))
    settings_bad("XPTRACE_SAMPLE_CLOCK", text, "cputime, realtime or both", "cputime");
  double freq = settings_freq("XPTRACE_SAMPLE_FREQ", SAMPLER_DEFAULT_FREQ);
  cfg.freq[SAMPLER_CPUTIME] = settings_freq("XPTRACE_SAMPLE_CPUTIME_FREQ", freq);
  cfg.freq[SAMPLER_REALTIME] = settings_freq("XPTRACE_SAMPLE_REALTIME_FREQ", freq);
  cfg.depth = SAMPLER_DEFAULT_DEPTH;
  text = getenv("XPTRACE_SAMPLE_DEPTH");
  if (text && *text && !sampler_parse_depth(text, &cfg.depth))
    settings_bad("XPTRACE_SAMPLE_DEPTH", text, "a depth from 1 to 512", "64");
  text = getenv("XPTRACE_SAMPLE_PERIODS");
  if (text && *text) {
    char bad[64];
    if (!sampler_parse_periods(text, cfg.periods, &cfg.nperiods, bad, sizeof bad)) {
      cfg.nperiods = 0;
      xpt_msg(
              "xptrace: XPTRACE_SAMPLE_PERIODS: '%s' is not clock:delay:duration:cycles "
              "(clock realtime, cputime or process_cputime); sampling the whole run\n",
              bad[0] ? bad : text);
    }
  }
}

/* ---- state ----------------------------------------------------------------- */

typedef struct sampler_thread {
  struct sampler_thread *next; /* registry */
  sampler_thread_info_t info;
  timer_t timer[SAMPLER_NCLOCKS];
  bool has_timer[SAMPLER_NCLOCKS];
  sample_buffer_t *current; /* touched only by this thread */
  atomic_bool live;         /* the handler may record */
  atomic_int busy;          /* the handler is running on this thread */
} sampler_thread_t;

static __thread sampler_thread_t *tls_self __attribute__((tls_model("initial-exec")));

static struct {
  bool loaded;
  int signo[SAMPLER_NCLOCKS];              /* 0: that clock is not sampled */
  struct sigaction before[SAMPLER_NCLOCKS]; /* what the program had */
  atomic_bool active[SAMPLER_NCLOCKS];     /* timers may be created */
  const char *stop_note[SAMPLER_NCLOCKS];
  atomic_bool window_open;
  atomic_bool stopping;
  atomic_bool finished;
  atomic_uint_fast64_t lost;                 /* samples with no thread state */
  _Atomic(sample_buffer_t *) full;           /* handoff list */
  sem_t writer_wake;
  pthread_mutex_t registry_lock;             /* threads list, timers */
  pthread_mutex_t report_lock;               /* aggregation */
  sampler_thread_t *threads;
  uint32_t next_index;
  clockid_t main_cpu_clock;
  pid_t root_pid;                            /* first sampled process of the tree */
  bool forked;                               /* this process is a fork of a sampled one */
} sampler = {
    .registry_lock = PTHREAD_MUTEX_INITIALIZER,
    .report_lock = PTHREAD_MUTEX_INITIALIZER,
};

static pid_t sampler_gettid(void) { return (pid_t)syscall(SYS_gettid); }

/* ---- the program's own signal calls ---------------------------------------- */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);
typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static sigaction_fn real_sigaction_fn(void) {
  static _Atomic(sigaction_fn) fn;
  sigaction_fn f = atomic_load_explicit(&fn, memory_order_acquire);
  if (!f) {
    f = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    atomic_store_explicit(&fn, f, memory_order_release);
  }
  return f;
}

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  sigaction_fn f = real_sigaction_fn();
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  return f(sig, act, old);
}

static pthread_create_fn real_pthread_create(void) {
  static _Atomic(pthread_create_fn) fn;
  pthread_create_fn f = atomic_load_explicit(&fn, memory_order_acquire);
  if (!f) {
    f = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
    atomic_store_explicit(&fn, f, memory_order_release);
  }
  return f;
}

static int clock_of_signal(int sig) {
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
    if (sampler.signo[k] && sampler.signo[k] == sig)
      return k;
  return -1;
}

static void thread_delete_timers_locked(sampler_thread_t *t, int only_clock) {
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k) {
    if ((only_clock < 0 || only_clock == k) && t->has_timer[k]) {
      timer_delete(t->timer[k]);
      t->has_timer[k] = false;
    }
  }
}

/* The program takes the signal of clock k for itself: stop that sampler
 * (every thread's timer) and tell once. */
static void sampler_give_up_clock(int k, const char *why) {
  pthread_mutex_lock(&sampler.registry_lock);
  if (atomic_exchange(&sampler.active[k], false)) {
    sampler.stop_note[k] = why;
    for (sampler_thread_t *t = sampler.threads; t; t = t->next)
      thread_delete_timers_locked(t, k);
    const char *abbrev = sigabbrev_np(sampler.signo[k]);
    xpt_msg("xptrace: the program %s SIG%s; %s sampling disabled\n", why,
            abbrev ? abbrev : "?", clock_names[k]);
  }
  pthread_mutex_unlock(&sampler.registry_lock);
}

/* Interposed: a program that sets its own action for a sampler signal
 * gets it (and sees its own previous action), and that sampler stops. */
__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction *act,
                                                     struct sigaction *old) {
  int k = sampler.loaded ? clock_of_signal(sig) : -1;
  if (k < 0 || !atomic_load(&sampler.active[k]) || (!act && !old))
    return real_sigaction(sig, act, old);
  if (!act) {
    *old = sampler.before[k];
    return 0;
  }
  sampler_give_up_clock(k, "sets its own action for");
  struct sigaction ignored;
  int rc = real_sigaction(sig, act, &ignored);
  if (rc == 0 && old)
    *old = sampler.before[k];
  return rc;
}

__attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART; /* BSD semantics, as glibc's signal() */
  sigemptyset(&act.sa_mask);
  if (sig > 0 && sig < NSIG)
    sigaddset(&act.sa_mask, sig);
  if (sigaction(sig, &act, &old) != 0)
    return SIG_ERR;
  return old.sa_handler;
}

/* ---- buffers and handoff ------------------------------------------------- */

static size_t buffer_stride(void) {
  size_t s = sizeof(sample_record_t) + cfg.depth * sizeof(uintptr_t);
  return (s + 7) & ~(size_t)7;
}

/* mmap only: callable from the signal handler. */
static sample_buffer_t *buffer_map(void) {
  size_t stride = buffer_stride();
  size_t size = sizeof(sample_buffer_t) + stride * SAMPLER_SAMPLES_PER_BUFFER;
  size_t page = 4096;
  size = (size + page - 1) & ~(page - 1);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  sample_buffer_t *b = p;
  b->next = NULL;
  b->map_size = size;
  b->stride = stride;
  b->count = 0;
  b->capacity = SAMPLER_SAMPLES_PER_BUFFER;
  return b;
}

/* Lock-free push (the writer takes the whole list at once, so no ABA). */
static void handoff_push(sample_buffer_t *b) {
  sample_buffer_t *head = atomic_load_explicit(&sampler.full, memory_order_relaxed);
  do {
    b->next = head;
  } while (!atomic_compare_exchange_weak_explicit(&sampler.full, &head, b, memory_order_release,
                                                  memory_order_relaxed));
  sem_post(&sampler.writer_wake); /* async-signal-safe */
}

/* Count every handed-off buffer; the caller holds report_lock. */
static void handoff_drain_locked(void) {
  sample_buffer_t *b = atomic_exchange_explicit(&sampler.full, NULL, memory_order_acquire);
  while (b) {
    sample_buffer_t *next = b->next;
    if (!atomic_load(&sampler.finished))
      sampler_report_add(b);
    munmap(b, b->map_size);
    b = next;
  }
}

static void *writer_main(void *unused) {
  (void)unused;
  for (;;) {
    while (sem_wait(&sampler.writer_wake) != 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&sampler.report_lock);
    handoff_drain_locked();
    pthread_mutex_unlock(&sampler.report_lock);
  }
  return NULL;
}

/* ---- the signal handler --------------------------------------------------- */

static void chain_previous(int k, int sig, siginfo_t *info, void *uctx) {
  const struct sigaction *prev = &sampler.before[k];
  if (prev->sa_flags & SA_SIGINFO) {
    if (prev->sa_sigaction)
      prev->sa_sigaction(sig, info, uctx);
  } else if (prev->sa_handler == SIG_DFL) {
    /* What the signal would have done without us. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction(sig, &dfl, NULL);
    raise(sig);
  } else if (prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
  }
}

static void record_sample(sampler_thread_t *t, int k, void *uctx) {
  sample_buffer_t *b = t->current;
  if (!b || b->count == b->capacity) {
    if (b)
      handoff_push(b);
    t->current = b = buffer_map();
    if (!b) {
      ++t->info.dropped;
      return;
    }
  }
  sample_record_t *s = sample_at(b, b->count);
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  s->time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  s->clock = (uint8_t)k;
  s->thread = t->info.index;
  s->truncated = 0;
  unw_cursor_t cursor;
  if (unw_init_local2(&cursor, (unw_context_t *)uctx, UNW_INIT_SIGNAL_FRAME) < 0) {
    ++t->info.dropped;
    return;
  }
  unsigned n = 0;
  for (;;) {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
      break;
    s->pc[n++] = (uintptr_t)ip;
    if (unw_step(&cursor) <= 0)
      break;
    if (n == cfg.depth) {
      s->truncated = 1;
      break;
    }
  }
  if (n == 0) {
    ++t->info.dropped;
    return;
  }
  s->depth = (uint16_t)n;
  ++b->count;
  ++t->info.samples[k];
}

static void sampler_on_signal(int sig, siginfo_t *info, void *uctx) {
  int saved_errno = errno;
  int k = clock_of_signal(sig);
  if (k < 0) {
    errno = saved_errno;
    return;
  }
  if (!info || info->si_code != SI_TIMER || info->si_value.sival_int != SAMPLER_TIMER_TAG + k) {
    chain_previous(k, sig, info, uctx);
    errno = saved_errno;
    return;
  }
  sampler_thread_t *t = tls_self;
  if (!t) {
    atomic_fetch_add_explicit(&sampler.lost, 1, memory_order_relaxed);
    errno = saved_errno;
    return;
  }
  if (atomic_exchange(&t->busy, 1)) {
    /* Nested in another of our handlers on this thread (cannot happen
     * while both signals block each other; kept as a guard). */
    ++t->info.dropped;
    errno = saved_errno;
    return;
  }
  if (!atomic_load(&sampler.stopping) && atomic_load_explicit(&t->live, memory_order_relaxed) &&
      atomic_load_explicit(&sampler.window_open, memory_order_relaxed))
    record_sample(t, k, uctx);
  atomic_store(&t->busy, 0);
  errno = saved_errno;
}

/* ---- threads ---------------------------------------------------------------- */

static void timer_start_locked(sampler_thread_t *t, int k) {
  if (!atomic_load(&sampler.active[k]) || t->has_timer[k])
    return;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = sampler.signo[k];
  sev.sigev_value.sival_int = SAMPLER_TIMER_TAG + k;
  sev.sigev_notify_thread_id = t->info.tid;
  clockid_t clock = k == SAMPLER_CPUTIME ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  if (timer_create(clock, &sev, &t->timer[k]) != 0) {
    static atomic_bool told;
    if (!atomic_exchange(&told, true))
      xpt_msg("xptrace: cannot create a %s sampling timer: %s; threads without one are not sampled\n",
              clock_names[k], strerror(errno));
    return;
  }
  double period = 1.0 / cfg.freq[k];
  struct itimerspec spec;
  spec.it_interval.tv_sec = (time_t)period;
  spec.it_interval.tv_nsec = (long)((period - (double)(time_t)period) * 1e9);
  if (spec.it_interval.tv_sec == 0 && spec.it_interval.tv_nsec == 0)
    spec.it_interval.tv_nsec = 1;
  spec.it_value = spec.it_interval;
  timer_settime(t->timer[k], 0, &spec, NULL);
  t->has_timer[k] = true;
}

static void thread_begin(bool is_main) {
  if (tls_self || atomic_load(&sampler.stopping))
    return;
  sampler_thread_t *t = calloc(1, sizeof *t);
  if (!t)
    return;
  t->info.tid = sampler_gettid();
  t->current = buffer_map();
  pthread_mutex_lock(&sampler.registry_lock);
  t->info.index = is_main ? 0 : sampler.next_index++;
  t->next = sampler.threads;
  sampler.threads = t;
  tls_self = t;
  atomic_store(&t->live, true);
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
    timer_start_locked(t, k);
  pthread_mutex_unlock(&sampler.registry_lock);
}

static void thread_read_name(sampler_thread_t *t) {
  char name[32] = "";
  if (t->info.tid == sampler_gettid()) {
    prctl(PR_GET_NAME, name, 0, 0, 0);
  } else {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)t->info.tid);
    FILE *f = fopen(path, "r");
    if (f) {
      if (!fgets(name, sizeof name, f))
        name[0] = '\0';
      fclose(f);
    }
    name[strcspn(name, "\n")] = '\0';
  }
  if (name[0])
    snprintf(t->info.name, sizeof t->info.name, "%s", name);
}

/* Called by the thread itself as it ends: no more samples, its partial
 * buffer goes to the writer. */
static void thread_end(void *unused) {
  (void)unused;
  sampler_thread_t *t = tls_self;
  if (!t)
    return;
  pthread_mutex_lock(&sampler.registry_lock);
  thread_delete_timers_locked(t, -1);
  bool was_live = atomic_exchange(&t->live, false);
  if (was_live)
    thread_read_name(t);
  pthread_mutex_unlock(&sampler.registry_lock);
  tls_self = NULL;
  if (!was_live)
    return; /* the exit flush took its buffer */
  sample_buffer_t *b = t->current;
  t->current = NULL;
  if (b && b->count)
    handoff_push(b);
  else if (b)
    munmap(b, b->map_size);
}

typedef struct thread_start {
  void *(*routine)(void *);
  void *arg;
} thread_start_t;

static void *thread_trampoline(void *raw) {
  thread_start_t start = *(thread_start_t *)raw;
  free(raw);
  thread_begin(false);
  void *result;
  pthread_cleanup_push(thread_end, NULL);
  result = start.routine(start.arg);
  pthread_cleanup_pop(1);
  return result;
}

/* Interposed: every new thread starts its timers before the user's code
 * and stops them as it ends (return, pthread_exit or cancellation). */
__attribute__((visibility("default"))) int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                                                          void *(*routine)(void *), void *arg) {
  pthread_create_fn real = real_pthread_create();
  if (!real)
    return EAGAIN;
  if (!sampler.loaded || atomic_load(&sampler.stopping))
    return real(thread, attr, routine, arg);
  thread_start_t *start = malloc(sizeof *start);
  if (!start)
    return real(thread, attr, routine, arg);
  start->routine = routine;
  start->arg = arg;
  int rc = real(thread, attr, thread_trampoline, start);
  if (rc != 0)
    free(start);
  return rc;
}

/* Our own threads never take samples nor the program's signals. */
static int start_internal_thread(void *(*fn)(void *), void *arg) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t id;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_create_fn real = real_pthread_create();
  int rc = real ? real(&id, &attr, fn, arg) : EAGAIN;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
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
  for (size_t i = 0; i < cfg.nperiods; ++i) {
    const sampler_period_t *p = &cfg.periods[i];
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

static void windows_start(void) {
  atomic_store(&sampler.window_open, cfg.nperiods == 0);
  if (cfg.nperiods == 0)
    return;
  if (pthread_getcpuclockid(pthread_self(), &sampler.main_cpu_clock) != 0)
    sampler.main_cpu_clock = CLOCK_PROCESS_CPUTIME_ID;
  if (start_internal_thread(controller_main, NULL) != 0) {
    xpt_msg("xptrace: cannot start the sampling period thread; sampling the whole run\n");
    atomic_store(&sampler.window_open, true);
  }
}

/* ---- output -------------------------------------------------------------------- */

/* The output folder: the common one, except for a program exec'd by a
 * sampled process (same XPTRACE_OUTPUT): "<dir>/<program>-<pid>", so that
 * it does not overwrite the first program's files. */
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

/* Stop every sampler, collect every buffer, write the report.  Once. */
static void sampler_finish(void) {
  if (atomic_load(&sampler.finished))
    return;
  atomic_store(&sampler.stopping, true);
  pthread_mutex_lock(&sampler.registry_lock);
  for (sampler_thread_t *t = sampler.threads; t; t = t->next)
    thread_delete_timers_locked(t, -1);

  size_t nthreads = 0;
  for (sampler_thread_t *t = sampler.threads; t; t = t->next)
    ++nthreads;
  sampler_thread_info_t *infos = calloc(nthreads ? nthreads : 1, sizeof *infos);
  sampler_summary_t summary;
  memset(&summary, 0, sizeof summary);
  summary.dropped = atomic_load(&sampler.lost);
  size_t i = 0;
  for (sampler_thread_t *t = sampler.threads; t; t = t->next) {
    /* A handler still running elsewhere finishes its sample first. */
    for (int spin = 0; atomic_load(&t->busy) && spin < 100000; ++spin)
      sched_yield();
    if (atomic_exchange(&t->live, false)) {
      thread_read_name(t);
      sample_buffer_t *b = t->current;
      t->current = NULL;
      if (b && b->count)
        handoff_push(b);
      else if (b)
        munmap(b, b->map_size);
    }
    summary.dropped += t->info.dropped;
    if (infos)
      infos[i++] = t->info;
  }
  pthread_mutex_unlock(&sampler.registry_lock);
  summary.nthreads = infos ? i : 0;
  /* Programs exec'd by the sampled one (make, sh -c ...): one line each. */
  summary.brief = !sampler.forked && sampler.root_pid != getpid();
  summary.threads = infos;
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k) {
    summary.on[k] = sampler.signo[k] != 0;
    summary.freq[k] = cfg.freq[k];
    summary.signal_note[k] = sampler.stop_note[k];
  }

  pthread_mutex_lock(&sampler.report_lock);
  handoff_drain_locked();
  uint64_t samples = 0;
  for (size_t j = 0; j < summary.nthreads; ++j)
    for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
      samples += infos[j].samples[k];
  /* Forked children and exec'd programs with nothing to show (shell
   * subshells, short helpers) stay silent and leave no folder. */
  bool quiet = (sampler.forked || sampler.root_pid != getpid()) && samples == 0 && summary.dropped == 0;
  if (!atomic_exchange(&sampler.finished, true) && !quiet) {
    char buf[PATH_MAX];
    const char *dir = sampler_output_dir(buf, sizeof buf);
    if (dir)
      sampler_report_write(dir, &summary);
    else
      xpt_msg("xptrace: sampler: no output folder; samples not written\n");
  }
  pthread_mutex_unlock(&sampler.report_lock);
  free(infos);
}

static void sampler_flush(void *ctx, enum xpt_flush_reason reason) {
  (void)ctx;
  if (reason == XPT_FLUSH_FORK_CHILD)
    return; /* sampler_fork_child resets */
  sampler_finish();
}

/* ---- fork ------------------------------------------------------------------------- */

static void sampler_fork_prepare(void) {
  pthread_mutex_lock(&sampler.report_lock);
  pthread_mutex_lock(&sampler.registry_lock);
}

static void sampler_fork_parent(void) {
  pthread_mutex_unlock(&sampler.registry_lock);
  pthread_mutex_unlock(&sampler.report_lock);
}

/* The child has one thread, no timers and no helper threads; what was
 * recorded is the parent's.  Start afresh with the forking thread. */
static void sampler_fork_child(void) {
  pthread_mutex_init(&sampler.registry_lock, NULL);
  pthread_mutex_init(&sampler.report_lock, NULL);
  sampler.forked = true;
  sample_buffer_t *b = atomic_exchange(&sampler.full, NULL);
  while (b) {
    sample_buffer_t *next = b->next;
    munmap(b, b->map_size);
    b = next;
  }
  sampler_report_reset();
  sampler_thread_t *self = tls_self;
  sampler_thread_t *t = sampler.threads;
  while (t) {
    sampler_thread_t *next = t->next;
    if (t != self) {
      if (t->current)
        munmap(t->current, t->current->map_size);
      free(t);
    }
    t = next;
  }
  sampler.threads = NULL;
  sampler.next_index = 1;
  atomic_store(&sampler.lost, 0);
  sem_destroy(&sampler.writer_wake);
  sem_init(&sampler.writer_wake, 0, 0);
  if (atomic_load(&sampler.finished) || atomic_load(&sampler.stopping)) {
    if (self)
      free(self);
    tls_self = NULL;
    return; /* forked while exiting: nothing more to sample */
  }
  if (self) {
    memset(&self->info, 0, sizeof self->info);
    self->info.tid = sampler_gettid();
    self->next = NULL;
    for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
      self->has_timer[k] = false; /* timers are not inherited */
    if (self->current)
      self->current->count = 0;
    sampler.threads = self;
    for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
      timer_start_locked(self, k);
  } else {
    thread_begin(true);
  }
  start_internal_thread(writer_main, NULL);
  windows_start();
}

/* ---- load --------------------------------------------------------------------------- */

/* A free real-time signal for the real-time sampler. */
static int pick_realtime_signal(void) {
  for (int sig = SIGRTMIN + 3; sig <= SIGRTMAX; ++sig) {
    struct sigaction cur;
    if (real_sigaction(sig, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
        cur.sa_handler == SIG_DFL)
      return sig;
  }
  return 0;
}

static bool install_handler(int k, int sig, const int wanted[SAMPLER_NCLOCKS]) {
  struct sigaction cur;
  if (real_sigaction(sig, NULL, &cur) != 0)
    return false;
  /* An inherited SIG_IGN is no handler: ours ignores what is not ours. */
  if ((cur.sa_flags & SA_SIGINFO) || (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN)) {
    xpt_msg("xptrace: SIG%s already has a handler; %s sampling disabled\n",
            sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", clock_names[k]);
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
  if (real_sigaction(sig, &sa, NULL) != 0) {
    sampler.signo[k] = 0;
    return false;
  }
  return true;
}

__attribute__((constructor)) static void sampler_load(void) {
  settings_read();
  const char *root = getenv("XPTRACE_SAMPLE_ROOT_PID");
  sampler.root_pid = root && *root ? (pid_t)atoi(root) : getpid();
  if (!root || !*root) {
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("XPTRACE_SAMPLE_ROOT_PID", pid, 1);
  }
  sem_init(&sampler.writer_wake, 0, 0);
  /* Unwind tables of each thread are cached per thread: no lock shared
   * between handlers. */
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);

  int wanted[SAMPLER_NCLOCKS] = {SIGPROF, 0};
  if (cfg.on[SAMPLER_REALTIME]) {
    wanted[SAMPLER_REALTIME] = pick_realtime_signal();
    if (!wanted[SAMPLER_REALTIME])
      xpt_msg("xptrace: no free real-time signal; realtime sampling disabled\n");
  }
  bool any = false;
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k) {
    if (cfg.on[k] && wanted[k] && install_handler(k, wanted[k], wanted)) {
      atomic_store(&sampler.active[k], true);
      any = true;
    }
  }
  if (!any)
    return;
  sampler.loaded = true;
  sampler.next_index = 1;
  pthread_atfork(sampler_fork_prepare, sampler_fork_parent, sampler_fork_child);
  xpt_register_flush(sampler_flush, NULL);
  if (start_internal_thread(writer_main, NULL) != 0)
    xpt_msg("xptrace: cannot start the sampler's writer thread; buffers kept until exit\n");
  windows_start();
  thread_begin(true);
}
