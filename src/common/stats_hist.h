/* Log-linear histogram of durations (ns), HDR-like.
 *
 * Values below 64 have a bucket each.  Above, every power of two
 * [2^e, 2^(e+1)) is cut into 64 equal buckets of width 2^(e-6); a
 * percentile is reported as its bucket's midpoint (clamped to the exact
 * min and max), so it is within 1/128 (0.8%) of a recorded value.
 * Blocks of 64 counters are allocated only for the powers of two that
 * occur: a few KiB per row in practice. */
#ifndef STATS_HIST_H
#define STATS_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { STATS_HIST_SUB = 64, STATS_HIST_BLOCKS = 59 };
#define STATS_HIST_RELATIVE_ERROR (1.0 / 128.0)

typedef struct stats_hist {
  uint64_t *block[STATS_HIST_BLOCKS];
} stats_hist_t;

/* Returns false when a block could not be allocated (value not counted). */
bool stats_hist_add(stats_hist_t *h, uint64_t value, uint64_t count);
/* The same, new blocks from alloc(ctx, bytes) (zeroed memory) instead of
 * calloc: for a caller that must not malloc (a signal handler's). */
bool stats_hist_add_from(stats_hist_t *h, uint64_t value, uint64_t count,
                         void *(*alloc)(void *ctx, size_t size), void *ctx);
/* Adds every count of `from` into `into`. */
bool stats_hist_merge(stats_hist_t *into, const stats_hist_t *from);
/* Value at quantile q (0..1] of `total` recorded values. */
uint64_t stats_hist_quantile(const stats_hist_t *h, uint64_t total, double q);
void stats_hist_clear(stats_hist_t *h);
void stats_hist_free(stats_hist_t *h);

#endif /* STATS_HIST_H */
