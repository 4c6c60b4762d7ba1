/* xptrace report: the sections of one run, and of two side by side. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_table.h"

void rp_table_init(struct rp_table *t, const char *id, const char *title) {
  memset(t, 0, sizeof(*t));
  t->id = id;
  t->title = title;
  t->sort_col = -1;
}

void rp_table_col(struct rp_table *t, const char *name, enum rp_kind kind) {
  if (t->ncols == RP_COLS_MAX)
    return;
  t->col[t->ncols] = name;
  t->kind[t->ncols++] = kind;
}

struct rp_cell *rp_table_row(struct rp_table *t) {
  if (t->nrows == t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 64;
    struct rp_cell *c = realloc(t->cells, nc * t->ncols * sizeof(*c));
    if (!c) {
      t->oom = true;
      return NULL;
    }
    t->cells = c;
    t->cap = nc;
  }
  struct rp_cell *row = t->cells + t->nrows++ * t->ncols;
  for (size_t i = 0; i < t->ncols; i++)
    row[i] = (struct rp_cell){.s = "", .empty = true};
  return row;
}

void rp_table_free(struct rp_table *t) {
  free(t->cells);
  t->cells = NULL;
  t->nrows = t->cap = 0;
}

static void set(struct rp_cell *c, double v) {
  c->v = v;
  c->empty = false;
}
static void set_s(struct rp_cell *c, const char *s) {
  c->s = s;
  c->empty = false;
}
static void set_pct(struct rp_cell *c, double part, double whole) {
  if (whole > 0)
    set(c, 100.0 * part / whole);
}
static void set_ratio(struct rp_cell *c, double a, double b) {
  if (a > 0)
    set(c, b / a);
}

static const char *S(const struct rp_model *m, uint32_t id) { return rp_str_get(&m->s, id); }

/* The columns of a duration distribution. */
static void dist_cols(struct rp_table *t) {
  static const char *const names[] = {"mean", "min", "max", "p50", "p95", "p99"};
  for (size_t i = 0; i < 6; i++)
    rp_table_col(t, names[i], RP_K_NS);
}
static void dist_cells(struct rp_cell *c, const struct rp_durs *d, uint64_t total) {
  if (d->n == 0)
    return;
  set(&c[0], (double)(total / d->n));
  set(&c[1], (double)d->v[0]);
  set(&c[2], (double)d->v[d->n - 1]);
  set(&c[3], (double)rp_percentile(d, 50));
  set(&c[4], (double)rp_percentile(d, 95));
  set(&c[5], (double)rp_percentile(d, 99));
}

static void functions_table(const struct rp_model *m, const struct rp_select *sel,
                            struct rp_table *t) {
  rp_table_init(t, "functions", "Top functions (samples)");
  rp_table_col(t, "function", RP_K_STR);
  rp_table_col(t, "self", RP_K_INT);
  rp_table_col(t, "self%", RP_K_PCT);
  rp_table_col(t, "inclusive", RP_K_INT);
  rp_table_col(t, "inclusive%", RP_K_PCT);
  t->sort_col = 1;
  for (size_t i = 0; i < m->nfuncs; i++) {
    const struct rp_func *f = &m->funcs[i];
    if (!rp_select_name(sel, S(m, f->name)))
      continue;
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      return;
    set_s(&c[0], S(m, f->name));
    set(&c[1], (double)f->self);
    set_pct(&c[2], (double)f->self, (double)m->total_samples);
    set(&c[3], (double)f->incl);
    set_pct(&c[4], (double)f->incl, (double)m->total_samples);
  }
  snprintf(t->note, sizeof t->note, "samples %llu", (unsigned long long)m->total_samples);
}

static void points_table(const struct rp_model *m, const struct rp_select *sel,
                         struct rp_table *t) {
  rp_table_init(t, "points", "Trace points (slices on threads)");
  rp_table_col(t, "name", RP_K_STR);
  rp_table_col(t, "category", RP_K_STR);
  rp_table_col(t, "count", RP_K_INT);
  rp_table_col(t, "total", RP_K_NS);
  rp_table_col(t, "self", RP_K_NS);
  dist_cols(t);
  t->sort_col = 3;
  uint64_t count = 0, total = 0, self = 0;
  for (size_t i = 0; i < m->npoints; i++) {
    const struct rp_point *p = &m->points[i];
    if (!rp_select_name(sel, S(m, p->name)))
      continue;
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      return;
    set_s(&c[0], S(m, p->name));
    set_s(&c[1], S(m, p->cat));
    set(&c[2], (double)p->d.n);
    set(&c[3], (double)p->total);
    set(&c[4], (double)p->self);
    dist_cells(&c[5], &p->d, p->sum); /* the mean of every call */
    count += p->d.n;
    total += p->total;
    self += p->self;
  }
  char b1[32], b2[32];
  rp_fmt_ns(b1, sizeof b1, (double)total);
  rp_fmt_ns(b2, sizeof b2, (double)self);
  snprintf(t->note, sizeof t->note,
           "slices %llu, total %s, self %s; ends without a begin %llu, begins never ended %llu",
           (unsigned long long)count, b1, b2, (unsigned long long)m->unmatched_ends,
           (unsigned long long)m->unclosed);
}

static void devices_table(const struct rp_model *m, const struct rp_select *sel,
                          struct rp_table *t) {
  rp_table_init(t, "devices", "Device time per command");
  rp_table_col(t, "command", RP_K_STR);
  rp_table_col(t, "queue", RP_K_STR);
  rp_table_col(t, "count", RP_K_INT);
  rp_table_col(t, "total", RP_K_NS);
  rp_table_col(t, "total%", RP_K_PCT);
  dist_cols(t);
  t->sort_col = 3;
  uint64_t all = 0;
  for (size_t i = 0; i < m->ndevices; i++)
    all += m->devices[i].total;
  for (size_t i = 0; i < m->ndevices; i++) {
    const struct rp_device *d = &m->devices[i];
    if (!rp_select_name(sel, S(m, d->name)))
      continue;
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      return;
    set_s(&c[0], S(m, d->name));
    set_s(&c[1], S(m, d->queue));
    set(&c[2], (double)d->d.n);
    set(&c[3], (double)d->total);
    set_pct(&c[4], (double)d->total, (double)all);
    dist_cells(&c[5], &d->d, d->total);
  }
  char b1[32];
  rp_fmt_ns(b1, sizeof b1, (double)all);
  snprintf(t->note, sizeof t->note, "device time %s", b1);
}

static void processes_table(const struct rp_model *m, struct rp_table *t) {
  rp_table_init(t, "processes", "Processes");
  rp_table_col(t, "pid", RP_K_INT);
  rp_table_col(t, "name", RP_K_STR);
  rp_table_col(t, "threads", RP_K_INT);
  rp_table_col(t, "slices", RP_K_INT);
  rp_table_col(t, "samples", RP_K_INT);
  rp_table_col(t, "device", RP_K_INT);
  rp_table_col(t, "device_time", RP_K_NS);
  rp_table_col(t, "span", RP_K_NS);
  t->sort_col = 0;
  for (size_t i = 0; i < m->nprocs; i++) {
    const struct rp_process *p = &m->procs[i];
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      return;
    set(&c[0], p->pid);
    set_s(&c[1], S(m, p->name));
    set(&c[2], (double)p->threads);
    set(&c[3], (double)p->slices);
    set(&c[4], (double)p->samples);
    set(&c[5], (double)p->device);
    set(&c[6], (double)p->device_time);
    if (p->first <= p->last)
      set(&c[7], (double)(p->last - p->first));
  }
}

static void threads_table(const struct rp_model *m, struct rp_table *t) {
  rp_table_init(t, "threads", "Threads");
  rp_table_col(t, "pid", RP_K_INT);
  rp_table_col(t, "tid", RP_K_INT);
  rp_table_col(t, "name", RP_K_STR);
  rp_table_col(t, "slices", RP_K_INT);
  rp_table_col(t, "instants", RP_K_INT);
  rp_table_col(t, "busy", RP_K_NS);
  rp_table_col(t, "samples", RP_K_INT);
  rp_table_col(t, "span", RP_K_NS);
  t->sort_col = 0; /* pid, then tid (ties: text, then numbers in column order) */
  for (size_t i = 0; i < m->nthreads; i++) {
    const struct rp_thread *th = &m->threads[i];
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      return;
    set(&c[0], th->pid);
    set(&c[1], th->tid);
    set_s(&c[2], S(m, th->name));
    set(&c[3], (double)th->slices);
    set(&c[4], (double)th->instants);
    set(&c[5], (double)th->busy);
    set(&c[6], (double)th->samples);
    if (th->first <= th->last)
      set(&c[7], (double)(th->last - th->first));
  }
}

static void counters_table(const struct rp_model *m, const struct rp_select *sel,
                           struct rp_table *t) {
  rp_table_init(t, "counters", "Counters");
  rp_table_col(t, "counter", RP_K_STR);
  rp_table_col(t, "unit", RP_K_STR); /* of first ... max: the track's */
  rp_table_col(t, "pid", RP_K_INT);
  rp_table_col(t, "tid", RP_K_INT);
  rp_table_col(t, "values", RP_K_INT);
  rp_table_col(t, "first", RP_K_NUM);
  rp_table_col(t, "last", RP_K_NUM);
  rp_table_col(t, "delta", RP_K_NUM);
  rp_table_col(t, "min", RP_K_NUM);
  rp_table_col(t, "max", RP_K_NUM);
  t->sort_col = 0;
  for (size_t i = 0; i < m->ncounters; i++) {
    const struct rp_counter *k = &m->counters[i];
    if (!rp_select_name(sel, S(m, k->name)))
      continue;
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      return;
    set_s(&c[0], S(m, k->name));
    set_s(&c[1], S(m, k->unit));
    if (k->pid >= 0)
      set(&c[2], k->pid);
    if (k->tid >= 0)
      set(&c[3], k->tid);
    set(&c[4], (double)k->n);
    set(&c[5], k->first);
    set(&c[6], k->last);
    set(&c[7], k->last - k->first);
    set(&c[8], k->min);
    set(&c[9], k->max);
  }
}

/* The time windows (--periods) per process: what the run recorded. */
static void windows_table(const struct rp_model *m, struct rp_table *t) {
  rp_table_init(t, "windows", "Time windows (--periods)");
  rp_table_col(t, "pid", RP_K_INT);
  rp_table_col(t, "name", RP_K_STR);
  rp_table_col(t, "windows", RP_K_INT);
  rp_table_col(t, "open", RP_K_NS);
  rp_table_col(t, "mean", RP_K_NS);
  rp_table_col(t, "min", RP_K_NS);
  rp_table_col(t, "max", RP_K_NS);
  t->sort_col = 0;
  uint64_t n = 0, open = 0;
  for (size_t i = 0; i < m->nwindows; i++) {
    const struct rp_window *w = &m->windows[i];
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      return;
    uint32_t name = 0;
    for (size_t k = 0; k < m->nprocs && !name; k++)
      if (m->procs[k].pid == w->pid)
        name = m->procs[k].name;
    set(&c[0], w->pid);
    set_s(&c[1], S(m, name));
    set(&c[2], (double)w->n);
    set(&c[3], (double)w->total);
    set(&c[4], (double)(w->total / w->n));
    set(&c[5], (double)w->min);
    set(&c[6], (double)w->max);
    n += w->n;
    open += w->total;
  }
  char b1[32];
  rp_fmt_ns(b1, sizeof b1, (double)open);
  snprintf(t->note, sizeof t->note, "windows %llu, open %s", (unsigned long long)n, b1);
}

size_t rp_tables_build(const struct rp_model *m, const struct rp_select *sel,
                       struct rp_table *tables) {
  size_t n = 0;
  functions_table(m, sel, &tables[n++]);
  points_table(m, sel, &tables[n++]);
  devices_table(m, sel, &tables[n++]);
  counters_table(m, sel, &tables[n++]);
  processes_table(m, &tables[n++]);
  threads_table(m, &tables[n++]);
  windows_table(m, &tables[n++]);
  return n;
}

/* ---- two runs ---- */

/* Rows of two tables matched by their first `nkey` string columns:
 * emits a's rows (with b's match or none), then b's rows a lacks. */
struct rp_pair {
  const struct rp_cell *a, *b;
};
static bool same_key(const struct rp_cell *x, const struct rp_cell *y, size_t nkey) {
  for (size_t k = 0; k < nkey; k++)
    if (strcmp(x[k].s, y[k].s) != 0)
      return false;
  return true;
}
static struct rp_pair *pair_rows(const struct rp_table *ta, const struct rp_table *tb, size_t nkey,
                                 size_t *np) {
  struct rp_pair *p = calloc(ta->nrows + tb->nrows + 1, sizeof(*p));
  bool *used = calloc(tb->nrows + 1, 1);
  size_t n = 0;
  if (!p || !used) {
    free(p);
    free(used);
    *np = 0;
    return NULL;
  }
  for (size_t i = 0; i < ta->nrows; i++) {
    const struct rp_cell *a = ta->cells + i * ta->ncols, *b = NULL;
    for (size_t j = 0; j < tb->nrows && !b; j++)
      if (!used[j] && same_key(a, tb->cells + j * tb->ncols, nkey)) {
        used[j] = true;
        b = tb->cells + j * tb->ncols;
      }
    p[n++] = (struct rp_pair){a, b};
  }
  for (size_t j = 0; j < tb->nrows; j++)
    if (!used[j])
      p[n++] = (struct rp_pair){NULL, tb->cells + j * tb->ncols};
  free(used);
  *np = n;
  return p;
}

/* Columns of a diff: keys, then per compared column a/b (and delta and
 * ratio for the first compared column). */
struct rp_diffspec {
  const char *id, *title;
  size_t nkey;
  size_t ncmp;
  const char *cmp[4]; /* column names of the source tables */
};

static int col_index(const struct rp_table *t, const char *name) {
  for (size_t i = 0; i < t->ncols; i++)
    if (strcmp(t->col[i], name) == 0)
      return (int)i;
  return -1;
}

static void diff_one(const struct rp_table *ta, const struct rp_table *tb,
                     const struct rp_diffspec *d, char names[4][2][24], struct rp_table *t) {
  rp_table_init(t, d->id, d->title);
  for (size_t k = 0; k < d->nkey; k++)
    rp_table_col(t, ta->col[k], RP_K_STR);
  int src[4];
  for (size_t c = 0; c < d->ncmp; c++) {
    src[c] = col_index(ta, d->cmp[c]);
    enum rp_kind kind = ta->kind[src[c]];
    for (int side = 0; side < 2; side++) {
      snprintf(names[c][side], sizeof names[c][side], "%s_%c", d->cmp[c], side ? 'b' : 'a');
      rp_table_col(t, names[c][side], kind);
    }
    if (c == 0) {
      rp_table_col(t, "delta", kind == RP_K_NS ? RP_K_DNS : RP_K_DINT);
      rp_table_col(t, "ratio", RP_K_RATIO);
    }
  }
  t->sort_col = (int)d->nkey + 2; /* delta, by size */
  size_t np;
  struct rp_pair *p = pair_rows(ta, tb, d->nkey, &np);
  for (size_t i = 0; i < np; i++) {
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      break;
    const struct rp_cell *key = p[i].a ? p[i].a : p[i].b;
    for (size_t k = 0; k < d->nkey; k++)
      set_s(&c[k], key[k].s);
    size_t col = d->nkey;
    for (size_t j = 0; j < d->ncmp; j++) {
      const struct rp_cell *a = p[i].a ? &p[i].a[src[j]] : NULL;
      const struct rp_cell *b = p[i].b ? &p[i].b[src[j]] : NULL;
      double va = a && !a->empty ? a->v : 0, vb = b && !b->empty ? b->v : 0;
      if (a && !a->empty)
        set(&c[col], va);
      if (b && !b->empty)
        set(&c[col + 1], vb);
      col += 2;
      if (j == 0) {
        set(&c[col++], vb - va);
        if (a && b)
          set_ratio(&c[col], va, vb);
        col++;
      }
    }
  }
  free(p);
}

/* The functions of two runs by their shares of each run's samples (runs
 * of different lengths compare), the change in points, and the noise:
 * two standard errors of the change, binomial from the counts. */
static void diff_functions(const struct rp_table *ta, const struct rp_table *tb, uint64_t na,
                           uint64_t nb, struct rp_table *t) {
  rp_table_init(t, "functions", "Top functions (samples), shares a -> b");
  rp_table_col(t, "function", RP_K_STR);
  rp_table_col(t, "self%_a", RP_K_PCT);
  rp_table_col(t, "self%_b", RP_K_PCT);
  rp_table_col(t, "change", RP_K_DPCT);
  rp_table_col(t, "noise", RP_K_PCT);
  rp_table_col(t, "self_a", RP_K_INT);
  rp_table_col(t, "self_b", RP_K_INT);
  rp_table_col(t, "inclusive%_a", RP_K_PCT);
  rp_table_col(t, "inclusive%_b", RP_K_PCT);
  rp_table_col(t, "note", RP_K_STR);
  t->sort_col = 3;
  size_t np, quiet = 0, moved = 0;
  struct rp_pair *p = pair_rows(ta, tb, 1, &np);
  for (size_t i = 0; i < np; i++) {
    struct rp_cell *c = rp_table_row(t);
    if (!c)
      break;
    const struct rp_cell *x = p[i].a, *y = p[i].b;
    set_s(&c[0], (x ? x : y)[0].s);
    double sa = na ? (x ? x[1].v : 0) / (double)na : 0, sb = nb ? (y ? y[1].v : 0) / (double)nb : 0;
    set(&c[1], 100 * sa);
    set(&c[2], 100 * sb);
    set(&c[3], 100 * (sb - sa));
    double var = (na ? sa * (1 - sa) / (double)na : 0) + (nb ? sb * (1 - sb) / (double)nb : 0);
    set(&c[4], 200 * sqrt(var));
    set(&c[5], x ? x[1].v : 0);
    set(&c[6], y ? y[1].v : 0);
    if (x)
      set(&c[7], x[4].v);
    if (y)
      set(&c[8], y[4].v);
    bool noise = fabs(100 * (sb - sa)) <= 200 * sqrt(var);
    set_s(&c[9], noise ? "noise" : "");
    quiet += noise;
    moved += !noise;
  }
  free(p);
  snprintf(t->note, sizeof t->note,
           "samples a %llu, b %llu; change: b - a in points of each run's samples; %zu row(s) "
           "changed by more than their noise (2 standard errors), %zu within it",
           (unsigned long long)na, (unsigned long long)nb, moved, quiet);
}

size_t rp_tables_diff(const struct rp_model *a, const struct rp_model *b,
                      const struct rp_select *sel, struct rp_table *tables) {
  /* column names ("total_a"): alive as long as the program */
  static char names[4][4][2][24];
  static const struct rp_diffspec specs[] = {
      {"functions", "Top functions (samples), a -> b", 1, 2, {"self", "inclusive"}},
      {"points", "Trace points, a -> b", 2, 3, {"total", "count", "mean"}},
      {"devices", "Device time per command, a -> b", 2, 3, {"total", "count", "mean"}},
      {"counters", "Counters (delta over the run), a -> b", 2, 1, {"delta"}},
  };
  struct rp_table ta[RP_TABLES_MAX], tb[RP_TABLES_MAX];
  size_t na = rp_tables_build(a, sel, ta);
  size_t nb = rp_tables_build(b, sel, tb);
  size_t n = 0;
  for (size_t s = 0; s < sizeof(specs) / sizeof(specs[0]); s++)
    for (size_t i = 0; i < na && i < nb; i++)
      if (strcmp(ta[i].id, specs[s].id) == 0 && s == 0)
        diff_functions(&ta[i], &tb[i], a->total_samples, b->total_samples, &tables[n++]);
      else if (strcmp(ta[i].id, specs[s].id) == 0)
        diff_one(&ta[i], &tb[i], &specs[s], names[s], &tables[n++]);
  for (size_t i = 0; i < na; i++)
    rp_table_free(&ta[i]);
  for (size_t i = 0; i < nb; i++)
    rp_table_free(&tb[i]);
  return n;
}
