/* creation_tail: the distribution of single trace point creations, not
 * their mean.  Each of N new trace points (own name, shared file) is timed
 * alone; printed are the median and the p90, p99 and maximum as multiples
 * of it, and the stalls (over 50x the median): how many and what share of
 * all creation time they take.  Three rows: a fresh process, the same
 * after N earlier creations, and two threads at once after them.
 *   creation_tail [N]   (default 10000) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "xpti/xpti_trace_framework.h"

static inline uint64_t ticks(void) {
#if defined(__x86_64__)
  return __rdtsc();
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

typedef struct run {
  int set; /* names of this set are new to the process */
  size_t n;
  char (*names)[32];
  uint64_t *cost;
} run_t;

static void *create_all(void *arg) {
  run_t *r = arg;
  for (size_t i = 0; i < r->n; i++) {
    xpti_payload_t p = xpti_payload_make(r->names[i], "creation_tail.c", (uint32_t)i + 1, 0, NULL);
    uint64_t t0 = ticks();
    xptiMakeEvent(r->names[i], &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
    r->cost[i] = ticks() - t0;
  }
  return NULL;
}

static int by_value(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void report(const char *row, const run_t *r) {
  uint64_t *v = malloc(r->n * sizeof *v);
  if (!v)
    exit(1);
  memcpy(v, r->cost, r->n * sizeof *v);
  qsort(v, r->n, sizeof *v, by_value);
  double med = (double)(v[r->n / 2] ? v[r->n / 2] : 1);
  uint64_t total = 0, stalled = 0, stalls = 0;
  for (size_t i = 0; i < r->n; i++) {
    total += v[i];
    if ((double)v[i] > 50 * med)
      stalls++, stalled += v[i];
  }
  printf("%-30s %8.0f %6.1fx %6.1fx %9.0fx %7llu %6.1f%%\n", row, med, (double)v[r->n * 9 / 10] / med,
         (double)v[r->n * 99 / 100] / med, (double)v[r->n - 1] / med, (unsigned long long)stalls,
         total ? 100.0 * (double)stalled / (double)total : 0.0);
  free(v);
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
  if (n < 100 || n > 1000000) {
    fprintf(stderr, "xptrace: creation_tail: N must be 100-1000000\n");
    return 2;
  }
  run_t runs[4];
  for (int s = 0; s < 4; s++) {
    runs[s] = (run_t){s, n, malloc(n * sizeof *runs[s].names), malloc(n * sizeof(uint64_t))};
    if (!runs[s].names || !runs[s].cost)
      return 1;
    for (size_t i = 0; i < n; i++)
      snprintf(runs[s].names[i], sizeof runs[s].names[i], "tail_%d_%zu", s, i);
  }
  xptiForceSetTraceEnabled(true);
  printf("%zu new trace points per row; ticks: %s\n", n,
#if defined(__x86_64__)
         "TSC"
#else
         "ns"
#endif
  );
  printf("%-30s %8s %7s %7s %10s %7s %7s\n", "row", "median", "p90", "p99", "max", "stalls",
         "share");
  create_all(&runs[0]);
  report("serial, fresh process", &runs[0]);
  create_all(&runs[1]);
  report("serial, after earlier work", &runs[1]);
  pthread_t t[2];
  for (int k = 0; k < 2; k++)
    pthread_create(&t[k], NULL, create_all, &runs[2 + k]);
  for (int k = 0; k < 2; k++)
    pthread_join(t[k], NULL);
  report("2 threads, after (thread a)", &runs[2]);
  report("2 threads, after (thread b)", &runs[3]);
  puts("(p90, p99, max: multiples of the median; stalls: creations over 50x the median,\n"
       " share: their part of all creation time in the row)");
  for (int s = 0; s < 4; s++) {
    free(runs[s].names);
    free(runs[s].cost);
  }
  return 0;
}
