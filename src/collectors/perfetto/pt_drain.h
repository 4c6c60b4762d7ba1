/* The recorder's drainer (policy flush), see pt_drain.c. */
#ifndef PT_DRAIN_H
#define PT_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "xpt_rec.h"

#define PT_DRAIN_HIDDEN __attribute__((visibility("hidden")))

/* Starts the thread; every chunk is free.  chunks: the first chunk of
 * the mapped recording (file rec_fd), count of chunk_size bytes, of which
 * the first `reserved` have their disk blocks (fallocate); the thread
 * reserves more ahead of use (a producer that finds none left does), and
 * no chunk past them is handed out (a write there on a full disk would be
 * a SIGBUS). */
PT_DRAIN_HIDDEN bool pt_drain_start(int spill_fd, int rec_fd, uint8_t *chunks,
                                    uint32_t chunk_size, uint64_t count, uint64_t reserved,
                                    struct xpt_rec_header *h);
/* Chunks reserved at the start and in each step after (an eighth of
 * the buffer, at least 4, at most 256: 64 MiB of the largest chunks): a
 * short process holds that, not the buffer. */
static inline uint64_t pt_drain_reserve_step(uint64_t count) {
  uint64_t step = count / 8;
  step = step > 256 ? 256 : step;
  return step < 4 ? (count < 4 ? count : 4) : step;
}
/* A free chunk's index, or UINT64_MAX (none now).  Call with signals
 * blocked (it takes a lock held only briefly). */
PT_DRAIN_HIDDEN uint64_t pt_drain_take(void);
PT_DRAIN_HIDDEN void pt_drain_wake(void);
/* Chunk `index` is sealed (its writer moved on): it may be copied out. */
PT_DRAIN_HIDDEN void pt_drain_sealed(uint64_t index);
/* Stops the thread after its pass (before the process finishes its own
 * recording). */
PT_DRAIN_HIDDEN void pt_drain_stop(void);
PT_DRAIN_HIDDEN void pt_drain_fork_prepare(void);
PT_DRAIN_HIDDEN void pt_drain_fork_parent(void);
PT_DRAIN_HIDDEN void pt_drain_fork_child(void);

#endif /* PT_DRAIN_H */
