/* The statistics histogram: percentiles within the documented relative
 * error of the exact ones, merging, extreme values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "stats_hist.h"

static int failures;
#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t next_random(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* Exact quantile with the same rank rule (ceil(q * n), 1-based). */
static uint64_t exact_quantile(const uint64_t *sorted, size_t n, double q) {
  size_t rank = (size_t)ceil(q * (double)n);
  if (rank < 1)
    rank = 1;
  return sorted[rank - 1];
}

static void check_close(uint64_t got, uint64_t want) {
  double err = fabs((double)got - (double)want);
  /* Within half a bucket: 1/128 of the value, or 0.5 below 64. */
  if (err > STATS_HIST_RELATIVE_ERROR * (double)want + 0.5) {
    fprintf(stderr, "quantile %llu, exact %llu\n", (unsigned long long)got,
            (unsigned long long)want);
    ++failures;
  }
}

int main(void) {
  enum { N = 100000 };
  static uint64_t values[N];
  stats_hist_t a = {0}, b = {0}, all = {0};
  uint64_t state = 88172645463325252ull;
  for (size_t i = 0; i < N; ++i) {
    /* Spread over many powers of two: 1 ns .. ~1 s. */
    unsigned shift = (unsigned)(next_random(&state) % 30);
    values[i] = (next_random(&state) >> (34 + (29 - shift))) + (next_random(&state) % 50);
    CHECK(stats_hist_add(i % 2 ? &a : &b, values[i], 1));
    CHECK(stats_hist_add(&all, values[i], 1));
  }
  CHECK(stats_hist_merge(&a, &b));
  qsort(values, N, sizeof values[0], cmp_u64);
  const double qs[] = {0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0};
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; ++i) {
    uint64_t want = exact_quantile(values, N, qs[i]);
    check_close(stats_hist_quantile(&a, N, qs[i]), want);
    CHECK(stats_hist_quantile(&a, N, qs[i]) == stats_hist_quantile(&all, N, qs[i]));
  }

  /* Small values are exact. */
  stats_hist_t small = {0};
  for (uint64_t v = 0; v < 64; ++v)
    stats_hist_add(&small, v, 1);
  CHECK(stats_hist_quantile(&small, 64, 0.5) == 31);
  CHECK(stats_hist_quantile(&small, 64, 1.0) == 63);

  /* The extremes of uint64 land in a bucket without overflow. */
  stats_hist_t big = {0};
  CHECK(stats_hist_add(&big, UINT64_MAX, 1));
  uint64_t top = stats_hist_quantile(&big, 1, 0.5);
  CHECK(top >= (UINT64_C(1) << 63) && (double)(UINT64_MAX - top) <= 0.01 * (double)UINT64_MAX);

  stats_hist_clear(&a);
  CHECK(stats_hist_quantile(&a, 0, 0.5) == 0);
  stats_hist_free(&a);
  stats_hist_free(&b);
  stats_hist_free(&all);
  stats_hist_free(&small);
  stats_hist_free(&big);
  if (failures)
    fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
