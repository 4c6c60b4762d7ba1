/* Per-name statistics of the thread slices the finisher writes, made
 * while it writes them: `xptrace run --functions` prints its table from
 * these instead of reading the finished trace again (which cost more
 * than the traced run and held every slice in memory). */
#ifndef XPT_SLICES_H
#define XPT_SLICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats_hist.h"

struct xpt_slice_row {
  char *name, *category;
  uint64_t count, min, max;
  uint64_t total; /* outermost calls only: recursion counted once, as uftrace */
  uint64_t self, sum; /* every call's self time, duration (the mean's) */
  uint32_t open;      /* calls open on the thread being counted */
  stats_hist_t hist; /* durations: percentiles within 0.8 % */
};

struct xpt_slice_table {
  struct xpt_slice_row *rows;
  size_t n, cap;
  uint32_t *slots; /* open addressing over (name, category): row + 1 */
  size_t nslots;
  uint64_t unclosed; /* begins never ended */
  bool oom;          /* some slice could not be counted */
};

/* While `t` is set, every trace this process's finisher writes adds its
 * threads' slices (begin/end pairs on thread tracks) to it; NULL stops.
 * Not thread-safe: one finisher at a time, as the finisher is. */
__attribute__((visibility("hidden"))) void xpt_slices_collect(struct xpt_slice_table *t);
__attribute__((visibility("hidden"))) void xpt_slices_free(struct xpt_slice_table *t);

#endif /* XPT_SLICES_H */
