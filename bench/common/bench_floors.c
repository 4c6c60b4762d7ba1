#include "bench_floors.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_empty.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

volatile uint64_t bench_sink;

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_cpu_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return bench_now_ns();
#endif
}

static int bench_compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *values, size_t count) {
  if (count == 0)
    return 0.0;
  qsort(values, count, sizeof *values, bench_compare_double);
  return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2.0;
}

/* ---- the thread-local record buffer ---------------------------------- */

typedef struct bench_record {
  uint64_t timestamp;
  uint64_t a, b, c;
} bench_record_t;
_Static_assert(sizeof(bench_record_t) == 32, "a record is 32 bytes");

#define BENCH_TLS_RECORDS 4096u /* a power of two: the buffer wraps */

typedef struct bench_tls_buffer {
  uint64_t position;
  bench_record_t records[BENCH_TLS_RECORDS];
} bench_tls_buffer_t;

/* One small initial-exec pointer, the buffer allocated on first use, as a
 * real tracer in a shared object would do it (PERF.md). */
static __thread bench_tls_buffer_t *bench_tls_buffer __attribute__((tls_model("initial-exec")));

static __attribute__((noinline)) bench_tls_buffer_t *bench_tls_buffer_create(void) {
  bench_tls_buffer = calloc(1, sizeof *bench_tls_buffer);
  if (!bench_tls_buffer)
    abort();
  return bench_tls_buffer;
}

void bench_tls_record(uint64_t a, uint64_t b, uint64_t c) {
  bench_tls_buffer_t *buffer = bench_tls_buffer;
  if (__builtin_expect(!buffer, 0))
    buffer = bench_tls_buffer_create();
  bench_record_t *record = &buffer->records[buffer->position++ & (BENCH_TLS_RECORDS - 1)];
  record->timestamp = bench_cpu_ticks();
  record->a = a;
  record->b = b;
  record->c = c;
}

/* ---- one loop per floor ------------------------------------------------ */
/* Each loop is noinline so that all run the same loop frame; the asm
 * statements keep the compiler from deleting or hoisting the work. */

static __attribute__((noinline)) void bench_empty_local(void) { __asm__ volatile(""); }

static __attribute__((noinline)) void floor_loop(uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void floor_direct_call(uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    bench_empty_local();
}

static __attribute__((noinline)) void floor_dso_call(uint64_t n) {
  void (*function)(void) = xpti_bench_empty;
  for (uint64_t i = 0; i < n; i++) {
    __asm__ volatile("" : "+r"(function)); /* an opaque pointer each time */
    function();
  }
}

static atomic_int floor_flag; /* stays 0: the branch is always predicted */

static __attribute__((noinline)) void floor_atomic_branch(uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    /* A call on the taken side keeps a real branch (no cmov/sbb). */
    if (atomic_load_explicit(&floor_flag, memory_order_relaxed))
      bench_empty_local();
    __asm__ volatile("" ::: "memory"); /* reload the flag every time */
  }
}

static __attribute__((noinline)) void floor_clock(uint64_t n) {
  uint64_t sum = 0;
  struct timespec ts;
  for (uint64_t i = 0; i < n; i++) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sum += (uint64_t)ts.tv_nsec;
  }
  bench_sink = sum;
}

static __attribute__((noinline)) void floor_rdtsc(uint64_t n) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++)
    sum += bench_cpu_ticks();
  bench_sink = sum;
}

static __attribute__((noinline)) void floor_tls_record(uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    bench_tls_record(i, n, 42);
  bench_sink = bench_tls_buffer->records[n & (BENCH_TLS_RECORDS - 1)].timestamp;
}

typedef void (*floor_loop_fn)(uint64_t n);

static const struct {
  floor_loop_fn run;
  const char *name;
  const char *tag;
} floor_table[BENCH_FLOOR_COUNT] = {
    [BENCH_FLOOR_LOOP] = {floor_loop, "empty loop iteration", "loop"},
    [BENCH_FLOOR_DIRECT_CALL] = {floor_direct_call, "direct call, empty non-inlined function",
                                 "call"},
    [BENCH_FLOOR_DSO_CALL] = {floor_dso_call, "call through pointer into another .so", "dso-call"},
    [BENCH_FLOOR_ATOMIC_BRANCH] = {floor_atomic_branch, "relaxed atomic load + branch", "atomic"},
    [BENCH_FLOOR_CLOCK] = {floor_clock, "clock_gettime(CLOCK_MONOTONIC)", "clock"},
    [BENCH_FLOOR_RDTSC] = {floor_rdtsc, "rdtsc", "rdtsc"},
    [BENCH_FLOOR_TLS_RECORD] = {floor_tls_record, "TLS 32-byte record + timestamp", "record"},
};

const char *bench_floor_name(bench_floor_id_t id) { return floor_table[id].name; }
const char *bench_floor_tag(bench_floor_id_t id) { return floor_table[id].tag; }

#define FLOOR_MAX_REPETITIONS 31
#define FLOOR_BATCH_NS 250000u /* short: a preempted batch is one outlier */

/* Iterations for one batch of about FLOOR_BATCH_NS. */
static uint64_t floor_calibrate(floor_loop_fn run) {
  uint64_t n = 1024;
  run(n); /* warm up: first touch of the TLS buffer, PLT binding */
  for (;;) {
    uint64_t start = bench_now_ns();
    run(n);
    if (bench_now_ns() - start >= FLOOR_BATCH_NS || n >= (1ull << 34))
      return n;
    n *= 2;
  }
}

void bench_floors_measure(bench_floors_t *floors, int repetitions) {
  if (repetitions < 1)
    repetitions = 1;
  if (repetitions > FLOOR_MAX_REPETITIONS)
    repetitions = FLOOR_MAX_REPETITIONS;
  uint64_t batch[BENCH_FLOOR_COUNT];
  double samples[BENCH_FLOOR_COUNT][FLOOR_MAX_REPETITIONS];
  for (int id = 0; id < BENCH_FLOOR_COUNT; id++)
    batch[id] = floor_calibrate(floor_table[id].run);
  /* Round robin over the floors: a burst of load from elsewhere on a
   * shared machine then hits one sample of each, not all of one. */
  for (int r = 0; r < repetitions; r++)
    for (int id = 0; id < BENCH_FLOOR_COUNT; id++) {
      uint64_t start = bench_now_ns();
      floor_table[id].run(batch[id]);
      samples[id][r] = (double)(bench_now_ns() - start) / (double)batch[id];
    }
  for (int id = 0; id < BENCH_FLOOR_COUNT; id++)
    floors->ns[id] = bench_median(samples[id], (size_t)repetitions);
}

void bench_floors_print(FILE *out, const bench_floors_t *floors) {
  fprintf(out, "Floors measured in this run (ns per iteration, median of interleaved batches):\n");
  for (int id = 0; id < BENCH_FLOOR_COUNT; id++)
    fprintf(out, "  %-9s %-42s %8.2f ns\n", floor_table[id].tag, floor_table[id].name,
            floors->ns[id]);
}
