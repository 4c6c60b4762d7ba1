/* libxpti_stats.so internals shared by the recording side
 * (stats_collector.c) and the report (stats_report.c); all hidden. */
#ifndef STATS_INTERNAL_H
#define STATS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xpti/xpti_trace_framework.h>

#include "stats_hist.h"
#include "xpt_collector.h"

/* One (stream, type, name) row: a thread's, the aggregate of ended
 * threads', or the report's. */
typedef struct stats_row {
  const char *name; /* stable: the framework's payload copy or an owned copy */
  uint16_t type;    /* begin type for begin/end pairs; the type for single points */
  uint8_t stream;
  uint64_t count; /* matched pairs, or occurrences of a single point */
  uint64_t total;
  uint64_t self;
  uint64_t min;
  uint64_t max;
  uint64_t unmatched_ends;
  uint64_t unclosed; /* begins left open: counted when a thread ends or is reported */
  uint64_t p50, p95, p99; /* the report's only */
  bool ticks; /* durations in TSC ticks (begin/end pairs), else ns; the report scales */
  stats_hist_t hist;
} stats_row_t;

/* A slice's half whose other half is on another thread (a task handed
 * on): an end with no begin on its thread, or a begin open when its
 * thread ended or was reported.  Paired across threads at the report. */
typedef struct stats_half {
  uint64_t uid, instance, ts;
  const char *name; /* the table's row's */
  uint16_t type;    /* the begin type */
  uint8_t stream;
  bool end;
} stats_half_t;
/* Rows found by name (string compare), for merging threads' rows. */
typedef struct stats_table {
  stats_half_t *halves;
  size_t nhalves, halves_cap;
  stats_row_t *rows;
  size_t nrows, cap;
  size_t *slots; /* open addressing: row index + 1; 0 = empty */
  size_t slots_cap;
  bool owns_names; /* a new row gets a copy of its name */
  uint64_t dropped;
  unsigned threads;
} stats_table_t;

/* The row of (stream, type, name), created empty; NULL when out of memory. */
XPT_HIDDEN /* FNV-1a of a name, with its type and stream. */
XPT_HIDDEN uint64_t stats_hash_str(const char *s, uint16_t type, uint8_t stream);
stats_row_t *stats_table_row(stats_table_t *tab, uint8_t stream, uint16_t type,
                                        const char *name);
/* Adds every figure of `from` to its row of tab (exactly: histograms
 * too); what cannot be added is counted in tab->dropped. */
XPT_HIDDEN void stats_table_add(stats_table_t *tab, const stats_row_t *from);
XPT_HIDDEN void stats_table_free(stats_table_t *tab);

/* The xptrace timed-slice type (0 until a stream is initialised). */
XPT_HIDDEN extern _Atomic uint16_t stats_timed_type;

/* Begin/end pairs: the predefined ones and every user-defined type of a
 * tool (even = begin, odd = end). */
static inline bool stats_type_is_pair(uint16_t type) {
  if (type & XPTI_TRACE_USER_DEFINED)
    return XPTI_TOOL_ID(type) != 0;
  switch (type & ~1u) {
  case XPTI_TRACE_REGION_BEGIN:
  case XPTI_TRACE_TASK_BEGIN:
  case XPTI_TRACE_BARRIER_BEGIN:
  case XPTI_TRACE_LOCK_BEGIN:
  case XPTI_TRACE_TRANSFER_BEGIN:
  case XPTI_TRACE_THREAD_BEGIN:
  case XPTI_TRACE_WAIT_BEGIN:
  case XPTI_TRACE_FUNCTION_BEGIN:
  case XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN:
  case XPTI_TRACE_MEM_ALLOC_BEGIN:
  case XPTI_TRACE_MEM_RELEASE_BEGIN:
    return true;
  default:
    return false;
  }
}

/* Single points: the predefined ones, and any type that is neither a
 * predefined type nor a tool's (counted, as "type_<value>"). */
static inline bool stats_type_is_point(uint16_t type) { return !stats_type_is_pair(type); }

/* Percentiles, order, then stats.csv and stats.json into the output
 * folder and the table to the original stderr (once, unless more was
 * recorded since).  Sorts rep's rows. */
/* ns_per_tick: the scale of rows kept in TSC ticks (0: none are). */
XPT_HIDDEN void stats_report_write(stats_table_t *rep, double ns_per_tick);
/* In a forked child: nothing reported yet. */
XPT_HIDDEN void stats_report_forget(void);

#endif /* STATS_INTERNAL_H */
