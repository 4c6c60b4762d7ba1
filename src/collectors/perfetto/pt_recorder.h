/* libxpti_perfetto.so internals shared by the recorder's files:
 * pt_collector.c (the hot path, descriptions, set-up, the end of the run)
 * and pt_chunks.c (chunks, thread states, ring owners). */
#ifndef PT_RECORDER_H
#define PT_RECORDER_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "xpt_rec.h"
#include "xpt_rec_writer.h"
#include "xptrace/xptrace_protocol.h"

#define PT_HIDDEN __attribute__((visibility("hidden")))
/* Code on the direct path of function tracing (xptraceTryRecordFor):
 * general-purpose registers only, so the trampolines that reach it need
 * not save the vector registers.  Inlines into ordinary code as well. */
#if defined(__x86_64__)
#define PT_GPR __attribute__((target("general-regs-only"), always_inline))
#else
#define PT_GPR __attribute__((always_inline))
#endif

/* ---- clock: raw TSC ticks when invariant, else MONOTONIC ns ---- */

#if defined(__x86_64__)
#define PT_HAVE_TSC 1
static inline PT_GPR uint64_t pt_ticks(void) { return __rdtsc(); }
#else
#define PT_HAVE_TSC 0
static inline uint64_t pt_ticks(void) { return 0; } /* never chosen */
#endif

static inline uint64_t pt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- configuration (read once, at set-up) ---- */
PT_HIDDEN extern bool pt_use_tsc;
PT_HIDDEN extern uint32_t pt_policy;
PT_HIDDEN extern uint64_t pt_budget;
PT_HIDDEN extern uint32_t pt_chunk_size;
PT_HIDDEN extern uint32_t pt_nest_max; /* levels tracked, <= PT_NEST_LEVELS */

/* ---- the recording and the threads writing it ---- */

/* Open slices tracked per thread (levels); deeper begins are dropped
 * with their ends.  The level count is also capped by the chunk size. */
enum { PT_NEST_LEVELS = 4096, PT_NEST_WORDS = PT_NEST_LEVELS / 64 };
/* pt_class[type & 0xff]: what the hot path needs to know of a type. */
enum { PT_C_SLOW = 1, PT_C_BEGIN = 2, PT_C_END = 4 };
#define PT_SEEN_EMPTY XPT_REC_SEEN_EMPTY

struct pt_rthread {
  /* First: function tracing writes through it (xpt_rec_writer.h).  Its
   * busy flag is set while this thread records: a signal handler
   * recording on the same thread meanwhile would write over the record
   * being made, so its event is counted as dropped instead (rare: a
   * window of a few ns).  Its hold: whole slices only: every record but
   * an end leaves `hold` bytes free in the chunk, an end's room for each
   * recorded open begin, so that an end is never dropped when its begin
   * was recorded; the end of a begin that was dropped is dropped too
   * (bit set in lost). */
  struct xpt_rec_writer w;
  struct xpt_rec_chunk *prev; /* the chunk before, still mapped: an
                                 interrupted append may be writing into it */
  uint64_t cur_index;
  struct pt_owner *own; /* ring: what it holds */
  pid_t pid, tid;
  uint64_t segment;  /* segment number of this thread */
  bool own_desc;     /* descriptions went into its own chunk: forget them with it */
  uint32_t depth;
  uint64_t lost[PT_NEST_WORDS];
  uint64_t gated[PT_NEST_WORDS]; /* of the lost: begun outside a time window */
  struct pt_rthread *next_all, *next_free;
  /* The dispatcher's stamp record of this thread (NULL: none): this
   * collector's time stamps go there for the collectors called after it. */
  xptrace_stamp_t *stamp;
};

struct pt_recording {
  int fd, spill_fd;
  uint8_t *base; /* the whole file, shared-mapped */
  size_t map_len;
  struct xpt_rec_header *h; /* at base */
  uint64_t max_chunks;      /* ring */
  struct pt_owner **owner;   /* ring: chunk -> owner (NULL: free or dictionary) */
  uint64_t *chunk_gen;       /* ring: when each chunk was taken */
  pid_t pid;                 /* the process the recording belongs to */
  char dir[4096], name[64];
  bool failed;
};
PT_HIDDEN extern struct pt_recording pt_rec;

PT_HIDDEN extern pthread_mutex_t pt_ring_lock;
PT_HIDDEN extern pthread_mutex_t pt_free_lock;
PT_HIDDEN extern struct pt_rthread *_Atomic pt_all;
PT_HIDDEN extern struct pt_rthread *pt_free;
PT_HIDDEN extern pthread_key_t pt_key;
PT_HIDDEN extern _Atomic uint64_t pt_lost_early; /* before any recording could be made */

PT_HIDDEN extern __thread struct pt_rthread *pt_tls __attribute__((tls_model("initial-exec")));

#define pt_seen_slot XPT_REC_SEEN_SLOT

/* A begin's fate: recorded (its end's room now held back), dropped, or
 * outside the time windows (not a drop). */
enum pt_fate { PT_RECORDED, PT_DROPPED, PT_GATED };

/* The thread's open levels are full: its oldest is taken as ended
 * elsewhere (a begin whose end another thread sends: a task handed on, a
 * request completed by a runtime thread) and its end's room given back,
 * so that the thread records on (a fixed limit dropped every begin after
 * 4,096 such).  Were its end to come here after all, it is kept as an
 * end with no open begin, which the finisher pairs by value. */
static inline void pt_nest_evict_oldest(struct pt_rthread *t) {
  if (!(t->lost[0] & 1))
    t->w.hold -= (uint32_t)sizeof(struct xpt_rec_raw);
  for (unsigned i = 0; i < PT_NEST_WORDS; i++) {
    uint64_t next_lost = i + 1 < PT_NEST_WORDS ? t->lost[i + 1] : 0;
    uint64_t next_gated = i + 1 < PT_NEST_WORDS ? t->gated[i + 1] : 0;
    t->lost[i] = t->lost[i] >> 1 | next_lost << 63;
    t->gated[i] = t->gated[i] >> 1 | next_gated << 63;
  }
  t->depth--;
}

static inline PT_GPR void pt_nest_push(struct pt_rthread *t, enum pt_fate fate) {
  uint32_t d = t->depth++;
  if (d >= pt_nest_max)
    return; /* too deep: dropped by the caller, its end with it */
  uint64_t bit = 1ull << (d & 63);
  if (fate == PT_RECORDED) {
    t->lost[d >> 6] &= ~bit;
    t->w.hold += (uint32_t)sizeof(struct xpt_rec_raw);
  } else {
    t->lost[d >> 6] |= bit;
  }
  if (fate == PT_GATED)
    t->gated[d >> 6] |= bit;
  else
    t->gated[d >> 6] &= ~bit;
}

/* An end takes its begin's fate (a lost begin's end goes too).  An end
 * with no open begin (recording started inside the slice) is kept: the
 * finisher removes what stays unpaired. */
static inline PT_GPR enum pt_fate pt_nest_pop(struct pt_rthread *t) {
  if (t->depth == 0)
    return PT_RECORDED;
  uint32_t d = --t->depth;
  if (d >= pt_nest_max)
    return PT_DROPPED;
  if ((t->lost[d >> 6] >> (d & 63)) & 1)
    return ((t->gated[d >> 6] >> (d & 63)) & 1) ? PT_GATED : PT_DROPPED;
  t->w.hold -= (uint32_t)sizeof(struct xpt_rec_raw);
  return PT_RECORDED;
}

/* For the collectors called after this one in the same notification. */
static inline PT_GPR void pt_publish_stamp(struct pt_rthread *t, bool tsc, uint64_t ts) {
  xptrace_stamp_t *s = t->stamp;
  if (s) {
    s->stamped = s->seq;
    s->stamp = ts;
    s->clock = tsc ? XPTRACE_STAMP_TSC : XPTRACE_STAMP_MONOTONIC_NS;
  }
}

/* Whether the innermost open begin was recorded (pt_nest_pop would say
 * PT_RECORDED), without popping it. */
static inline PT_GPR bool pt_nest_top_recorded(const struct pt_rthread *t) {
  if (t->depth == 0)
    return true;
  uint32_t d = t->depth - 1;
  return d < pt_nest_max && !((t->lost[d >> 6] >> (d & 63)) & 1);
}

/* ---- pt_chunks.c ---- */
PT_HIDDEN void pt_drop(uint64_t n);
PT_HIDDEN struct xpt_rec_chunk *pt_chunk_map(uint64_t index);
PT_HIDDEN void pt_chunk_start(struct xpt_rec_chunk *c, uint32_t kind);
PT_HIDDEN uint64_t pt_chunk_fresh(void);
PT_HIDDEN void pt_chunk_seal(struct xpt_rec_chunk *c);
PT_HIDDEN void pt_block_signals(sigset_t *old);
PT_HIDDEN void pt_restore_signals(const sigset_t *old);
PT_HIDDEN void pt_append(uint8_t *data, uint32_t off, const struct xpt_rec_raw *r, const void *a,
                         uint32_t alen, const void *b, uint32_t blen, const void *c,
                         uint32_t clen);
PT_HIDDEN bool pt_next_chunk(struct pt_rthread *t);
PT_HIDDEN uint8_t *pt_reserve(struct pt_rthread *t, uint32_t size, uint32_t keep,
                              struct xpt_rec_chunk **chunk, uint32_t *end);
PT_HIDDEN void pt_commit(struct pt_rthread *t, struct xpt_rec_chunk *c, uint32_t end);
PT_HIDDEN struct pt_rthread *pt_thread_new(void);
PT_HIDDEN void pt_thread_exit(void *p);
/* In a forked child: the parent's owners are the parent's. */
PT_HIDDEN void pt_chunks_fork_child(void);

#endif /* PT_RECORDER_H */
