/* The stats collector's histogram (src/common/stats_hist.c,
 * compiled in): random values and counts, merges and quantiles; a
 * quantile is a bucket's midpoint, so it stays within the histogram's
 * relative error of the recorded min and max. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stats_hist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  stats_hist_t a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  uint64_t total = 0, min = UINT64_MAX, max = 0;
  while (size >= 10) {
    uint64_t value;
    memcpy(&value, data, 8);
    value >>= data[8] & 63; /* small values as often as large ones */
    uint64_t count = 1 + data[9] % 4;
    stats_hist_t *h = data[9] & 0x80 ? &b : &a;
    if (stats_hist_add(h, value, count)) {
      total += count;
      min = value < min ? value : min;
      max = value > max ? value : max;
    }
    data += 10;
    size -= 10;
  }
  if (!stats_hist_merge(&a, &b))
    goto out;
  if (total) {
    double q[] = {0.0001, 0.5, 0.9, 0.99, 1.0};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
      uint64_t v = stats_hist_quantile(&a, total, q[i]);
      double slack = 2 * STATS_HIST_RELATIVE_ERROR;
      if ((double)v < (double)min * (1 - slack) - 1 || (double)v > (double)max * (1 + slack) + 1)
        abort();
    }
  }
out:
  stats_hist_free(&a);
  stats_hist_free(&b);
  return 0;
}
