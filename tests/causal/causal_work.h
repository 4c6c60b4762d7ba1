/* What the causal fixtures share: a clock, and functions of known work
 * whose loop stands on one source line (the line a test selects by the
 * tag in its comment; a macro's code is on the line it is expanded on). */
#ifndef CAUSAL_WORK_H
#define CAUSAL_WORK_H

#include <time.h>

static inline double fixture_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* static double NAME(double x): UNITS multiply-adds, all on one line. */
#define CAUSAL_WORK_FN(name, units)                                                          \
  __attribute__((noinline)) static double name(double x) {                                   \
    for (long i = 0; i < (units); ++i)                                                       \
      x = x * 1.0000001 + 1e-9;                                                              \
    return x;                                                                                \
  }

#endif
