/* xptrace timer sampler — shared between the signal side (sampler.c) and
 * the recording file (sampler_rec.c).  Everything here is hidden. */
#ifndef XPTRACE_SAMPLER_INTERNAL_H
#define XPTRACE_SAMPLER_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <sys/types.h>
#include <time.h>

#include "sampler_config.h"
#include "sampler_rec.h"

#define SAMPLER_HIDDEN __attribute__((visibility("hidden")))

typedef struct srec_setup {
  bool on[SAMPLER_NCLOCKS];
  double freq[SAMPLER_NCLOCKS];
  unsigned depth;
  uint32_t flags;
} srec_setup_t;

/* The mapped header, or NULL when this process does not record. */
extern SAMPLER_HIDDEN srec_header_t *srec_hdr;

SAMPLER_HIDDEN uint64_t srec_now(void);
/* Make and map the recording in `dir`.  0, or -1 after one line. */
SAMPLER_HIDDEN int srec_open(const char *dir, const srec_setup_t *setup);
/* A forked child drops the parent's recording (mapping, descriptor) and
 * unlocks the meta lock the fork's prepare took. */
SAMPLER_HIDDEN void srec_forget(void);
SAMPLER_HIDDEN void srec_flag(uint32_t flag);

/* Async-signal-safe: room for `size` bytes in *cp (a new chunk when it
 * is full), or NULL; then srec_commit makes the record visible. */
SAMPLER_HIDDEN void *srec_reserve(srec_chunk_t **cp, size_t size, uint32_t owner);
SAMPLER_HIDDEN void srec_commit(srec_chunk_t *c, size_t size);
SAMPLER_HIDDEN void srec_lost(void);

/* Metadata: under srec_lock, with the sampler signals blocked. */
SAMPLER_HIDDEN void srec_lock(void);
SAMPLER_HIDDEN void srec_unlock(void);
SAMPLER_HIDDEN void srec_thread_locked(enum srec_kind kind, uint32_t index, pid_t tid, uint64_t cpu_ns,
                                       const uint64_t weight[SAMPLER_NCLOCKS], bool blocked,
                                       const char *name);
/* A record of any kind among the metadata. */
SAMPLER_HIDDEN void *srec_reserve_meta_locked(size_t size);
SAMPLER_HIDDEN void srec_commit_meta_locked(size_t size);
/* Record objects loaded since the last scan (all of them if `force`).
 * Takes the lock itself, never while the loader's lock is held by us. */
SAMPLER_HIDDEN void srec_scan_maps(bool force);
/* Fork: prepare waits for a scan in progress; parent and child unlock. */
SAMPLER_HIDDEN void srec_scan_fork_lock(void);
SAMPLER_HIDDEN void srec_scan_fork_unlock(void);
/* Reserve disk blocks ahead of the chunks in use (helper thread). */
SAMPLER_HIDDEN void srec_grow_locked(void);
SAMPLER_HIDDEN srec_chunk_t *srec_spare_take_locked(void);
SAMPLER_HIDDEN void srec_spare_give_locked(srec_chunk_t *c);
/* Normal exit: end times, the EXITED flag. */
SAMPLER_HIDDEN void srec_exit_locked(void);

/* ---- the sampler's state (sampler.c, sampler_setup.c) ---- */

typedef struct sampler_thread {
  struct sampler_thread *next; /* registry */
  uint32_t index;
  pid_t tid;
  clockid_t cpu_clock;
  timer_t timer[SAMPLER_NCLOCKS];
  bool has_timer[SAMPLER_NCLOCKS];
  srec_chunk_t *chunk;              /* touched only by this thread */
  _Atomic uint64_t weight[SAMPLER_NCLOCKS]; /* weighted samples taken */
  /* For the CPU time the tick did not sample (below): the CPU-time
   * timer's start and first expiry, the start routine, and the frames
   * that called it. */
  uint64_t timer_cpu0, timer_first;
  bool cpu_timer_started;
  void *routine;
  void *base[16];
  int nbase;
  atomic_bool live;                 /* the handler may record */
  atomic_int busy;                  /* the handler is running on this thread */
} sampler_thread_t;

typedef struct sampler_state {
  bool loaded;
  bool quiet;                              /* the launcher reports (XPTRACE_FINISHER=launcher) */
  int signo[SAMPLER_NCLOCKS];              /* 0: that clock is not sampled */
  struct sigaction before[SAMPLER_NCLOCKS]; /* what the program had */
  atomic_bool active[SAMPLER_NCLOCKS];     /* timers may be created */
  atomic_bool window_open;
  atomic_bool stopping;
  atomic_bool finished;
  pthread_mutex_t registry_lock;             /* threads list, timers */
  sampler_thread_t *threads;
  uint32_t next_index;
  clockid_t main_cpu_clock;
  pid_t root_pid;                            /* first sampled process of the tree */
  bool forked;                               /* this process is a fork of a sampled one */
  char dir[PATH_MAX + 32];                   /* where the recording is */
} sampler_state_t;
extern SAMPLER_HIDDEN sampler_state_t sampler;

/* The settings, read once at load (sampler_setup.c). */
typedef struct sampler_cfg {
  bool on[SAMPLER_NCLOCKS];
  double freq[SAMPLER_NCLOCKS];
  unsigned depth;
  sampler_period_t periods[SAMPLER_MAX_PERIODS];
  size_t nperiods;
} sampler_cfg_t;
extern SAMPLER_HIDDEN sampler_cfg_t sampler_cfg;
extern SAMPLER_HIDDEN const char *const sampler_clock_names[SAMPLER_NCLOCKS];

/* sampler_setup.c */
SAMPLER_HIDDEN void sampler_settings_read(void);
/* Open the --periods windows in turn (a thread of ours), or the whole run. */
SAMPLER_HIDDEN void sampler_windows_start(void);
/* The helper thread: disk blocks ahead, libraries loaded since. */
SAMPLER_HIDDEN void *sampler_helper_main(void *unused);
/* Make the recording in this process's output folder; false after one line. */
SAMPLER_HIDDEN bool sampler_recording_start(uint32_t flags);
/* A free real-time signal for the real-time sampler, or 0. */
SAMPLER_HIDDEN int sampler_pick_realtime_signal(void);
/* Our handler on `sig` for clock k (blocking all of `wanted`); false when
 * the program has one of its own there (said unless quiet). */
SAMPLER_HIDDEN bool sampler_install_handler(int k, int sig, const int wanted[SAMPLER_NCLOCKS]);

/* sampler.c: the program's sigaction under ours; the signal handler; a
 * thread of ours (all signals blocked, never sampled). */
SAMPLER_HIDDEN int sampler_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
SAMPLER_HIDDEN void sampler_on_signal(int sig, siginfo_t *info, void *uctx);
SAMPLER_HIDDEN int sampler_start_thread(void *(*fn)(void *), void *arg);

/* sampler.c: block / restore the sampler's signals on this thread. */
SAMPLER_HIDDEN void sampler_block_signals(sigset_t *old);
SAMPLER_HIDDEN void sampler_unblock_signals(const sigset_t *old);

#endif /* XPTRACE_SAMPLER_INTERNAL_H */
