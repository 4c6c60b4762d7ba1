/* libxpti_stats.so: per (stream, trace point type, event name) statistics
 * of begin/end durations, plus counts of single-point events.
 *
 * Recording is per thread and lock-free across threads: each thread owns
 * a table of rows and a stack of open begins, guarded by a spin flag that
 * only the report (at exit or on a fatal signal) ever contends.  The
 * report merges every thread's rows by name. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xpti/xpti_trace_framework.h>

#include "stats_hist.h"
#include "xptrace/xptrace_protocol.h"
#include "xpt_collector.h"

/* ---- per-thread recording ---------------------------------------------------- */

typedef struct stats_row {
  const char *name; /* stable: the framework's payload copy or an interned copy */
  uint16_t type;    /* begin type for begin/end pairs; the type for single points */
  uint8_t stream;
  uint64_t count; /* matched pairs, or occurrences of a single point */
  uint64_t total;
  uint64_t self;
  uint64_t min;
  uint64_t max;
  uint64_t unmatched_ends;
  stats_hist_t hist;
} stats_row_t;

typedef struct stats_frame {
  const void *ident; /* the event, or the name when there is none */
  uint64_t start;
  uint64_t children; /* total time of matched pairs directly inside */
  uint32_t row;
  uint16_t type;
} stats_frame_t;

typedef struct stats_thread {
  _Atomic uint32_t busy; /* held by the owner while recording, by the report while reading */
  struct stats_thread *next;
  stats_row_t *rows;
  uint32_t nrows, rows_cap;
  uint32_t *slots; /* open addressing: row index + 1; 0 = empty */
  uint32_t slots_cap;
  stats_frame_t *stack;
  uint32_t depth, stack_cap;
  char **names; /* interned copies of names passed as user data */
  uint32_t nnames, names_cap;
  uint64_t dropped; /* events lost to a failed allocation */
} stats_thread_t;

/* The xptrace timed-slice type (0 until a stream is initialised). */
static _Atomic uint16_t stats_timed_type;
static __thread stats_thread_t *stats_tls __attribute__((tls_model("initial-exec")));

static struct {
  pthread_mutex_t lock; /* thread list and report; never taken per event */
  stats_thread_t *threads;
  uint64_t reported_events; /* events covered by the last table printed */
  bool reported;
} stats_global = {.lock = PTHREAD_MUTEX_INITIALIZER};

static stats_thread_t *stats_thread_create(void) {
  stats_thread_t *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  pthread_mutex_lock(&stats_global.lock);
  t->next = stats_global.threads;
  stats_global.threads = t;
  pthread_mutex_unlock(&stats_global.lock);
  stats_tls = t;
  return t;
}

static void stats_thread_lock(stats_thread_t *t) {
  while (atomic_exchange_explicit(&t->busy, 1, memory_order_acquire))
    ;
}

static void stats_thread_unlock(stats_thread_t *t) {
  atomic_store_explicit(&t->busy, 0, memory_order_release);
}

static uint64_t stats_hash_ptr(uintptr_t p, uint16_t type, uint8_t stream) {
  uint64_t h = (uint64_t)p ^ ((uint64_t)type << 48) ^ ((uint64_t)stream << 40);
  h ^= h >> 33;
  h *= UINT64_C(0xff51afd7ed558ccd);
  h ^= h >> 33;
  return h;
}

static bool stats_slots_grow(stats_thread_t *t) {
  uint32_t cap = t->slots_cap ? t->slots_cap * 2 : 64;
  uint32_t *slots = calloc(cap, sizeof *slots);
  if (!slots)
    return false;
  for (uint32_t r = 0; r < t->nrows; ++r) {
    const stats_row_t *row = &t->rows[r];
    uint64_t h = stats_hash_ptr((uintptr_t)row->name, row->type, row->stream);
    uint32_t i = (uint32_t)h & (cap - 1);
    while (slots[i])
      i = (i + 1) & (cap - 1);
    slots[i] = r + 1;
  }
  free(t->slots);
  t->slots = slots;
  t->slots_cap = cap;
  return true;
}

/* Row of (stream, type, name) in this thread's table, created on first use.
 * Returns UINT32_MAX when memory runs out. */
static uint32_t stats_row_find(stats_thread_t *t, uint8_t stream, uint16_t type,
                               const char *name) {
  if (t->slots_cap == 0 && !stats_slots_grow(t))
    return UINT32_MAX;
  uint64_t h = stats_hash_ptr((uintptr_t)name, type, stream);
  uint32_t i = (uint32_t)h & (t->slots_cap - 1);
  for (;;) {
    uint32_t slot = t->slots[i];
    if (!slot)
      break;
    stats_row_t *row = &t->rows[slot - 1];
    if (row->name == name && row->type == type && row->stream == stream)
      return slot - 1;
    i = (i + 1) & (t->slots_cap - 1);
  }
  /* New row: keep the load factor at or below one half. */
  if ((t->nrows + 1) * 2 > t->slots_cap) {
    if (!stats_slots_grow(t))
      return UINT32_MAX;
    return stats_row_find(t, stream, type, name);
  }
  if (t->nrows == t->rows_cap) {
    uint32_t cap = t->rows_cap ? t->rows_cap * 2 : 32;
    stats_row_t *rows = realloc(t->rows, cap * sizeof *rows);
    if (!rows)
      return UINT32_MAX;
    t->rows = rows;
    t->rows_cap = cap;
  }
  stats_row_t *row = &t->rows[t->nrows];
  memset(row, 0, sizeof *row);
  row->name = name;
  row->type = type;
  row->stream = stream;
  row->min = UINT64_MAX;
  t->slots[i] = ++t->nrows;
  return t->nrows - 1;
}

/* A name that came as user data may live in a reused buffer: keep a copy. */
static const char *stats_intern_name(stats_thread_t *t, const char *name) {
  for (uint32_t i = 0; i < t->nnames; ++i)
    if (strcmp(t->names[i], name) == 0)
      return t->names[i];
  if (t->nnames == t->names_cap) {
    uint32_t cap = t->names_cap ? t->names_cap * 2 : 16;
    char **names = realloc(t->names, cap * sizeof *names);
    if (!names)
      return NULL;
    t->names = names;
    t->names_cap = cap;
  }
  char *copy = strdup(name);
  if (!copy)
    return NULL;
  t->names[t->nnames++] = copy;
  return copy;
}

/* Begin/end pairs: the predefined ones and every user-defined type of a
 * tool (even = begin, odd = end). */
static bool stats_type_is_pair(uint16_t type) {
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

static bool stats_type_is_known_point(uint16_t type) {
  switch (type) {
  case XPTI_TRACE_GRAPH_CREATE:
  case XPTI_TRACE_NODE_CREATE:
  case XPTI_TRACE_EDGE_CREATE:
  case XPTI_TRACE_SIGNAL:
  case XPTI_TRACE_METADATA:
  case XPTI_TRACE_DIAGNOSTICS:
    return true;
  default:
    return false;
  }
}

/* Single points: the predefined ones, and any type that is neither a
 * predefined type nor a tool's (counted, as "type_<value>"). */
static bool stats_type_is_point(uint16_t type) { return !stats_type_is_pair(type); }

static const char *stats_event_name(stats_thread_t *t, uint16_t type,
                                    const xpti_trace_event_data_t *event, const void *user_data) {
  if (event) {
    const xpti_payload_t *payload = event->reserved.payload;
    return payload && payload->name ? payload->name : "<unnamed>";
  }
  /* Function notifications without an event carry the function name. */
  const char *name = xpti_user_data_name(type, user_data);
  return name ? stats_intern_name(t, name) : "<no event>";
}

static bool stats_push(stats_thread_t *t, stats_frame_t frame) {
  if (t->depth == t->stack_cap) {
    uint32_t cap = t->stack_cap ? t->stack_cap * 2 : 32;
    stats_frame_t *stack = realloc(t->stack, cap * sizeof *stack);
    if (!stack)
      return false;
    t->stack = stack;
    t->stack_cap = cap;
  }
  t->stack[t->depth++] = frame;
  return true;
}

static void stats_add_span(stats_thread_t *t, stats_row_t *row, uint64_t duration,
                           uint64_t children) {
  ++row->count;
  row->total += duration;
  row->self += duration >= children ? duration - children : 0;
  if (duration < row->min)
    row->min = duration;
  if (duration > row->max)
    row->max = duration;
  if (!stats_hist_add(&row->hist, duration, 1))
    ++t->dropped;
}

static void stats_end(stats_thread_t *t, uint8_t stream, uint16_t begin_type, const char *name,
                      const void *ident, uint64_t now) {
  uint32_t k = t->depth;
  while (k > 0 && !(t->stack[k - 1].type == begin_type && t->stack[k - 1].ident == ident))
    --k;
  if (k == 0) {
    uint32_t r = stats_row_find(t, stream, begin_type, name);
    if (r == UINT32_MAX)
      ++t->dropped;
    else
      ++t->rows[r].unmatched_ends;
    return;
  }
  /* Begins opened after the matched one and never ended stay unclosed:
   * they are dropped from the stack (and counted when reported). */
  const stats_frame_t frame = t->stack[k - 1];
  t->depth = k - 1;
  uint64_t duration = now >= frame.start ? now - frame.start : 0;
  stats_add_span(t, &t->rows[frame.row], duration, frame.children);
  if (t->depth > 0)
    t->stack[t->depth - 1].children += duration;
}

/* A timed slice (xptrace protocol: device work reported afterwards) is a
 * complete span of its own: end - begin, no nesting on the host thread. */
static void stats_timed_slice(stats_thread_t *t, uint8_t stream, uint16_t type,
                              const xpti_trace_event_data_t *event,
                              const xptrace_timed_slice_t *slice) {
  const char *name = slice->name ? stats_intern_name(t, slice->name)
                                 : stats_event_name(t, type, event, NULL);
  uint32_t r = name ? stats_row_find(t, stream, type, name) : UINT32_MAX;
  if (r == UINT32_MAX) {
    ++t->dropped;
    return;
  }
  uint64_t duration = slice->end_ns >= slice->begin_ns ? slice->end_ns - slice->begin_ns : 0;
  stats_add_span(t, &t->rows[r], duration, 0);
}

static void stats_record(uint8_t stream, uint16_t type, xpti_trace_event_data_t *event,
                         const void *user_data) {
  uint64_t now = xpt_now_ns();
  stats_thread_t *t = stats_tls;
  if (!t && !(t = stats_thread_create()))
    return;
  stats_thread_lock(t);
  if (type == stats_timed_type && user_data) {
    stats_timed_slice(t, stream, type, event, user_data);
    stats_thread_unlock(t);
    return;
  }
  const char *name = stats_event_name(t, type, event, user_data);
  if (!name) {
    ++t->dropped;
  } else if (stats_type_is_point(type)) {
    uint32_t r = stats_row_find(t, stream, type, name);
    if (r == UINT32_MAX)
      ++t->dropped;
    else
      ++t->rows[r].count;
  } else if ((type & 1) == 0) {
    uint32_t r = stats_row_find(t, stream, type, name);
    stats_frame_t frame = {event ? (const void *)event : name, now, 0, r, type};
    if (r == UINT32_MAX || !stats_push(t, frame))
      ++t->dropped;
  } else {
    stats_end(t, stream, (uint16_t)(type & ~1u), name, event ? (const void *)event : name, now);
  }
  stats_thread_unlock(t);
}

/* The stream-wide callback: every type of the stream, with its id. */
static void stats_notify(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                         xpti_trace_event_data_t *event, uint64_t instance,
                         const void *user_data) {
  (void)parent;
  (void)instance;
  stats_record(stream, type, event, user_data);
}

/* ---- report -------------------------------------------------------------------- */

typedef struct stats_merged {
  const char *name;
  uint16_t type;
  uint8_t stream;
  uint64_t count, total, self, min, max, unmatched_ends, unclosed;
  uint64_t p50, p95, p99;
  stats_hist_t hist;
} stats_merged_t;

typedef struct stats_report {
  stats_merged_t *rows;
  size_t nrows, cap;
  size_t *slots; /* index + 1 */
  size_t slots_cap;
  uint64_t dropped;
  unsigned threads;
} stats_report_t;

static uint64_t stats_hash_str(const char *s, uint16_t type, uint8_t stream) {
  uint64_t h = UINT64_C(1469598103934665603) ^ type ^ ((uint64_t)stream << 16);
  for (; *s; ++s)
    h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
  return h;
}

static stats_merged_t *stats_report_row(stats_report_t *rep, uint8_t stream, uint16_t type,
                                        const char *name) {
  if ((rep->nrows + 1) * 2 > rep->slots_cap) {
    size_t cap = rep->slots_cap ? rep->slots_cap * 2 : 256;
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
      return NULL;
    for (size_t r = 0; r < rep->nrows; ++r) {
      const stats_merged_t *m = &rep->rows[r];
      size_t i = (size_t)stats_hash_str(m->name, m->type, m->stream) & (cap - 1);
      while (slots[i])
        i = (i + 1) & (cap - 1);
      slots[i] = r + 1;
    }
    free(rep->slots);
    rep->slots = slots;
    rep->slots_cap = cap;
  }
  size_t i = (size_t)stats_hash_str(name, type, stream) & (rep->slots_cap - 1);
  for (; rep->slots[i]; i = (i + 1) & (rep->slots_cap - 1)) {
    stats_merged_t *m = &rep->rows[rep->slots[i] - 1];
    if (m->type == type && m->stream == stream && strcmp(m->name, name) == 0)
      return m;
  }
  if (rep->nrows == rep->cap) {
    size_t cap = rep->cap ? rep->cap * 2 : 64;
    stats_merged_t *rows = realloc(rep->rows, cap * sizeof *rows);
    if (!rows)
      return NULL;
    rep->rows = rows;
    rep->cap = cap;
  }
  stats_merged_t *m = &rep->rows[rep->nrows];
  memset(m, 0, sizeof *m);
  m->name = name;
  m->type = type;
  m->stream = stream;
  m->min = UINT64_MAX;
  rep->slots[i] = ++rep->nrows;
  return m;
}

/* Wait a little for a thread that is recording; a thread stopped by the
 * signal being handled will never let go, so read it anyway then. */
static bool stats_thread_lock_for_report(stats_thread_t *t) {
  for (int tries = 0; tries < 2000; ++tries) {
    uint32_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(&t->busy, &expected, 1, memory_order_acquire,
                                                memory_order_relaxed))
      return true;
    struct timespec pause = {0, 50000};
    nanosleep(&pause, NULL);
  }
  return false;
}

static void stats_merge_thread(stats_report_t *rep, stats_thread_t *t) {
  bool locked = stats_thread_lock_for_report(t);
  for (uint32_t r = 0; r < t->nrows; ++r) {
    const stats_row_t *row = &t->rows[r];
    stats_merged_t *m = stats_report_row(rep, row->stream, row->type, row->name);
    if (!m) {
      rep->dropped += row->count;
      continue;
    }
    m->count += row->count;
    m->total += row->total;
    m->self += row->self;
    m->unmatched_ends += row->unmatched_ends;
    if (row->min < m->min)
      m->min = row->min;
    if (row->max > m->max)
      m->max = row->max;
    if (!stats_hist_merge(&m->hist, &row->hist))
      rep->dropped += row->count;
  }
  for (uint32_t d = 0; d < t->depth; ++d) {
    const stats_row_t *row = &t->rows[t->stack[d].row];
    stats_merged_t *m = stats_report_row(rep, row->stream, row->type, row->name);
    if (m)
      ++m->unclosed;
  }
  rep->dropped += t->dropped;
  if (locked)
    stats_thread_unlock(t);
}

static int stats_row_order(const void *a, const void *b) {
  const stats_merged_t *x = a, *y = b;
  bool xp = stats_type_is_point(x->type), yp = stats_type_is_point(y->type);
  if (xp != yp)
    return xp ? 1 : -1;
  if (x->total != y->total)
    return x->total > y->total ? -1 : 1;
  if (x->count != y->count)
    return x->count > y->count ? -1 : 1;
  int c = strcmp(x->name, y->name);
  return c ? c : (int)x->type - (int)y->type;
}

static const char *stats_kind(uint16_t type) {
  switch (type) {
  case XPTI_TRACE_GRAPH_CREATE: return "graph";
  case XPTI_TRACE_NODE_CREATE: return "node";
  case XPTI_TRACE_EDGE_CREATE: return "edge";
  default: return stats_type_is_point(type) ? "instant" : "span";
  }
}

/* "task" for the task_begin/task_end pair; the point's own name otherwise. */
static const char *stats_type_label(uint16_t type, char *buf, size_t len) {
  if (type == stats_timed_type) {
    snprintf(buf, len, "timed"); /* device work reported afterwards */
  } else if (stats_type_is_pair(type)) {
    xpt_trace_type_name(type, buf, len);
    size_t n = strlen(buf);
    if (n > 6 && strcmp(buf + n - 6, "_begin") == 0)
      buf[n - 6] = '\0';
  } else if (stats_type_is_known_point(type)) {
    xpt_trace_type_name(type, buf, len);
  } else {
    snprintf(buf, len, "type_%u", (unsigned)type);
  }
  return buf;
}

static const char *stats_stream_name(uint8_t stream, char *buf, size_t len) {
  const char *name = xptiLookupStreamName(stream);
  if (name)
    return name;
  snprintf(buf, len, "stream%u", (unsigned)stream);
  return buf;
}

/* Human-readable duration: three or four significant digits. */
static const char *stats_fmt_ns(uint64_t ns, char *buf, size_t len) {
  if (ns < 1000)
    snprintf(buf, len, "%lluns", (unsigned long long)ns);
  else if (ns < 1000000)
    snprintf(buf, len, "%.2fus", (double)ns / 1e3);
  else if (ns < UINT64_C(1000000000))
    snprintf(buf, len, "%.2fms", (double)ns / 1e6);
  else
    snprintf(buf, len, "%.2fs", (double)ns / 1e9);
  return buf;
}

static void stats_csv_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; ++s) {
    if (*s == '"')
      fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void stats_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static uint64_t stats_mean(const stats_merged_t *m) {
  return m->count ? (m->total + m->count / 2) / m->count : 0;
}

static bool stats_write_csv(const char *dir, const stats_report_t *rep) {
  char path[4096];
  FILE *f = xpt_create_stream(dir, "stats.csv", path, sizeof path);
  if (!f) {
    xpt_msg("xpti: cannot write '%s': %s", path, strerror(errno));
    return false;
  }
  fputs("stream,type,name,kind,count,total_ns,self_ns,mean_ns,min_ns,max_ns,p50_ns,p95_ns,"
        "p99_ns,unmatched_ends,unclosed_begins\n",
        f);
  char sbuf[32], tbuf[96];
  for (size_t r = 0; r < rep->nrows; ++r) {
    const stats_merged_t *m = &rep->rows[r];
    stats_csv_field(f, stats_stream_name(m->stream, sbuf, sizeof sbuf));
    fputc(',', f);
    stats_csv_field(f, stats_type_label(m->type, tbuf, sizeof tbuf));
    fputc(',', f);
    stats_csv_field(f, m->name);
    fprintf(f, ",%s,%llu", stats_kind(m->type), (unsigned long long)m->count);
    if (stats_type_is_point(m->type) || m->count == 0)
      fputs(",,,,,,,,", f);
    else
      fprintf(f, ",%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu", (unsigned long long)m->total,
              (unsigned long long)m->self, (unsigned long long)stats_mean(m),
              (unsigned long long)m->min, (unsigned long long)m->max,
              (unsigned long long)m->p50, (unsigned long long)m->p95,
              (unsigned long long)m->p99);
    fprintf(f, ",%llu,%llu\n", (unsigned long long)m->unmatched_ends,
            (unsigned long long)m->unclosed);
  }
  bool ok = !ferror(f);
  if (fclose(f) != 0 || !ok) {
    xpt_msg("xpti: cannot write '%s'", path);
    return false;
  }
  return true;
}

typedef struct stats_totals {
  uint64_t spans, total, self, instants, nodes, edges, graphs, unmatched, unclosed;
} stats_totals_t;

static stats_totals_t stats_sum(const stats_report_t *rep) {
  stats_totals_t s = {0};
  for (size_t r = 0; r < rep->nrows; ++r) {
    const stats_merged_t *m = &rep->rows[r];
    s.unmatched += m->unmatched_ends;
    s.unclosed += m->unclosed;
    switch (m->type) {
    case XPTI_TRACE_GRAPH_CREATE: s.graphs += m->count; break;
    case XPTI_TRACE_NODE_CREATE: s.nodes += m->count; break;
    case XPTI_TRACE_EDGE_CREATE: s.edges += m->count; break;
    default:
      if (stats_type_is_point(m->type)) {
        s.instants += m->count;
      } else {
        s.spans += m->count;
        s.total += m->total;
        s.self += m->self;
      }
    }
  }
  return s;
}

static bool stats_write_json(const char *dir, const stats_report_t *rep,
                             const stats_totals_t *s) {
  char path[4096];
  FILE *f = xpt_create_stream(dir, "stats.json", path, sizeof path);
  if (!f) {
    xpt_msg("xpti: cannot write '%s': %s", path, strerror(errno));
    return false;
  }
  fputs("{\n  \"program\": ", f);
  stats_json_string(f, xpt_program_name());
  fprintf(f, ",\n  \"threads\": %u,\n  \"percentile_relative_error\": %.6f,\n  \"rows\": [",
          rep->threads, STATS_HIST_RELATIVE_ERROR);
  char sbuf[32], tbuf[96];
  for (size_t r = 0; r < rep->nrows; ++r) {
    const stats_merged_t *m = &rep->rows[r];
    fputs(r ? ",\n    {\"stream\": " : "\n    {\"stream\": ", f);
    stats_json_string(f, stats_stream_name(m->stream, sbuf, sizeof sbuf));
    fputs(", \"type\": ", f);
    stats_json_string(f, stats_type_label(m->type, tbuf, sizeof tbuf));
    fputs(", \"name\": ", f);
    stats_json_string(f, m->name);
    fprintf(f, ", \"kind\": \"%s\", \"count\": %llu", stats_kind(m->type),
            (unsigned long long)m->count);
    if (!stats_type_is_point(m->type) && m->count)
      fprintf(f,
              ", \"total_ns\": %llu, \"self_ns\": %llu, \"mean_ns\": %llu, \"min_ns\": %llu, "
              "\"max_ns\": %llu, \"p50_ns\": %llu, \"p95_ns\": %llu, \"p99_ns\": %llu",
              (unsigned long long)m->total, (unsigned long long)m->self,
              (unsigned long long)stats_mean(m), (unsigned long long)m->min,
              (unsigned long long)m->max, (unsigned long long)m->p50,
              (unsigned long long)m->p95, (unsigned long long)m->p99);
    fprintf(f, ", \"unmatched_ends\": %llu, \"unclosed_begins\": %llu}",
            (unsigned long long)m->unmatched_ends, (unsigned long long)m->unclosed);
  }
  fprintf(f,
          "\n  ],\n  \"totals\": {\"spans\": %llu, \"total_ns\": %llu, \"self_ns\": %llu, "
          "\"instants\": %llu, \"graphs\": %llu, \"nodes\": %llu, \"edges\": %llu, "
          "\"unmatched_ends\": %llu, \"unclosed_begins\": %llu, \"dropped\": %llu}\n}\n",
          (unsigned long long)s->spans, (unsigned long long)s->total,
          (unsigned long long)s->self, (unsigned long long)s->instants,
          (unsigned long long)s->graphs, (unsigned long long)s->nodes,
          (unsigned long long)s->edges, (unsigned long long)s->unmatched,
          (unsigned long long)s->unclosed, (unsigned long long)rep->dropped);
  bool ok = !ferror(f);
  if (fclose(f) != 0 || !ok) {
    xpt_msg("xpti: cannot write '%s'", path);
    return false;
  }
  return true;
}

enum { STATS_TABLE_ROWS = 20, STATS_NAME_MAX = 40 };

static bool stats_in_table(const stats_merged_t *m) {
  return !stats_type_is_point(m->type) && m->count > 0;
}

/* Rows are sorted: the table is the first STATS_TABLE_ROWS span rows. */
static void stats_print_table(FILE *out, const stats_report_t *rep, const stats_totals_t *s,
                              const char *dir) {
  char sbuf[32], tbuf[96], b[9][24];
  int name_w = 5, stream_w = 6, type_w = 4;
  size_t spans = 0;
  for (size_t r = 0; r < rep->nrows; ++r) {
    const stats_merged_t *m = &rep->rows[r];
    if (!stats_in_table(m) || spans++ >= STATS_TABLE_ROWS)
      continue;
    int n = (int)strlen(m->name);
    name_w = n > name_w ? (n > STATS_NAME_MAX ? STATS_NAME_MAX : n) : name_w;
    n = (int)strlen(stats_stream_name(m->stream, sbuf, sizeof sbuf));
    stream_w = n > stream_w ? n : stream_w;
    n = (int)strlen(stats_type_label(m->type, tbuf, sizeof tbuf));
    type_w = n > type_w ? n : type_w;
  }
  fprintf(out, "xptrace stats: %s, %u thread(s); times of begin/end pairs, "
               "percentiles within %.1f%%\n",
          xpt_program_name(), rep->threads, 100.0 * STATS_HIST_RELATIVE_ERROR);
  fprintf(out, "%-*s  %-*s  %-*s %9s %10s %10s %10s %10s %10s %10s %10s %10s\n", name_w, "name",
          stream_w, "stream", type_w, "type", "count", "total", "self", "mean", "min", "max",
          "p50", "p95", "p99");
  size_t shown = 0;
  for (size_t r = 0; r < rep->nrows && shown < STATS_TABLE_ROWS; ++r) {
    const stats_merged_t *m = &rep->rows[r];
    if (!stats_in_table(m))
      continue;
    ++shown;
    char name[STATS_NAME_MAX + 1];
    if (strlen(m->name) > STATS_NAME_MAX)
      snprintf(name, sizeof name, "%.*s...", STATS_NAME_MAX - 3, m->name);
    else
      snprintf(name, sizeof name, "%s", m->name);
    fprintf(out, "%-*s  %-*s  %-*s %9llu %10s %10s %10s %10s %10s %10s %10s %10s\n", name_w,
            name, stream_w, stats_stream_name(m->stream, sbuf, sizeof sbuf), type_w,
            stats_type_label(m->type, tbuf, sizeof tbuf), (unsigned long long)m->count,
            stats_fmt_ns(m->total, b[0], sizeof b[0]), stats_fmt_ns(m->self, b[1], sizeof b[1]),
            stats_fmt_ns(stats_mean(m), b[2], sizeof b[2]),
            stats_fmt_ns(m->min, b[3], sizeof b[3]), stats_fmt_ns(m->max, b[4], sizeof b[4]),
            stats_fmt_ns(m->p50, b[5], sizeof b[5]), stats_fmt_ns(m->p95, b[6], sizeof b[6]),
            stats_fmt_ns(m->p99, b[7], sizeof b[7]));
  }
  if (spans > shown)
    fprintf(out, "... %zu more row(s) in stats.csv\n", spans - shown);
  fprintf(out, "%-*s  %-*s  %-*s %9llu %10s %10s\n", name_w, "total", stream_w, "", type_w, "",
          (unsigned long long)s->spans, stats_fmt_ns(s->total, b[0], sizeof b[0]),
          stats_fmt_ns(s->self, b[1], sizeof b[1]));
  fprintf(out,
          "instants %llu, graphs %llu, nodes %llu, edges %llu, unmatched ends %llu, "
          "unclosed begins %llu, dropped %llu\n",
          (unsigned long long)s->instants, (unsigned long long)s->graphs,
          (unsigned long long)s->nodes, (unsigned long long)s->edges,
          (unsigned long long)s->unmatched, (unsigned long long)s->unclosed,
          (unsigned long long)rep->dropped);
  if (dir)
    fprintf(out, "xptrace stats: every row in %s/stats.csv and stats.json\n", dir);
}

/* Through the standard error the program had at start (never fd 2 as
 * it is now: a trace file may have taken it); nothing if there was none. */
static void stats_print_to_stderr(const stats_report_t *rep, const stats_totals_t *s,
                                  const char *dir) {
  if (xpt_msg_fd() < 0)
    return;
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  if (!out)
    return;
  stats_print_table(out, rep, s, dir);
  if (fclose(out) == 0)
    xpt_msg_write(text, len);
  free(text);
}

/* A fatal signal may interrupt a thread that holds the lock (while it
 * registers itself): give up waiting after a while.  The list is only
 * ever prepended to, so walking it unlocked is safe. */
static bool stats_global_lock_for_report(void) {
  for (int tries = 0; tries < 2000; ++tries) {
    if (pthread_mutex_trylock(&stats_global.lock) == 0)
      return true;
    struct timespec pause = {0, 50000};
    nanosleep(&pause, NULL);
  }
  return false;
}

static void stats_report(void) {
  stats_report_t rep = {0};
  bool locked = stats_global_lock_for_report();
  for (stats_thread_t *t = stats_global.threads; t; t = t->next) {
    stats_merge_thread(&rep, t);
    ++rep.threads;
  }
  for (size_t r = 0; r < rep.nrows; ++r) {
    stats_merged_t *m = &rep.rows[r];
    if (m->count == 0 || stats_type_is_point(m->type)) {
      m->min = 0;
      continue;
    }
    m->p50 = stats_hist_quantile(&m->hist, m->count, 0.50);
    m->p95 = stats_hist_quantile(&m->hist, m->count, 0.95);
    m->p99 = stats_hist_quantile(&m->hist, m->count, 0.99);
    /* Bucket midpoints may fall outside what was seen. */
    uint64_t *p[3] = {&m->p50, &m->p95, &m->p99};
    for (int i = 0; i < 3; ++i) {
      if (*p[i] < m->min)
        *p[i] = m->min;
      if (*p[i] > m->max)
        *p[i] = m->max;
    }
  }
  qsort(rep.rows, rep.nrows, sizeof *rep.rows, stats_row_order);
  stats_totals_t sum = stats_sum(&rep);
  uint64_t events = sum.spans + sum.instants + sum.graphs + sum.nodes + sum.edges +
                    sum.unmatched + sum.unclosed;
  const char *dir = xpt_output_dir();
  bool written = dir && stats_write_csv(dir, &rep) && stats_write_json(dir, &rep, &sum);
  /* The table once, unless more was recorded since. */
  if (!stats_global.reported || events != stats_global.reported_events)
    stats_print_to_stderr(&rep, &sum, written ? dir : NULL);
  stats_global.reported = true;
  stats_global.reported_events = events;
  if (locked)
    pthread_mutex_unlock(&stats_global.lock);
  for (size_t r = 0; r < rep.nrows; ++r)
    stats_hist_free(&rep.rows[r].hist);
  free(rep.rows);
  free(rep.slots);
}

/* In a forked child the parent's numbers are the parent's to report. */
static void stats_forget_parent(void) {
  stats_thread_t *self = stats_tls;
  for (stats_thread_t *t = stats_global.threads; t; t = t->next) {
    atomic_store(&t->busy, 0);
    for (uint32_t r = 0; r < t->nrows; ++r) {
      stats_row_t *row = &t->rows[r];
      row->count = row->total = row->self = row->max = row->unmatched_ends = 0;
      row->min = UINT64_MAX;
      stats_hist_clear(&row->hist);
    }
    t->dropped = 0;
    if (t != self)
      t->depth = 0; /* that thread does not exist here */
  }
  stats_global.reported = false;
}

static void stats_flush(void *ctx, enum xpt_flush_reason reason) {
  (void)ctx;
  switch (reason) {
  case XPT_FLUSH_EXIT:
  case XPT_FLUSH_SIGNAL:
    stats_report();
    break;
  case XPT_FLUSH_FORK_CHILD:
    pthread_mutex_init(&stats_global.lock, NULL);
    stats_forget_parent();
    break;
  case XPT_FLUSH_FINALIZE:
    break; /* a stream ending is not the end of the program */
  }
}

/* ---- subscriber entry points ----------------------------------------------- */

static pthread_once_t stats_once = PTHREAD_ONCE_INIT;
static void stats_setup(void) { xpt_register_flush(stats_flush, NULL); }

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor,
                                     const char *version, const char *stream_name) {
  (void)major;
  (void)minor;
  (void)version;
  if (!stream_name || !xpt_stream_selected(stream_name))
    return;
  pthread_once(&stats_once, stats_setup);
  atomic_store(&stats_timed_type,
               xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID));
  uint8_t stream = xptiRegisterStream(stream_name);
  if (stream == XPTI_INVALID_STREAM_ID)
    return;
  /* Every type, user-defined ones of tools registered at any time
   * included.  DUPLICATE/UNDELETE: a stream initialised again. */
  static _Atomic bool said;
  xpti_result_t r = xptiRegisterStreamCallback(stream, stats_notify);
  if (r != XPTI_RESULT_SUCCESS && r != XPTI_RESULT_DUPLICATE && r != XPTI_RESULT_UNDELETE &&
      !atomic_exchange(&said, true))
    xpt_msg("xpti: stats collector cannot register for stream '%s': 0x%x", stream_name,
            (unsigned)r);
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream_name) { (void)stream_name; }
