/* libxpti_stats.so: the merged table of rows, and the report written
 * from it (stats.csv, stats.json, the table on stderr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xpti/xpti_trace_framework.h>

#include "stats_internal.h"
#include "xpt_api.h"

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

/* ---- rows merged by name ------------------------------------------------------ */

uint64_t stats_hash_str(const char *s, uint16_t type, uint8_t stream) {
  uint64_t h = UINT64_C(1469598103934665603) ^ type ^ ((uint64_t)stream << 16);
  for (; *s; ++s)
    h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
  return h;
}

stats_row_t *stats_table_row(stats_table_t *tab, uint8_t stream, uint16_t type,
                             const char *name) {
  if ((tab->nrows + 1) * 2 > tab->slots_cap) {
    size_t cap = tab->slots_cap ? tab->slots_cap * 2 : 256;
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
      return NULL;
    for (size_t r = 0; r < tab->nrows; ++r) {
      const stats_row_t *m = &tab->rows[r];
      size_t i = (size_t)stats_hash_str(m->name, m->type, m->stream) & (cap - 1);
      while (slots[i])
        i = (i + 1) & (cap - 1);
      slots[i] = r + 1;
    }
    free(tab->slots);
    tab->slots = slots;
    tab->slots_cap = cap;
  }
  size_t i = (size_t)stats_hash_str(name, type, stream) & (tab->slots_cap - 1);
  for (; tab->slots[i]; i = (i + 1) & (tab->slots_cap - 1)) {
    stats_row_t *m = &tab->rows[tab->slots[i] - 1];
    if (m->type == type && m->stream == stream && strcmp(m->name, name) == 0)
      return m;
  }
  if (tab->nrows == tab->cap) {
    size_t cap = tab->cap ? tab->cap * 2 : 64;
    stats_row_t *rows = realloc(tab->rows, cap * sizeof *rows);
    if (!rows)
      return NULL;
    tab->rows = rows;
    tab->cap = cap;
  }
  /* A thread's own copy of a name goes when the thread does. */
  if (tab->owns_names && !(name = strdup(name)))
    return NULL;
  stats_row_t *m = &tab->rows[tab->nrows];
  memset(m, 0, sizeof *m);
  m->name = name;
  m->type = type;
  m->stream = stream;
  m->min = UINT64_MAX;
  tab->slots[i] = ++tab->nrows;
  return m;
}

void stats_table_add(stats_table_t *tab, const stats_row_t *from) {
  stats_row_t *m = stats_table_row(tab, from->stream, from->type, from->name);
  if (!m) {
    tab->dropped += from->count + from->unmatched_ends + from->unclosed;
    return;
  }
  m->ticks |= from->ticks;
  m->count += from->count;
  m->total += from->total;
  m->self += from->self;
  m->unmatched_ends += from->unmatched_ends;
  m->unclosed += from->unclosed;
  if (from->min < m->min)
    m->min = from->min;
  if (from->max > m->max)
    m->max = from->max;
  if (!stats_hist_merge(&m->hist, &from->hist))
    tab->dropped += from->count;
}

void stats_table_free(stats_table_t *tab) {
  for (size_t r = 0; r < tab->nrows; ++r) {
    stats_hist_free(&tab->rows[r].hist);
    if (tab->owns_names)
      free((char *)tab->rows[r].name);
  }
  free(tab->rows);
  free(tab->slots);
  free(tab->halves);
  tab->rows = NULL;
  tab->slots = NULL;
  tab->halves = NULL;
  tab->nhalves = tab->halves_cap = 0;
  tab->nrows = tab->cap = tab->slots_cap = 0;
}

/* ---- output ---------------------------------------------------------------------- */

static int stats_row_order(const void *a, const void *b) {
  const stats_row_t *x = a, *y = b;
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
  const char *name = xpt_api_stream_name(stream);
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

static uint64_t stats_mean(const stats_row_t *m) {
  return m->count ? (m->total + m->count / 2) / m->count : 0;
}

static bool stats_write_csv(const char *dir, const stats_table_t *rep) {
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
    const stats_row_t *m = &rep->rows[r];
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

static stats_totals_t stats_sum(const stats_table_t *rep) {
  stats_totals_t s = {0};
  for (size_t r = 0; r < rep->nrows; ++r) {
    const stats_row_t *m = &rep->rows[r];
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

static bool stats_write_json(const char *dir, const stats_table_t *rep,
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
    const stats_row_t *m = &rep->rows[r];
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

static bool stats_in_table(const stats_row_t *m) {
  return !stats_type_is_point(m->type) && m->count > 0;
}

/* Rows are sorted: the table is the first STATS_TABLE_ROWS span rows. */
static void stats_print_table(FILE *out, const stats_table_t *rep, const stats_totals_t *s,
                              const char *dir) {
  char sbuf[32], tbuf[96], b[9][24];
  int name_w = 5, stream_w = 6, type_w = 4;
  size_t spans = 0;
  for (size_t r = 0; r < rep->nrows; ++r) {
    const stats_row_t *m = &rep->rows[r];
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
    const stats_row_t *m = &rep->rows[r];
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

/* An MPI rank: one line, not the table, so that a job prints a line per
 * rank (none under xptrace run, whose line names the files); NULL when
 * not a rank. */
static const char *stats_mpi_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v)
      return v;
  }
  return NULL;
}

static void stats_print_rank(FILE *out, const char *rank, const stats_totals_t *s,
                             const char *dir) {
  char b[24];
  fprintf(out, "xptrace stats: %s rank %s: %llu begin/end pairs, %s; %s%s\n",
          xpt_program_name(), rank, (unsigned long long)s->spans,
          stats_fmt_ns(s->total, b, sizeof b), dir ? "every row in " : "no statistics file",
          dir ? dir : "");
}

/* Through the standard error the program had at start (never fd 2 as
 * it is now: a trace file may have taken it); nothing if there was none. */
static void stats_print_to_stderr(const stats_table_t *rep, const stats_totals_t *s,
                                  const char *dir) {
  if (xpt_msg_fd() < 0)
    return;
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  if (!out)
    return;
  static const char *rank; /* read once */
  static bool rank_read, under_xptrace;
  if (!rank_read) {
    rank = stats_mpi_rank();
    under_xptrace = getenv("XPTRACE_SESSION") != NULL;
    rank_read = true;
  }
  if (rank && under_xptrace) {
    /* xptrace names the rank's files in its own line */
  } else if (rank) {
    char csv[4096];
    if (dir)
      snprintf(csv, sizeof csv, "%s/stats.csv", dir);
    stats_print_rank(out, rank, s, dir ? csv : NULL);
  } else {
    stats_print_table(out, rep, s, dir);
  }
  if (fclose(out) == 0)
    xpt_msg_write(text, len);
  free(text);
}

static struct {
  uint64_t events; /* events covered by the last table printed */
  bool done;
} stats_reported;

void stats_report_forget(void) { stats_reported.done = false; }

static uint64_t stats_scale(uint64_t ticks, double ns_per_tick) {
  return (uint64_t)((double)ticks * ns_per_tick + 0.5);
}

void stats_report_write(stats_table_t *rep, double ns_per_tick) {
  for (size_t r = 0; r < rep->nrows; ++r) {
    stats_row_t *m = &rep->rows[r];
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
    if (m->ticks && ns_per_tick > 0) {
      uint64_t *v[7] = {&m->total, &m->self, &m->min, &m->max, &m->p50, &m->p95, &m->p99};
      for (int i = 0; i < 7; ++i)
        *v[i] = stats_scale(*v[i], ns_per_tick);
      m->ticks = false;
    }
  }
  if (rep->nrows) /* none: rows may be NULL, which qsort must not get */
    qsort(rep->rows, rep->nrows, sizeof *rep->rows, stats_row_order);
  stats_totals_t sum = stats_sum(rep);
  uint64_t events = sum.spans + sum.instants + sum.graphs + sum.nodes + sum.edges +
                    sum.unmatched + sum.unclosed;
  const char *dir = xpt_output_dir();
  bool written = dir && stats_write_csv(dir, rep) && stats_write_json(dir, rep, &sum);
  if (!stats_reported.done || events != stats_reported.events)
    stats_print_to_stderr(rep, &sum, written ? dir : NULL);
  stats_reported.done = true;
  stats_reported.events = events;
}
