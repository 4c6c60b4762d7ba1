/* xptrace sampler — shared between the recording side (sampler.c) and
 * the report side (sampler_report.c).  Everything here is hidden. */
#ifndef XPTRACE_SAMPLER_INTERNAL_H
#define XPTRACE_SAMPLER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sampler_config.h"

#define SAMPLER_HIDDEN __attribute__((visibility("hidden")))

enum { SAMPLER_SAMPLES_PER_BUFFER = 1024 };

/* One sample: header then `depth` program counters, innermost first. */
typedef struct sample_record {
  uint64_t time_ns;   /* CLOCK_MONOTONIC */
  uint16_t depth;
  uint8_t clock;      /* enum sampler_clock */
  uint8_t truncated;  /* the stack was deeper than the depth limit */
  uint32_t thread;    /* index of the thread (0: main) */
  uintptr_t pc[];
} sample_record_t;

/* An mmap'd buffer of samples.  Filled only by its thread's signal
 * handler, then handed to the writer whole. */
typedef struct sample_buffer {
  struct sample_buffer *next; /* handoff list */
  size_t map_size;
  size_t stride;
  uint32_t count;
  uint32_t capacity;
  unsigned char data[];
} sample_buffer_t;

static inline sample_record_t *sample_at(sample_buffer_t *b, uint32_t i) {
  return (sample_record_t *)(void *)(b->data + (size_t)i * b->stride);
}

/* What the report needs to know about a thread. */
typedef struct sampler_thread_info {
  uint32_t index;
  pid_t tid;
  char name[32];
  uint64_t samples[SAMPLER_NCLOCKS];
  uint64_t dropped;
} sampler_thread_info_t;

typedef struct sampler_summary {
  bool on[SAMPLER_NCLOCKS];
  double freq[SAMPLER_NCLOCKS];
  const char *signal_note[SAMPLER_NCLOCKS]; /* why a clock stopped early, or NULL */
  uint64_t dropped;                         /* every thread, and samples with no thread */
  bool brief;                               /* no top-functions table (exec'd descendants) */
  size_t nthreads;
  const sampler_thread_info_t *threads;
} sampler_summary_t;

/* Report side.  Aggregation keeps one count per distinct (thread, clock,
 * stack); buffers are unmapped once counted. */
SAMPLER_HIDDEN void sampler_report_add(sample_buffer_t *buffer);
/* Forget everything counted (a forked child: the data is the parent's). */
SAMPLER_HIDDEN void sampler_report_reset(void);
/* Symbolize and write samples.folded / samples.csv (one pair per clock)
 * into `dir`, print the summary and top functions to stderr. */
SAMPLER_HIDDEN void sampler_report_write(const char *dir, const sampler_summary_t *summary);

#endif /* XPTRACE_SAMPLER_INTERNAL_H */
