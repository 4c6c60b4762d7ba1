/* Pairing each thread's begins and ends (pt_pair.c, writer only). */
#ifndef PT_PAIR_H
#define PT_PAIR_H

#include "pt_internal.h"

/* A record's place: segment index << 32 | offset. */
static inline uint64_t pt_pos(size_t seg, uint32_t off) { return (uint64_t)seg << 32 | off; }

struct pt_pair_open {
  uint64_t uid, instance, ts, pos; /* ts: the recording's raw time */
};
struct pt_pair_half {
  struct pt_pair_open o;
  uint8_t kind; /* enum pt_half_kind */
};
/* A thread's begins still open and its halves found so far. */
struct pt_pairer {
  struct pt_pair_open *open;
  size_t n, cap;
  struct pt_pair_half *halves;
  size_t hn, hcap;
  bool failed; /* out of memory: a half was lost */
};

/* The compact records from off (below end) of segment seg; returns the
 * offset of the first other record (or end). */
PT_HIDDEN uint32_t pt_pair_compact(struct pt_pairer *p, const uint8_t *data, uint32_t off,
                                   uint32_t end, uint32_t seg);
/* One full record at place pos. */
PT_HIDDEN void pt_pair_record(struct pt_pairer *p, const struct xpt_rec_raw *raw, uint64_t pos);
/* Every record of data[from, to) (checked by the scan), segment seg. */
PT_HIDDEN void pt_pair_segment(struct pt_pairer *p, const uint8_t *data, uint32_t from,
                               uint32_t to, uint32_t seg);
/* Hands pt_handoff.c the halves, then the begins still open, their
 * segments renumbered through map (NULL: as they are); false when out of
 * memory (a half was lost). */
PT_HIDDEN bool pt_pair_hand(struct pt_pairer *p, const uint32_t *map);
PT_HIDDEN void pt_pair_free(struct pt_pairer *p);

/* A thread paired while the recording is scanned: its segments in the
 * order of their numbers, those that come early held (paired when their
 * turn comes, or after the scan). */
struct pt_pair_held {
  uint64_t number;
  uint32_t added; /* the segment's index before they are sorted */
};
struct pt_pair_thread {
  uint64_t key;  /* pid << 32 | tid */
  uint64_t next; /* the number of the segment to pair next */
  bool used;
  bool disordered; /* a number came twice: paired again after the scan */
  struct pt_pairer pairer;
  struct pt_pair_held *held;
  size_t held_n, held_cap;
};
/* The thread of key (made when `make`; NULL: none, or out of memory).
 * Pointers stay valid until the next call that makes one. */
PT_HIDDEN struct pt_pair_thread *pt_pair_thread(uint64_t key, bool make);
/* Holds a segment that came early; false when its number is held already
 * or out of memory (the thread is then disordered). */
PT_HIDDEN bool pt_pair_hold(struct pt_pair_thread *t, uint64_t number, uint32_t added);
/* Takes the held segment numbered `next` (any: the lowest) out of the
 * list into *h; false when there is none. */
PT_HIDDEN bool pt_pair_take(struct pt_pair_thread *t, bool any, struct pt_pair_held *h);
/* The thread is paired again after the scan: what it had goes. */
PT_HIDDEN void pt_pair_disorder(struct pt_pair_thread *t);
PT_HIDDEN void pt_pair_threads_reset(void);

#endif /* PT_PAIR_H */
