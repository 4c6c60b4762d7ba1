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
#include <sys/types.h>

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

/* sampler.c: block / restore the sampler's signals on this thread. */
SAMPLER_HIDDEN void sampler_block_signals(sigset_t *old);
SAMPLER_HIDDEN void sampler_unblock_signals(const sigset_t *old);

#endif /* XPTRACE_SAMPLER_INTERNAL_H */
