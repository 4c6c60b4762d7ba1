/* causal_load_outlier (src/causal/causal_load.c) on histories of known
 * answer: a window well above its neighbours' wait for a CPU is
 * disturbed by load; one within the spread of a steady or a steadily
 * loaded machine is not; too short a history decides nothing. */
#include <stdio.h>

#include "causal_internal.h"

static int failures;

static void expect(const char *what, bool got, bool want) {
  if (got != want) {
    printf("FAIL: %s: %s, expected %s\n", what, got ? "outlier" : "kept",
           want ? "outlier" : "kept");
    ++failures;
  }
}

int main(void) {
  /* An idle machine: 0-4 % waiting for a CPU. */
  const double idle[8] = {0.01, 0.02, 0.00, 0.03, 0.02, 0.04, 0.01, 0.02};
  expect("idle, a spike to 40 %", causal_load_outlier(idle, 8, 0.40), true);
  expect("idle, 10 % (within the 15-point floor)", causal_load_outlier(idle, 8, 0.10), false);
  expect("idle, 18 % (past the 15-point floor over a 2 % median)",
         causal_load_outlier(idle, 8, 0.18), true);
  expect("idle, less than ever", causal_load_outlier(idle, 8, 0.0), false);
  /* A machine loaded all the time (2 busy processes per core): 55-70 %. */
  const double busy[10] = {0.60, 0.55, 0.70, 0.62, 0.58, 0.66, 0.61, 0.64, 0.57, 0.63};
  expect("busy, 72 % (its normal)", causal_load_outlier(busy, 10, 0.72), false);
  expect("busy, 95 %", causal_load_outlier(busy, 10, 0.95), true);
  /* A noisy machine: the margin grows with the spread (3 median
   * deviations: median 0.30, deviations' median 0.10). */
  const double noisy[7] = {0.10, 0.20, 0.30, 0.40, 0.50, 0.25, 0.35};
  expect("noisy, 55 % (within 3 deviations)", causal_load_outlier(noisy, 7, 0.55), false);
  expect("noisy, 65 %", causal_load_outlier(noisy, 7, 0.65), true);
  /* Fewer than CAUSAL_LOAD_MIN_HISTORY windows: no judgement yet. */
  expect("4 windows, a spike", causal_load_outlier(idle, 4, 0.90), false);
  expect("5 windows, a spike", causal_load_outlier(idle, 5, 0.90), true);
  if (causal_load_median(busy, 10) < 0.609 || causal_load_median(busy, 10) > 0.621) {
    printf("FAIL: median of busy %.3f, expected 0.615\n", causal_load_median(busy, 10));
    ++failures;
  }
  if (failures)
    return 1;
  printf("ok\n");
  return 0;
}
