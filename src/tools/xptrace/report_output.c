/* xptrace report: sorting and printing the tables (text, CSV, JSON). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_table.h"

/* ---- sorting ---- */
static int sort_column(const struct rp_table *t, const char *name) {
  if (!name)
    return t->sort_col;
  for (size_t i = 0; i < t->ncols; i++)
    if (strcmp(t->col[i], name) == 0)
      return (int)i;
  /* a diff table: "total" sorts by "total_b" */
  size_t n = strlen(name);
  for (size_t i = 0; i < t->ncols; i++)
    if (strncmp(t->col[i], name, n) == 0 && strcmp(t->col[i] + n, "_b") == 0)
      return (int)i;
  if (strcmp(name, "name") == 0) /* the first text column */
    for (size_t i = 0; i < t->ncols; i++)
      if (t->kind[i] == RP_K_STR)
        return (int)i;
  return t->sort_col;
}

struct sort_ctx {
  const struct rp_table *t;
  int col;
};

static double sort_value(const struct rp_cell *c, enum rp_kind k) {
  if (c->empty)
    return -INFINITY;
  return k == RP_K_DNS || k == RP_K_DINT || k == RP_K_DPCT ? fabs(c->v) : c->v;
}

static int row_cmp(const void *a, const void *b, void *vctx) {
  const struct sort_ctx *x = vctx;
  const struct rp_table *t = x->t;
  const struct rp_cell *ra = a, *rb = b;
  if (x->col >= 0) {
    enum rp_kind k = t->kind[x->col];
    if (k == RP_K_STR) {
      int c = strcmp(ra[x->col].s, rb[x->col].s);
      if (c)
        return c;
    } else {
      double va = sort_value(&ra[x->col], k), vb = sort_value(&rb[x->col], k);
      bool ids = !strcmp(t->col[x->col], "pid") || !strcmp(t->col[x->col], "tid");
      if (va != vb)
        return (va > vb) != ids ? -1 : 1; /* largest first; ids ascending */
    }
  }
  /* ties: pid and tid, the text columns, then the numbers, in column order */
  for (size_t i = 0; i < t->ncols; i++) {
    bool ids = !strcmp(t->col[i], "pid") || !strcmp(t->col[i], "tid");
    if (ids && ra[i].v != rb[i].v)
      return ra[i].v < rb[i].v ? -1 : 1;
  }
  for (size_t i = 0; i < t->ncols; i++) {
    if (t->kind[i] == RP_K_STR) {
      int c = strcmp(ra[i].s, rb[i].s);
      if (c)
        return c;
    }
  }
  for (size_t i = 0; i < t->ncols; i++) {
    if (t->kind[i] != RP_K_STR && ra[i].v != rb[i].v)
      return ra[i].v < rb[i].v ? -1 : 1;
  }
  return 0;
}

void rp_table_sort(struct rp_table *t, const struct rp_options *opts) {
  if (t->indented) /* tree order */
    return;
  struct sort_ctx ctx = {t, sort_column(t, opts->sort)};
  if (t->nrows > 1) /* cells is NULL with no row */
    qsort_r(t->cells, t->nrows, t->ncols * sizeof(struct rp_cell), row_cmp, &ctx);
  if (opts->top && t->nrows > opts->top)
    t->nrows = opts->top;
}

/* ---- cells as text ---- */
void rp_fmt_ns(char *buf, size_t len, double v) {
  double a = fabs(v);
  const char *sign = v < 0 ? "-" : "";
  if (a < 1000)
    snprintf(buf, len, "%s%.0fns", sign, a);
  else if (a < 1e6)
    snprintf(buf, len, "%s%.2fus", sign, a / 1e3);
  else if (a < 1e9)
    snprintf(buf, len, "%s%.2fms", sign, a / 1e6);
  else
    snprintf(buf, len, "%s%.2fs", sign, a / 1e9);
}

static void fmt_num(char *buf, size_t len, double v) {
  if (v == floor(v) && fabs(v) < 1e15)
    snprintf(buf, len, "%.0f", v);
  else
    snprintf(buf, len, "%.6g", v);
}

/* human: text; else exact (CSV and JSON numbers) */
static const char *cell_str(const struct rp_cell *c, enum rp_kind k, bool human, char *buf,
                            size_t len) {
  if (c->empty)
    return "";
  switch (k) {
  case RP_K_STR:
    return c->s;
  case RP_K_INT:
    snprintf(buf, len, "%.0f", c->v);
    break;
  case RP_K_NS:
  case RP_K_DNS:
    if (human) {
      rp_fmt_ns(buf, len, c->v);
      if (k == RP_K_DNS && c->v > 0)
        memmove(buf + 1, buf, strlen(buf) + 1), buf[0] = '+';
    } else
      snprintf(buf, len, "%.0f", c->v);
    break;
  case RP_K_DINT:
    snprintf(buf, len, human ? "%+.0f" : "%.0f", c->v);
    break;
  case RP_K_PCT:
    snprintf(buf, len, human ? "%.2f%%" : "%.2f", c->v);
    break;
  case RP_K_NUM:
    if (human || (c->v == floor(c->v) && fabs(c->v) < 1e15))
      fmt_num(buf, len, c->v);
    else
      snprintf(buf, len, "%.17g", c->v);
    break;
  case RP_K_RATIO:
    snprintf(buf, len, human ? "%.2fx" : "%.4f", c->v);
    break;
  case RP_K_DPCT:
    snprintf(buf, len, human ? "%+.2f" : "%.2f", c->v);
    break;
  }
  return buf;
}

/* ---- text ---- */
#define NAME_W_MAX 60

static void print_text_table(FILE *out, const struct rp_table *t) {
  if (t->nrows == 0)
    return;
  bool tree = t->indented;
  size_t w[RP_COLS_MAX];
  char buf[128];
  for (size_t i = 0; i < t->ncols; i++)
    w[i] = strlen(t->col[i]);
  for (size_t r = 0; r < t->nrows; r++)
    for (size_t i = 0; i < t->ncols; i++) {
      const struct rp_cell *c = &t->cells[r * t->ncols + i];
      size_t l = strlen(cell_str(c, t->kind[i], true, buf, sizeof buf));
      if (tree && i == 1)
        l += 2 * (size_t)c[-1].v;
      if (t->kind[i] == RP_K_STR && l > NAME_W_MAX)
        l = NAME_W_MAX;
      if (l > w[i])
        w[i] = l;
    }
  fprintf(out, "\n%s\n", t->title);
  size_t order[RP_COLS_MAX], n = 0;
  if (t->ntext_order)
    for (size_t i = 0; i < t->ntext_order; i++)
      order[n++] = t->text_order[i];
  else
    for (size_t i = 0; i < t->ncols; i++)
      order[n++] = i;
  for (size_t j = 0; j < n; j++) {
    size_t i = order[j];
    bool left = t->kind[i] == RP_K_STR;
    int wid = left && j + 1 == n ? 0 : (left ? -(int)w[i] : (int)w[i]);
    fprintf(out, "%s%*s", j ? "  " : "", wid, t->col[i]);
  }
  fputc('\n', out);
  for (size_t r = 0; r < t->nrows; r++) {
    const struct rp_cell *row = &t->cells[r * t->ncols];
    char line[1024];
    size_t len = 0;
    for (size_t j = 0; j < n && len < sizeof line; j++) {
      size_t i = order[j];
      const char *s = cell_str(&row[i], t->kind[i], true, buf, sizeof buf);
      char name[NAME_W_MAX + 1];
      if (t->kind[i] == RP_K_STR) {
        int indent = tree ? 2 * (int)row[0].v : 0;
        if (indent > NAME_W_MAX - 4)
          indent = NAME_W_MAX - 4;
        size_t room = NAME_W_MAX - (size_t)indent;
        if (strlen(s) > room)
          snprintf(name, sizeof name, "%*s%.*s...", indent, "", (int)room - 3, s);
        else
          snprintf(name, sizeof name, "%*s%s", indent, "", s);
        s = name;
      }
      bool left = t->kind[i] == RP_K_STR;
      bool last = j + 1 == n;
      int wid = left && last ? 0 : (left ? -(int)w[i] : (int)w[i]);
      int k = snprintf(line + len, sizeof line - len, "%s%*s", j ? "  " : "", wid, s);
      if (k > 0)
        len += (size_t)k;
    }
    if (len >= sizeof line)
      len = sizeof line - 1;
    while (len && line[len - 1] == ' ')
      len--;
    fprintf(out, "%.*s\n", (int)len, line);
  }
  if (t->note[0])
    fprintf(out, "%s\n", t->note);
}

/* ---- CSV ---- */
static void csv_field(FILE *out, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void print_csv_table(FILE *out, const struct rp_table *t, bool *first, bool headers) {
  if (t->nrows == 0 && !headers)
    return;
  if (!*first)
    fputc('\n', out);
  *first = false;
  fputs("section", out);
  for (size_t i = 0; i < t->ncols; i++) {
    fputc(',', out);
    csv_field(out, t->col[i]);
  }
  fputc('\n', out);
  char buf[128];
  for (size_t r = 0; r < t->nrows; r++) {
    fputs(t->id, out);
    for (size_t i = 0; i < t->ncols; i++) {
      fputc(',', out);
      csv_field(out, cell_str(&t->cells[r * t->ncols + i], t->kind[i], false, buf, sizeof buf));
    }
    fputc('\n', out);
  }
}

/* ---- JSON ---- */
static void json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(out, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(out, "\\u%04x", *p);
    else
      fputc(*p, out);
  }
  fputc('"', out);
}

static void print_json_table(FILE *out, const struct rp_table *t, bool first) {
  fprintf(out, "%s\n  ", first ? "" : ",");
  json_str(out, t->id);
  fputs(": {\"title\": ", out);
  json_str(out, t->title);
  fputs(", \"rows\": [", out);
  char buf[128];
  for (size_t r = 0; r < t->nrows; r++) {
    fputs(r ? ",\n    {" : "\n    {", out);
    bool any = false;
    for (size_t i = 0; i < t->ncols; i++) {
      const struct rp_cell *c = &t->cells[r * t->ncols + i];
      if (c->empty)
        continue; /* absent, as in stats.json */
      fputs(any ? ", " : "", out);
      any = true;
      json_str(out, t->col[i]);
      fputs(": ", out);
      if (t->kind[i] == RP_K_STR)
        json_str(out, c->s);
      else
        fputs(cell_str(c, t->kind[i], false, buf, sizeof buf), out);
    }
    fputc('}', out);
  }
  fputs(t->nrows ? "\n  ]}" : "]}", out);
}

void rp_print(FILE *out, struct rp_table *tables, size_t n, const struct rp_options *opts,
              const char *source, const char *other) {
  bool first = true;
  switch (opts->format) {
  case RP_FMT_TEXT:
    if (other)
      fprintf(out, "xptrace report: a = %s, b = %s\n", source, other);
    else
      fprintf(out, "xptrace report: %s\n", source);
    for (size_t i = 0; i < n; i++)
      print_text_table(out, &tables[i]);
    break;
  case RP_FMT_CSV:
    for (size_t i = 0; i < n; i++)
      print_csv_table(out, &tables[i], &first, opts->headers);
    break;
  case RP_FMT_JSON:
    fputs("{\"source\": ", out);
    json_str(out, source);
    if (other) {
      fputs(", \"other\": ", out);
      json_str(out, other);
    }
    fputc(',', out);
    for (size_t i = 0; i < n; i++) {
      print_json_table(out, &tables[i], first);
      first = false;
    }
    fputs("\n}\n", out);
    break;
  case RP_FMT_PPROF: /* written by report_pprof.c, report_svg.c */
  case RP_FMT_SVG:
    break;
  }
}
