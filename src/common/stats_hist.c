/* Log-linear histogram (see stats_hist.h). */
#include "stats_hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void hist_locate(uint64_t value, unsigned *block, unsigned *sub) {
  if (value < STATS_HIST_SUB) {
    *block = 0;
    *sub = (unsigned)value;
    return;
  }
  unsigned e = 63u - (unsigned)__builtin_clzll(value); /* >= 6 */
  *block = e - 5;
  *sub = (unsigned)(value >> (e - 6)) & (STATS_HIST_SUB - 1);
}

/* Smallest value of a bucket and its width. */
static void hist_bucket_range(unsigned block, unsigned sub, uint64_t *low, uint64_t *width) {
  if (block == 0) {
    *low = sub;
    *width = 1;
    return;
  }
  unsigned e = block + 5;
  *width = UINT64_C(1) << (e - 6);
  *low = (UINT64_C(1) << e) + (uint64_t)sub * *width;
}

bool stats_hist_add_from(stats_hist_t *h, uint64_t value, uint64_t count,
                         void *(*alloc)(void *ctx, size_t size), void *ctx) {
  unsigned block, sub;
  hist_locate(value, &block, &sub);
  if (!h->block[block]) {
    size_t bytes = STATS_HIST_SUB * sizeof(uint64_t);
    h->block[block] = alloc ? alloc(ctx, bytes) : calloc(1, bytes);
    if (!h->block[block])
      return false;
  }
  h->block[block][sub] += count;
  return true;
}

bool stats_hist_add(stats_hist_t *h, uint64_t value, uint64_t count) {
  return stats_hist_add_from(h, value, count, NULL, NULL);
}

bool stats_hist_merge(stats_hist_t *into, const stats_hist_t *from) {
  for (unsigned b = 0; b < STATS_HIST_BLOCKS; ++b) {
    if (!from->block[b])
      continue;
    if (!into->block[b]) {
      into->block[b] = calloc(STATS_HIST_SUB, sizeof(uint64_t));
      if (!into->block[b])
        return false;
    }
    for (unsigned s = 0; s < STATS_HIST_SUB; ++s)
      into->block[b][s] += from->block[b][s];
  }
  return true;
}

uint64_t stats_hist_quantile(const stats_hist_t *h, uint64_t total, double q) {
  if (total == 0)
    return 0;
  double exact_rank = ceil(q * (double)total);
  uint64_t rank = exact_rank < 1 ? 1 : (uint64_t)exact_rank;
  if (rank > total)
    rank = total;
  uint64_t seen = 0;
  for (unsigned b = 0; b < STATS_HIST_BLOCKS; ++b) {
    if (!h->block[b])
      continue;
    for (unsigned s = 0; s < STATS_HIST_SUB; ++s) {
      seen += h->block[b][s];
      if (seen >= rank) {
        uint64_t low, width;
        hist_bucket_range(b, s, &low, &width);
        return low + width / 2;
      }
    }
  }
  return 0;
}

void stats_hist_clear(stats_hist_t *h) {
  for (unsigned b = 0; b < STATS_HIST_BLOCKS; ++b)
    if (h->block[b])
      memset(h->block[b], 0, STATS_HIST_SUB * sizeof(uint64_t));
}

void stats_hist_free(stats_hist_t *h) {
  for (unsigned b = 0; b < STATS_HIST_BLOCKS; ++b) {
    free(h->block[b]);
    h->block[b] = NULL;
  }
}
