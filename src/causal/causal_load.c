/* Experiments disturbed by load.  A window whose threads spent much more
 * of their runnable time waiting for a CPU than the windows around it
 * ran while something else took the machine (a build, another user's
 * job): its progress rate says more about that than about the line's
 * speedup, and with a baseline and an experiment alternating, one such
 * window moves a whole prediction.  The comparison is with the recent
 * windows, not with an absolute level: a machine that is loaded all the
 * time is the program's situation (docs/causal.md, Limits), a spike is
 * noise.  Pure function: tested alone (tests/causal/causal_load_test.c). */
#include <stdlib.h>

#include "causal_internal.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double causal_load_median(const double *hist, int n) {
  if (n <= 0)
    return 0;
  double v[CAUSAL_LOAD_HISTORY];
  n = n > CAUSAL_LOAD_HISTORY ? CAUSAL_LOAD_HISTORY : n;
  for (int i = 0; i < n; ++i)
    v[i] = hist[i];
  return median(v, n);
}

bool causal_load_outlier(const double *hist, int n, double frac) {
  if (n < CAUSAL_LOAD_MIN_HISTORY || frac < 0)
    return false;
  if (n > CAUSAL_LOAD_HISTORY)
    n = CAUSAL_LOAD_HISTORY;
  double v[CAUSAL_LOAD_HISTORY];
  double med = causal_load_median(hist, n);
  for (int i = 0; i < n; ++i)
    v[i] = hist[i] > med ? hist[i] - med : med - hist[i];
  double mad = median(v, n);
  /* 15 points of runnable time at least: a steady machine's windows
   * differ by a few points (a virtual speedup's sleeps free CPUs too), and
   * 3 median deviations on a noisier one. */
  double margin = 3 * mad > 0.15 ? 3 * mad : 0.15;
  return frac > med + margin;
}
