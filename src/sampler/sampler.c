/* xptrace timer sampler — statistical call-stack sampling of any program,
 * loaded with LD_PRELOAD (see docs/sampler.md, "The timer method").
 *
 * Each thread gets POSIX timers that signal that very thread
 * (SIGEV_THREAD_ID): SIGPROF on its CPU-time clock, a real-time signal on
 * CLOCK_MONOTONIC, the first expiry at a random phase of the period.  The
 * handler unwinds the interrupted stack with libunwind straight into the
 * recording, a file in the output folder mapped shared (sampler_rec.c),
 * weighting the sample by 1 + the timer's overruns.  No malloc, lock or
 * I/O in the handler.  The launcher reads the recording after the
 * program ended, however it ended, and writes the results. */
#include <dlfcn.h>
#include <stdbool.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

/* libunwind is opened RTLD_LOCAL at load time, not linked: linked into a
 * preloaded library, its _Unwind_* functions would come before libgcc_s's
 * in the program's global scope and take over the program's C++ exceptions
 * (and sanitizers' stack traces, which then deadlock on its lock). */
#define SAMPLER_STR2(x) #x
#define SAMPLER_STR(x) SAMPLER_STR2(x)
static struct {
  int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
  int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
  int (*step)(unw_cursor_t *);
  int (*backtrace)(void **, int);
  int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
  unw_addr_space_t *local_as;
} unw;

static bool unwinder_open(void) {
#ifdef XPTRACE_UNWIND_LINKED
  /* Sanitizer builds: LeakSanitizer's scan at exit crashes on a dlopen'ed
   * library's thread-local storage (gcc 12), so libunwind is linked there. */
  unw.init_local2 = unw_init_local2;
  unw.get_reg = unw_get_reg;
  unw.step = unw_step;
  unw.backtrace = unw_backtrace;
  unw.set_caching_policy = unw_set_caching_policy;
  unw.local_as = &unw_local_addr_space;
  return true;
#endif
  void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return false;
  *(void **)&unw.init_local2 = dlsym(h, SAMPLER_STR(unw_init_local2));
  *(void **)&unw.get_reg = dlsym(h, SAMPLER_STR(unw_get_reg));
  *(void **)&unw.step = dlsym(h, SAMPLER_STR(unw_step));
  *(void **)&unw.backtrace = dlsym(h, SAMPLER_STR(unw_backtrace));
  *(void **)&unw.set_caching_policy = dlsym(h, SAMPLER_STR(unw_set_caching_policy));
  unw.local_as = dlsym(h, SAMPLER_STR(unw_local_addr_space));
  return unw.init_local2 && unw.get_reg && unw.step && unw.backtrace && unw.set_caching_policy &&
         unw.local_as;
}

#include "sampler_internal.h"
#include "xpt_collector.h"
#include "xpt_fd.h"

/* libunwind keeps a pipe to check addresses with, made at its set-up and
 * made again inside a handler when the program closed it.  Made while
 * this thread runs the unwinder, its two ends are raised out of the
 * program's way (xpt_fd.h); every other caller gets the plain call. */
static __thread bool tls_unwinding __attribute__((tls_model("initial-exec")));

__attribute__((visibility("default"))) int pipe2(int fds[2], int flags) {
  if (syscall(SYS_pipe2, fds, flags) != 0)
    return -1;
  if (tls_unwinding) {
    fds[0] = xpt_fd_raise(fds[0]);
    fds[1] = xpt_fd_raise(fds[1]);
  }
  return 0;
}

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* Tags the sigev value of our timers, so that a program's own timer on
 * the same signal is told apart. */
#define SAMPLER_TIMER_TAG 0x5a3e1000


/* ---- state ----------------------------------------------------------------- */


static __thread sampler_thread_t *tls_self __attribute__((tls_model("initial-exec")));

SAMPLER_HIDDEN sampler_state_t sampler = {
    .registry_lock = PTHREAD_MUTEX_INITIALIZER,
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

int sampler_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
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
    for (sampler_thread_t *t = sampler.threads; t; t = t->next)
      thread_delete_timers_locked(t, k);
    srec_flag(k == SAMPLER_CPUTIME ? SREC_FLAG_SIGPROF_TAKEN : SREC_FLAG_RT_TAKEN);
    /* The launcher says it after the run; alone, the library says it now. */
    const char *abbrev = sigabbrev_np(sampler.signo[k]);
    if (!sampler.quiet)
      xpt_msg("xptrace: the program %s SIG%s; %s sampling disabled\n", why, abbrev ? abbrev : "?",
              sampler_clock_names[k]);
  }
  pthread_mutex_unlock(&sampler.registry_lock);
}

/* Interposed: a program that sets its own action for a sampler signal
 * gets it (and sees its own previous action), and that sampler stops. */
__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction *act,
                                                     struct sigaction *old) {
  int k = sampler.loaded ? clock_of_signal(sig) : -1;
  if (k < 0 || !atomic_load(&sampler.active[k]) || (!act && !old))
    return sampler_real_sigaction(sig, act, old);
  if (!act) {
    *old = sampler.before[k];
    return 0;
  }
  sampler_give_up_clock(k, "sets its own action for");
  struct sigaction ignored;
  int rc = sampler_real_sigaction(sig, act, &ignored);
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

/* ---- blocking our signals around metadata ---------------------------------- */

void sampler_block_signals(sigset_t *old) {
  sigset_t set;
  sigemptyset(&set);
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
    if (sampler.signo[k])
      sigaddset(&set, sampler.signo[k]);
  pthread_sigmask(SIG_BLOCK, &set, old);
}

void sampler_unblock_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

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
    sampler_real_sigaction(sig, &dfl, NULL);
    raise(sig);
  } else if (prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
  }
}

static void record_sample(sampler_thread_t *t, int k, uint32_t weight, void *uctx) {
  size_t max = sizeof(srec_sample_t) + sampler_cfg.depth * sizeof(uint64_t);
  srec_sample_t *s = srec_reserve(&t->chunk, max, SREC_OWNER_THREADS);
  if (!s) {
    srec_lost();
    return;
  }
  unw_cursor_t cursor;
  tls_unwinding = true;
  if (unw.init_local2(&cursor, (unw_context_t *)uctx, UNW_INIT_SIGNAL_FRAME) < 0) {
    tls_unwinding = false;
    srec_lost();
    return;
  }
  unsigned n = 0;
  uint8_t truncated = 0;
  for (;;) {
    unw_word_t ip = 0;
    if (unw.get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
      break;
    s->pc[n++] = (uint64_t)ip;
    if (unw.step(&cursor) <= 0)
      break;
    if (n == sampler_cfg.depth) {
      truncated = 1;
      break;
    }
  }
  tls_unwinding = false;
  if (n == 0) {
    srec_lost();
    return;
  }
  s->kind = SREC_SAMPLE;
  s->size = (uint16_t)(sizeof *s + n * sizeof(uint64_t));
  s->thread = t->index;
  s->time_ns = srec_now();
  s->weight = weight;
  s->clock = (uint8_t)k;
  s->truncated = truncated;
  s->depth = (uint16_t)n;
  srec_commit(t->chunk, s->size);
  atomic_fetch_add_explicit(&t->weight[k], weight, memory_order_relaxed);
}

void sampler_on_signal(int sig, siginfo_t *info, void *uctx) {
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
    srec_lost();
    errno = saved_errno;
    return;
  }
  if (atomic_exchange(&t->busy, 1)) {
    /* Nested in another of our handlers on this thread (cannot happen
     * while both signals block each other; kept as a guard). */
    srec_lost();
    errno = saved_errno;
    return;
  }
  /* The kernel checks CPU-time timers at its tick: at rates above it one
   * signal stands for several periods. */
  uint32_t weight = 1u + (uint32_t)(info->si_overrun > 0 ? info->si_overrun : 0);
  if (!atomic_load(&sampler.stopping) && atomic_load_explicit(&t->live, memory_order_relaxed) &&
      atomic_load_explicit(&sampler.window_open, memory_order_relaxed))
    record_sample(t, k, weight, uctx);
  atomic_store(&t->busy, 0);
  errno = saved_errno;
}

/* ---- threads ---------------------------------------------------------------- */

/* A uniform phase in (0, 1]: a thread that runs less than one period
 * still gets its share of samples on average (a fixed first expiry of
 * one whole period never samples short threads). */
static double random_phase(pid_t tid) {
  static _Atomic uint64_t state;
  uint64_t x = atomic_fetch_add(&state, 0x9e3779b97f4a7c15ull) ^ ((uint64_t)tid << 32) ^ srec_now();
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return ((double)(x >> 11) + 1.0) / 9007199254740992.0;
}

static void set_timespec(struct timespec *ts, double seconds) {
  ts->tv_sec = (time_t)seconds;
  ts->tv_nsec = (long)((seconds - (double)ts->tv_sec) * 1e9);
  if (ts->tv_sec == 0 && ts->tv_nsec == 0)
    ts->tv_nsec = 1;
}

static uint64_t thread_cpu_ns(const sampler_thread_t *t) {
  struct timespec ts;
  if (clock_gettime(t->cpu_clock, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void timer_start_locked(sampler_thread_t *t, int k) {
  if (!atomic_load(&sampler.active[k]) || t->has_timer[k])
    return;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = sampler.signo[k];
  sev.sigev_value.sival_int = SAMPLER_TIMER_TAG + k;
  sev.sigev_notify_thread_id = t->tid;
  clockid_t clock = k == SAMPLER_CPUTIME ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  if (timer_create(clock, &sev, &t->timer[k]) != 0) {
    srec_flag(SREC_FLAG_NO_TIMER);
    return;
  }
  double period = 1.0 / sampler_cfg.freq[k];
  struct itimerspec spec;
  set_timespec(&spec.it_interval, period);
  set_timespec(&spec.it_value, period * random_phase(t->tid));
  timer_settime(t->timer[k], 0, &spec, NULL);
  t->has_timer[k] = true;
  if (k == SAMPLER_CPUTIME && !t->cpu_timer_started) {
    t->cpu_timer_started = true;
    t->timer_cpu0 = thread_cpu_ns(t);
    t->timer_first = (uint64_t)spec.it_value.tv_sec * 1000000000u + (uint64_t)spec.it_value.tv_nsec;
  }
}

static void thread_name(pid_t tid, char name[16]) {
  name[0] = '\0';
  if (tid == sampler_gettid()) {
    char buf[32] = "";
    prctl(PR_GET_NAME, buf, 0, 0, 0);
    snprintf(name, 16, "%s", buf);
    return;
  }
  char path[64], buf[64] = "";
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
  FILE *f = fopen(path, "re");
  if (f) {
    if (!fgets(buf, sizeof buf, f))
      buf[0] = '\0';
    fclose(f);
  }
  buf[strcspn(buf, "\n")] = '\0';
  snprintf(name, 16, "%s", buf);
}

/* Whether thread `tid` blocks SIGPROF: for this thread, its mask from
 * before we blocked our signals (`own`); another one's from /proc. */
static bool thread_blocks_sigprof(pid_t tid, const sigset_t *own) {
  if (tid == sampler_gettid())
    return sigismember(own, SIGPROF) == 1;
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
  FILE *f = fopen(path, "re");
  bool blocked = false;
  if (!f)
    return false;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "SigBlk:", 7) == 0) {
      unsigned long long mask = strtoull(line + 7, NULL, 16);
      blocked = (mask >> (SIGPROF - 1)) & 1;
      break;
    }
  fclose(f);
  return blocked;
}

static void thread_begin(bool is_main, void *routine) {
  if (tls_self || atomic_load(&sampler.stopping) || !srec_hdr)
    return;
  sampler_thread_t *t = calloc(1, sizeof *t);
  if (!t)
    return;
  t->routine = routine;
  if (routine) {
    tls_unwinding = true;
    t->nbase = unw.backtrace(t->base, (int)(sizeof t->base / sizeof t->base[0]));
    tls_unwinding = false;
  }
  t->tid = sampler_gettid();
  if (pthread_getcpuclockid(pthread_self(), &t->cpu_clock) != 0)
    t->cpu_clock = CLOCK_THREAD_CPUTIME_ID;
  sigset_t old;
  sampler_block_signals(&old);
  pthread_mutex_lock(&sampler.registry_lock);
  srec_lock();
  t->index = is_main ? 0 : sampler.next_index++;
  t->chunk = srec_spare_take_locked();
  srec_thread_locked(SREC_THREAD, t->index, t->tid, 0, NULL, false, NULL);
  srec_unlock();
  t->next = sampler.threads;
  sampler.threads = t;
  tls_self = t;
  atomic_store(&t->live, true);
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
    timer_start_locked(t, k);
  pthread_mutex_unlock(&sampler.registry_lock);
  sampler_unblock_signals(&old);
}

/* The kernel looks at CPU-time timers at its tick only: a thread that
 * ends between two ticks after its timer expired loses that period (with
 * 500 threads of 2 ms, most of their time).  At its end we know how many
 * periods its CPU time held since its timer started (first expiry at a
 * random phase: unbiased); those not delivered are recorded as a charge
 * naming its start routine, and the launcher spreads them over the stacks
 * captured in threads of that routine (sample_timer.c).  A thread with
 * nothing missing still says its routine (weight 0): its captures join
 * the routine's.  Not with --periods (the windows decide), and not for a
 * thread whose SIGPROF was blocked or taken (the diagnostics say so). */
static void charge_unsampled_locked(sampler_thread_t *t, uint64_t cpu, uint64_t weight[SAMPLER_NCLOCKS]) {
  if (!t->routine || !t->cpu_timer_started || sampler_cfg.nperiods || !atomic_load(&sampler.active[SAMPLER_CPUTIME]))
    return;
  uint64_t period = (uint64_t)(1e9 / sampler_cfg.freq[SAMPLER_CPUTIME]);
  if (period == 0)
    period = 1;
  uint64_t due = cpu < t->timer_cpu0 + t->timer_first ? 0 : 1 + (cpu - t->timer_cpu0 - t->timer_first) / period;
  /* A thread that got under half of its periods blocked SIGPROF or lost
   * it: no guess, the diagnostic tells. */
  if (weight[SAMPLER_CPUTIME] * 2 + 2 < due && due > 4)
    return;
  uint64_t missing = due > weight[SAMPLER_CPUTIME] ? due - weight[SAMPLER_CPUTIME] : 0;
  size_t n = 1 + (size_t)(t->nbase > 0 ? t->nbase : 0);
  if (n > sampler_cfg.depth)
    n = sampler_cfg.depth;
  srec_sample_t *s = srec_reserve_meta_locked(sizeof *s + n * sizeof(uint64_t));
  if (!s)
    return;
  s->kind = SREC_SAMPLE;
  s->size = (uint16_t)(sizeof *s + n * sizeof(uint64_t));
  s->thread = t->index;
  s->time_ns = srec_now();
  s->weight = (uint32_t)(missing > UINT32_MAX ? UINT32_MAX : missing);
  s->clock = SAMPLER_CPUTIME;
  s->truncated = SREC_SAMPLE_CHARGED;
  s->depth = (uint16_t)n;
  s->pc[0] = (uint64_t)(uintptr_t)t->routine;
  for (size_t i = 1; i < n; ++i)
    s->pc[i] = (uint64_t)(uintptr_t)t->base[i - 1];
  srec_commit_meta_locked(s->size);
  weight[SAMPLER_CPUTIME] += s->weight;
}

/* Its CPU time and samples, for the launcher's diagnostics.  The caller
 * holds registry_lock; t takes no more samples. */
static void thread_record_end_locked(sampler_thread_t *t, const sigset_t *own) {
  char name[16];
  thread_name(t->tid, name);
  bool blocked = thread_blocks_sigprof(t->tid, own);
  uint64_t cpu = thread_cpu_ns(t);
  uint64_t weight[SAMPLER_NCLOCKS];
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
    weight[k] = atomic_load_explicit(&t->weight[k], memory_order_relaxed);
  srec_lock();
  charge_unsampled_locked(t, cpu, weight);
  srec_thread_locked(SREC_THREAD_END, t->index, t->tid, cpu, weight, blocked, name);
  srec_spare_give_locked(t->chunk);
  t->chunk = NULL;
  srec_unlock();
}

/* Called by the thread itself as it ends (return, pthread_exit or
 * cancellation): no more samples; its chunk goes to the next thread. */
static void thread_end(void *unused) {
  (void)unused;
  sampler_thread_t *t = tls_self;
  if (!t)
    return;
  sigset_t old;
  sampler_block_signals(&old);
  pthread_mutex_lock(&sampler.registry_lock);
  thread_delete_timers_locked(t, -1);
  if (atomic_exchange(&t->live, false))
    thread_record_end_locked(t, &old);
  tls_self = NULL;
  /* Unlink and free: the registry is only walked under this lock. */
  for (sampler_thread_t **p = &sampler.threads; *p; p = &(*p)->next)
    if (*p == t) {
      *p = t->next;
      free(t);
      break;
    }
  pthread_mutex_unlock(&sampler.registry_lock);
  sampler_unblock_signals(&old);
}

typedef struct thread_start {
  void *(*routine)(void *);
  void *arg;
} thread_start_t;

static void *thread_trampoline(void *raw) {
  thread_start_t start = *(thread_start_t *)raw;
  free(raw);
  thread_begin(false, start.routine);
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

/* The creator waits until the thread runs our code: its start-up (the
 * C library's and a sanitizer's allocations) is then over before the
 * program can fork (gcc 12's ASan left its allocator locked in a child
 * forked at that moment: sampler_fork hung). */
typedef struct internal_start {
  void *(*fn)(void *);
  void *arg;
  _Atomic int running;
} internal_start_t;

static void *internal_trampoline(void *p) {
  internal_start_t *start = p;
  void *(*fn)(void *) = start->fn;
  void *arg = start->arg;
  atomic_store_explicit(&start->running, 1, memory_order_release); /* start is gone after */
  return fn(arg);
}

int sampler_start_thread(void *(*fn)(void *), void *arg) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t id;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_create_fn real = real_pthread_create();
  internal_start_t start = {.fn = fn, .arg = arg, .running = 0};
  int rc = real ? real(&id, &attr, internal_trampoline, &start) : EAGAIN;
  pthread_attr_destroy(&attr);
  if (rc == 0)
    while (!atomic_load_explicit(&start.running, memory_order_acquire))
      sched_yield();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* At normal exit: stop every timer, note each live thread's CPU time and
 * the last libraries.  The launcher (or `xptrace finish`) reports. */
static void sampler_finish(void) {
  if (atomic_load(&sampler.finished))
    return;
  atomic_store(&sampler.stopping, true);
  srec_scan_maps(false); /* libraries loaded since the helper's last look */
  sigset_t old;
  sampler_block_signals(&old);
  pthread_mutex_lock(&sampler.registry_lock);
  for (sampler_thread_t *t = sampler.threads; t; t = t->next)
    thread_delete_timers_locked(t, -1);
  for (sampler_thread_t *t = sampler.threads; t; t = t->next) {
    /* A handler still running elsewhere finishes its sample first. */
    for (int spin = 0; atomic_load(&t->busy) && spin < 100000; ++spin)
      sched_yield();
    if (atomic_exchange(&t->live, false))
      thread_record_end_locked(t, &old);
  }
  srec_lock();
  srec_exit_locked();
  srec_unlock();
  atomic_store(&sampler.finished, true);
  pthread_mutex_unlock(&sampler.registry_lock);
  sampler_unblock_signals(&old);
  if (!sampler.quiet && srec_hdr && !sampler.forked && sampler.root_pid == getpid())
    xpt_msg("xptrace: samples recorded in %s; `xptrace finish %s` writes the report", sampler.dir,
            sampler.dir);
}

static void sampler_flush(void *ctx, enum xpt_flush_reason reason) {
  (void)ctx;
  if (reason == XPT_FLUSH_FORK_CHILD)
    return; /* sampler_fork_child starts afresh */
  sampler_finish();
}

/* ---- fork ------------------------------------------------------------------------- */

static void sampler_fork_prepare(void) {
  srec_scan_fork_lock();
  pthread_mutex_lock(&sampler.registry_lock);
  srec_lock();
}

static void sampler_fork_parent(void) {
  srec_unlock();
  pthread_mutex_unlock(&sampler.registry_lock);
  srec_scan_fork_unlock();
}

/* The child has one thread, no timers and no helper threads; what was
 * recorded is the parent's.  Start a recording of its own with the
 * forking thread. */
static void sampler_fork_child(void) {
  srec_scan_fork_unlock(); /* prepare's locks, held by this thread */
  pthread_mutex_unlock(&sampler.registry_lock);
  srec_forget();
  sampler.forked = true;
  sampler_thread_t *self = tls_self;
  sampler_thread_t *t = sampler.threads;
  while (t) {
    sampler_thread_t *next = t->next;
    free(t);
    t = next;
  }
  sampler.threads = NULL;
  sampler.next_index = 1;
  tls_self = NULL;
  (void)self;
  if (atomic_load(&sampler.finished) || atomic_load(&sampler.stopping))
    return; /* forked while exiting: nothing more to sample */
  if (!sampler_recording_start(SREC_FLAG_FORKED | (sampler_cfg.nperiods ? SREC_FLAG_PERIODS : 0)))
    return;
  thread_begin(true, NULL);
  sampler_start_thread(sampler_helper_main, NULL);
  sampler_windows_start();
}

/* ---- load --------------------------------------------------------------------------- */


__attribute__((constructor)) static void sampler_load(void) {
  sampler_settings_read();
  const char *finisher = getenv("XPTRACE_FINISHER");
  sampler.quiet = finisher && strcmp(finisher, "launcher") == 0;
  const char *root = getenv("XPTRACE_SAMPLE_ROOT_PID");
  sampler.root_pid = root && *root ? (pid_t)atoi(root) : getpid();
  if (!root || !*root) {
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("XPTRACE_SAMPLE_ROOT_PID", pid, 1);
  }
  /* Unwind tables of each thread are cached per thread: no lock shared
   * between handlers. */
  if (!unwinder_open()) {
    xpt_msg("xptrace: the timer sampler needs libunwind.so.8 (%s); sampling disabled\n", dlerror());
    return;
  }
  tls_unwinding = true; /* libunwind sets itself up here, its pipe too */
  unw.set_caching_policy(*unw.local_as, UNW_CACHE_PER_THREAD);
  tls_unwinding = false;

  int wanted[SAMPLER_NCLOCKS] = {SIGPROF, 0};
  if (sampler_cfg.on[SAMPLER_REALTIME]) {
    wanted[SAMPLER_REALTIME] = sampler_pick_realtime_signal();
    if (!wanted[SAMPLER_REALTIME])
      xpt_msg("xptrace: no free real-time signal; realtime sampling disabled\n");
  }
  uint32_t flags = (sampler.root_pid != getpid() ? SREC_FLAG_EXECED : 0) |
                   (sampler_cfg.nperiods ? SREC_FLAG_PERIODS : 0);
  bool any = false;
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k) {
    if (sampler_cfg.on[k] && wanted[k] && sampler_install_handler(k, wanted[k], wanted)) {
      atomic_store(&sampler.active[k], true);
      any = true;
    } else if (sampler_cfg.on[k] && wanted[k] && k == SAMPLER_CPUTIME) {
      flags |= SREC_FLAG_SIGPROF_HELD;
    }
  }
  if (!sampler_recording_start(flags)) {
    for (int k = 0; k < SAMPLER_NCLOCKS; ++k)
      if (atomic_exchange(&sampler.active[k], false))
        sampler_real_sigaction(sampler.signo[k], &sampler.before[k], NULL);
    return;
  }
  if (!any)
    return; /* the recording says why (no sampler could start) */
  sampler.loaded = true;
  sampler.next_index = 1;
  pthread_atfork(sampler_fork_prepare, sampler_fork_parent, sampler_fork_child);
  xpt_register_flush(sampler_flush, NULL);
  if (sampler_start_thread(sampler_helper_main, NULL) != 0)
    xpt_msg("xptrace: cannot start the sampler's helper thread; libraries loaded later may be unnamed\n");
  sampler_windows_start();
  thread_begin(true, NULL);
}
