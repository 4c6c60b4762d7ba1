/* xptrace report: tables built from a model (report_tables.c), a call
 * tree of the samples (report_tree.c), printed as text, CSV or JSON
 * (report_output.c). */
#ifndef REPORT_TABLE_H
#define REPORT_TABLE_H

#include <stdio.h>

#include "report_model.h"

/* What a column holds: how it prints and sorts. */
enum rp_kind {
  RP_K_STR,   /* text */
  RP_K_INT,   /* a count or an id */
  RP_K_NS,    /* nanoseconds: "1.23ms" in text, integer ns elsewhere */
  RP_K_PCT,   /* a percentage */
  RP_K_NUM,   /* a counter value */
  RP_K_DNS,   /* a signed difference of nanoseconds */
  RP_K_DINT,  /* a signed difference of counts */
  RP_K_RATIO, /* b / a; empty when a is 0 */
  RP_K_DPCT,  /* a signed difference of percentages, in points */
};
struct rp_cell {
  const char *s; /* RP_K_STR: the model's string (or static) */
  double v;
  bool empty;
};
#define RP_COLS_MAX 24
struct rp_table {
  const char *id;    /* section key: functions, points, devices, ... */
  const char *title; /* text heading */
  size_t ncols;
  const char *col[RP_COLS_MAX];
  enum rp_kind kind[RP_COLS_MAX];
  size_t nrows, cap;
  struct rp_cell *cells; /* nrows * ncols */
  int sort_col;          /* default sort column (descending; names ascending) */
  bool oom;
  char note[160];        /* a line after the table (text), e.g. totals */
  /* A tree (rows in tree order, column 0 the depth, column 1 the name
   * indented by it in text); text_order: the columns text shows, in
   * order (0 entries: all). */
  bool indented;
  size_t text_order[RP_COLS_MAX], ntext_order;
};

enum rp_format { RP_FMT_TEXT, RP_FMT_CSV, RP_FMT_JSON, RP_FMT_PPROF, RP_FMT_SVG };
struct rp_options {
  enum rp_format format;
  size_t top;       /* rows per table, 0 = all */
  const char *sort; /* a column name, NULL = each table's default */
  bool tree;
  size_t depth;     /* --tree depth, 0 = all */
  bool headers;     /* CSV: a section with no row keeps its header (--section) */
  struct rp_select sel;
};

/* "1.23ms", as the stats collector prints durations. */
void rp_fmt_ns(char *buf, size_t len, double ns);
void rp_table_init(struct rp_table *t, const char *id, const char *title);
void rp_table_col(struct rp_table *t, const char *name, enum rp_kind kind);
/* A new row of empty cells (NULL when out of memory). */
struct rp_cell *rp_table_row(struct rp_table *t);
void rp_table_free(struct rp_table *t);

/* The sections of one run (tables[] gets at most RP_TABLES_MAX). */
#define RP_TABLES_MAX 8
size_t rp_tables_build(const struct rp_model *m, const struct rp_select *sel,
                       struct rp_table *tables);
/* The sections of two runs side by side: a's rows matched with b's. */
size_t rp_tables_diff(const struct rp_model *a, const struct rp_model *b,
                      const struct rp_select *sel, struct rp_table *tables);
/* The call tree of the samples (selected by sel's regex: samples with a
 * matching frame), `depth` levels (0 = all). */
void rp_tree_build(const struct rp_model *m, const struct rp_select *sel, size_t depth,
                   struct rp_table *t);

/* The call tree of the slices on threads (function traces): calls,
 * total and self time per call path; sel's regex keeps the paths through
 * a matching function. */
void rp_calltree_build(const struct rp_model *m, const struct rp_select *sel, size_t depth,
                       struct rp_table *t);
/* Callers (every call path to it) and callees (its calls, merged over
 * its outermost calls) of one function of the slices on threads:
 * tables[0..1]. */
size_t rp_graph_build(const struct rp_model *m, const struct rp_select *sel, const char *function,
                      size_t depth, struct rp_table *tables);

/* Sort (by opts->sort when the table has that column), keep the top rows. */
void rp_table_sort(struct rp_table *t, const struct rp_options *opts);
/* Print every table in the chosen format; `source` names the input. */
void rp_print(FILE *out, struct rp_table *tables, size_t n, const struct rp_options *opts,
              const char *source, const char *other);

#endif /* REPORT_TABLE_H */
