/* Ranking the experiments of a profile.coz.  For progress point P, the
 * period (effective duration per visit) of the experiments at speedup s on
 * line L against the baseline period (all experiments at speedup 0, every
 * line pooled: they are the same treatment) predicts the program speedup
 * 1 - p(L,s)/p0.  Periods are ratio estimators over experiments; their
 * standard errors give the confidence (95 %, normal).  Lines rank by the
 * least-squares slope of predicted program speedup against line speedup. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "causal_report.h"
#include "xpt_files.h"

typedef struct {
  int line, point, speedup; /* speedup in % */
  double duration, delta;   /* ns, visits (latency: ns per departure folded in) */
} rec_t;

typedef struct {
  char **v;
  int n;
} names_t;

static int intern(names_t *t, const char *s) {
  for (int i = 0; i < t->n; ++i)
    if (strcmp(t->v[i], s) == 0)
      return i;
  char **v = realloc(t->v, (size_t)(t->n + 1) * sizeof *v);
  if (!v)
    return -1;
  t->v = v;
  t->v[t->n] = strdup(s);
  return t->v[t->n] ? t->n++ : -1;
}

/* The value of "key=" in a tab-separated line, copied into buf. */
static bool field(const char *line, const char *key, char *buf, size_t len) {
  size_t k = strlen(key);
  for (const char *p = line; p && *p; p = strchr(p, '\t'), p = p ? p + 1 : NULL) {
    if (strncmp(p, key, k) == 0 && p[k] == '=') {
      const char *v = p + k + 1;
      size_t n = strcspn(v, "\t\n");
      if (n >= len)
        n = len - 1;
      memcpy(buf, v, n);
      buf[n] = '\0';
      return true;
    }
  }
  return false;
}

typedef struct {
  double sum_d, sum_x, sum_dd, sum_xx, sum_dx;
  int n;
} ratio_t;

static void ratio_add(ratio_t *r, double d, double x) {
  r->sum_d += d;
  r->sum_x += x;
  r->sum_dd += d * d;
  r->sum_xx += x * x;
  r->sum_dx += d * x;
  r->n++;
}

/* Period = sum(duration)/sum(visits) and its standard error. */
static bool ratio_get(const ratio_t *r, double *p, double *se) {
  if (r->n == 0 || r->sum_x <= 0)
    return false;
  *p = r->sum_d / r->sum_x;
  if (r->n < 2) {
    *se = NAN;
    return true;
  }
  double xbar = r->sum_x / r->n;
  double ss = r->sum_dd - 2 * *p * r->sum_dx + *p * *p * r->sum_xx; /* sum (d - p x)^2 */
  *se = sqrt(fmax(ss, 0) / (r->n - 1) / r->n) / xbar;
  return true;
}

typedef struct {
  int line;
  double slope;
  int nsp;
  int speedup[21];
  double pred[21], ci[21];
  int exps[21];
} row_t;

static int by_slope(const void *a, const void *b) {
  const row_t *x = a, *y = b;
  return x->slope < y->slope ? 1 : x->slope > y->slope ? -1 : 0;
}

int causal_report_write(const char *profile, const char *dir) {
  FILE *in = fopen(profile, "re");
  if (!in) {
    fprintf(stderr, "xptrace: %s: %s\n", profile, strerror(errno));
    return 1;
  }
  names_t lines = {0}, points = {0};
  rec_t *recs = NULL;
  size_t nrecs = 0, cap = 0;
  char buf[8192], sel[4096] = "", val[4096];
  int speedup = -1, nexp = 0;
  double duration = 0;
  while (fgets(buf, sizeof buf, in)) {
    double delta = -1;
    if (strncmp(buf, "experiment\t", 11) == 0) {
      speedup = -1;
      if (field(buf, "selected", sel, sizeof sel) && field(buf, "speedup", val, sizeof val)) {
        speedup = (int)lround(atof(val) * 100);
        duration = field(buf, "duration", val, sizeof val) ? atof(val) : -1;
        if (duration <= 0 || speedup < 0 || speedup > 100)
          speedup = -1;
        else
          ++nexp;
      }
      continue;
    }
    if (speedup < 0)
      continue;
    if (strncmp(buf, "throughput-point\t", 17) == 0 && field(buf, "delta", val, sizeof val)) {
      delta = atof(val);
    } else if (strncmp(buf, "latency-point\t", 14) == 0 && field(buf, "arrivals", val, sizeof val)) {
      /* Little's law: latency = in flight / arrival rate; visits per
       * duration become arrivals / in flight. */
      double arrivals = atof(val);
      double diff = field(buf, "difference", val, sizeof val) ? atof(val) : 0;
      delta = diff > 0 ? arrivals / diff : -1;
    }
    if (delta < 0 || !field(buf, "name", val, sizeof val))
      continue;
    if (nrecs == cap) {
      cap = cap ? cap * 2 : 256;
      rec_t *r = realloc(recs, cap * sizeof *r);
      if (!r)
        break;
      recs = r;
    }
    char selected[4096];
    snprintf(selected, sizeof selected, "%s", sel);
    recs[nrecs++] = (rec_t){intern(&lines, selected), intern(&points, val), speedup, duration, delta};
  }
  fclose(in);
  if (nexp == 0 || nrecs == 0) {
    fprintf(stderr, "xptrace: %s: %s\n", profile,
            nexp ? "no progress point was visited during the experiments (add XPTRACE_PROGRESS, "
                   "COZ_PROGRESS or --progress)"
                 : "no experiment (program too short, or no sampled line in scope)");
    free(recs);
    return 1;
  }
  FILE *txt = stdout, *csv = NULL;
  char path[4200];
  if (dir) {
    txt = xpt_create_stream(dir, "causal.txt", path, sizeof path);
    csv = xpt_create_stream(dir, "causal.csv", NULL, 0);
    if (!txt)
      txt = stderr;
  }
  if (csv)
    fputs("point,line,speedup,experiments,predicted,ci95\n", csv);
  fprintf(txt, "%d experiments\n", nexp);
  row_t *rows = calloc((size_t)lines.n + 1, sizeof *rows);
  for (int p = 0; p < points.n && rows; ++p) {
    ratio_t base = {0};
    for (size_t i = 0; i < nrecs; ++i)
      if (recs[i].point == p && recs[i].speedup == 0)
        ratio_add(&base, recs[i].duration, recs[i].delta);
    double p0, se0;
    if (!ratio_get(&base, &p0, &se0)) {
      fprintf(txt, "\nprogress point '%s': no baseline (speedup 0) experiment with visits\n",
              points.v[p]);
      continue;
    }
    fprintf(txt, "\nprogress point '%s': %.4g ms per visit at baseline (%d experiments)\n",
            points.v[p], p0 / 1e6, base.n);
    fprintf(txt, "rank  slope   line, then line speedup: predicted program speedup +- 95%%\n");
    int nrows = 0;
    for (int l = 0; l < lines.n; ++l) {
      row_t *row = &rows[nrows];
      memset(row, 0, sizeof *row);
      row->line = l;
      double sxy = 0, sxx = 0;
      for (int s = 5; s <= 100; s += 5) {
        ratio_t r = {0};
        for (size_t i = 0; i < nrecs; ++i)
          if (recs[i].point == p && recs[i].line == l && recs[i].speedup == s)
            ratio_add(&r, recs[i].duration, recs[i].delta);
        double ps, se;
        if (!ratio_get(&r, &ps, &se))
          continue;
        double pred = 1 - ps / p0;
        double rel = sqrt((isnan(se) ? 0 : se * se / (ps * ps)) +
                          (isnan(se0) ? 0 : se0 * se0 / (p0 * p0)));
        int k = row->nsp++;
        row->speedup[k] = s;
        row->pred[k] = pred * 100;
        row->ci[k] = (isnan(se) || isnan(se0)) ? NAN : 196 * rel * ps / p0;
        row->exps[k] = r.n;
        sxy += s * pred * 100;
        sxx += (double)s * s;
        if (csv)
          fprintf(csv, "\"%s\",\"%s\",%d,%d,%.3f,%.3f\n", points.v[p], lines.v[l], s, r.n,
                  pred * 100, row->ci[k]);
      }
      if (row->nsp) {
        row->slope = sxy / sxx;
        ++nrows;
      }
    }
    qsort(rows, (size_t)nrows, sizeof *rows, by_slope);
    for (int i = 0; i < nrows && i < 30; ++i) {
      fprintf(txt, "%4d  %+.2f  %s\n     ", i + 1, rows[i].slope, lines.v[rows[i].line]);
      for (int k = 0; k < rows[i].nsp; ++k) {
        if (isnan(rows[i].ci[k]))
          fprintf(txt, " %d%%: %+.1f%% (1 exp)", rows[i].speedup[k], rows[i].pred[k]);
        else
          fprintf(txt, " %d%%: %+.1f%% +-%.1f", rows[i].speedup[k], rows[i].pred[k], rows[i].ci[k]);
      }
      fputc('\n', txt);
    }
  }
  free(rows);
  if (csv)
    fclose(csv);
  if (dir && txt != stderr) {
    fclose(txt);
    FILE *again = fopen(path, "re");
    while (again && fgets(buf, sizeof buf, again))
      fputs(buf, stderr);
    if (again)
      fclose(again);
    fprintf(stderr, "xptrace: %s/profile.coz (Coz's viewer), %s, %s/causal.csv\n", dir, path, dir);
  }
  for (int i = 0; i < lines.n; ++i)
    free(lines.v[i]);
  for (int i = 0; i < points.n; ++i)
    free(points.v[i]);
  free(lines.v);
  free(points.v);
  free(recs);
  return 0;
}
