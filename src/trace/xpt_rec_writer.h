/* The trace collector's per-thread writer, as function tracing writes
 * into it directly (libxptrace_functions.so, src/functions/fn_core.c).
 *
 * Two calls per traced function, at tens of millions a second, cannot
 * afford the collector's general recording (its type classes, its
 * nesting bits, a call into another library).  Function tracing already
 * keeps each thread's calls on a shadow stack, so it keeps their
 * nesting itself and appends compact records (xpt_rec.h) to the
 * thread's current chunk, under the collector's rules:
 *  - set busy while appending (a signal handler that records on this
 *    thread meanwhile drops its event, counted), and append only when it
 *    is clear;
 *  - a begin only inside a time window (*open), for a uid already
 *    described (seen), with room for itself, the ends held back (hold)
 *    and its own end, and while hold stays under hold_limit; it then
 *    holds its end's XPT_REC_COMPACT_SIZE bytes;
 *  - an end of such a begin always has room: it releases what its begin
 *    held;
 *  - publish by storing off into the chunk's committed word (release).
 * Whatever the rules refuse goes through the ordinary notification,
 * with its end: the collector then decides (describe, next chunk, drop).
 *
 * The collector exports `const struct xpt_rec_direct *xptraceRecordDirect(void)`. */
#ifndef XPT_REC_WRITER_H
#define XPT_REC_WRITER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "xpt_rec.h"

#define XPT_REC_DIRECT_VERSION 1u
#define XPT_REC_SEEN 256u
#define XPT_REC_SEEN_EMPTY UINT64_MAX

struct xpt_rec_writer {
  uint8_t *data;             /* the current chunk's records */
  uint32_t cap, off;         /* its capacity, the next record's offset */
  struct xpt_rec_chunk *cur; /* NULL: no chunk yet (data, cap, off are 0) */
  /* Room kept free after every record but an end: the ends of the slices
   * open on this thread. */
  uint32_t hold;
  /* Set while this thread appends: see above. */
  volatile bool busy;
  uint64_t seen[XPT_REC_SEEN]; /* uids described, direct-mapped */
};

/* A macro, not a function: it inlines into code of any target options
 * (the trampolines' general-registers-only paths). */
#define XPT_REC_SEEN_SLOT(uid) ((uint32_t)(((uint64_t)(uid)*0x9e3779b97f4a7c15ull) >> 56))

struct xpt_rec_direct {
  uint32_t version;    /* XPT_REC_DIRECT_VERSION */
  uint32_t hold_limit; /* a begin needs hold below this */
  const _Atomic bool *open; /* inside a time window (or no windows) */
  /* The calling thread's writer slot: a stable address for the thread's
   * life, whose content is its writer or NULL (none yet, or ended). */
  struct xpt_rec_writer *const *(*slot)(void);
};

#endif /* XPT_REC_WRITER_H */
