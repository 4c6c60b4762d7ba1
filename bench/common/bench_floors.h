/* Floors of PERF.md, measured in the same run as the costs they bound. */
#ifndef BENCH_FLOORS_H
#define BENCH_FLOORS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum bench_floor_id {
  BENCH_FLOOR_LOOP,          /* empty loop iteration */
  BENCH_FLOOR_DIRECT_CALL,   /* direct call to an empty non-inlined function */
  BENCH_FLOOR_DSO_CALL,      /* call through a pointer into another .so */
  BENCH_FLOOR_ATOMIC_BRANCH, /* relaxed atomic load + predictable branch */
  BENCH_FLOOR_CLOCK,         /* clock_gettime(CLOCK_MONOTONIC) */
  BENCH_FLOOR_RDTSC,         /* rdtsc (or the CPU counter elsewhere) */
  BENCH_FLOOR_TLS_RECORD,    /* 32-byte record + timestamp into a TLS buffer */
  BENCH_FLOOR_COUNT
} bench_floor_id_t;

typedef struct bench_floors {
  double ns[BENCH_FLOOR_COUNT]; /* median ns per iteration */
} bench_floors_t;

/* Measure every floor: median of `repetitions` batches of about 0.25 ms
 * each (the clock's own cost is negligible), the floors interleaved. */
void bench_floors_measure(bench_floors_t *floors, int repetitions);
void bench_floors_print(FILE *out, const bench_floors_t *floors);
const char *bench_floor_name(bench_floor_id_t id);
const char *bench_floor_tag(bench_floor_id_t id); /* short column label */

/* A 32-byte record with a timestamp appended to this thread's buffer:
 * the floor of any recording tracer (also used by the peers driver). */
void bench_tls_record(uint64_t a, uint64_t b, uint64_t c);
uint64_t bench_cpu_ticks(void);

uint64_t bench_now_ns(void);
double bench_median(double *values, size_t count); /* sorts values */

/* Sink that makes measured results observable to the compiler. */
extern volatile uint64_t bench_sink;
#endif
