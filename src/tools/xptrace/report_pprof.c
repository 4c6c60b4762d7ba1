/* xptrace report --format pprof: the samples (or the call paths of the
 * slices on threads) as a gzipped pprof profile.  Frames get their
 * source file and line from the binaries when they are still there
 * (src/symbols, with the mapping's build id checked when known). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report_export.h"

#include <math.h>
#ifdef XPTRACE_HAVE_PPROF
#include "pt_pprof.h"
#endif
#ifdef XPTRACE_HAVE_PERF
#include "xsym.h"
#endif

#define DEPTH_MAX 512

bool rp_sample_selected(const struct rp_model *m, const struct rp_sample *s,
                        const struct rp_select *sel) {
  if ((sel->pid >= 0 && s->pid != sel->pid) || (sel->tid >= 0 && s->tid != sel->tid))
    return false;
  if (!sel->have_regex)
    return true;
  for (uint32_t i = 0; i < s->nframes; i++)
    if (rp_select_name(sel, rp_str_get(&m->s, m->framepool[s->frames + i])))
      return true;
  return false;
}

bool rp_cnode_selected(const struct rp_model *m, uint32_t node, const struct rp_select *sel) {
  if (!sel->have_regex)
    return true;
  for (size_t d = 0; node && d < DEPTH_MAX * 4; node = m->cnodes[node].parent, d++)
    if (rp_select_name(sel, rp_str_get(&m->s, m->cnodes[node].name)))
      return true;
  return false;
}

#ifndef XPTRACE_HAVE_PPROF
int rp_pprof_write(const struct rp_model *m, const struct rp_select *sel, uint64_t period_ns,
                   int fd) {
  (void)m, (void)sel, (void)period_ns, (void)fd;
  return ENOSYS;
}
#else

/* Source file and line of a frame, looked up once per (mapping, offset). */
struct srcline { uint32_t mapping; uint64_t rel_pc; uint32_t name; const char *file; unsigned line; };
struct resolver {
#ifdef XPTRACE_HAVE_PERF
  xsym_t *x;
#endif
  char **bid; /* by mapping string id: the file's build id (hex), when the trace has none */
  size_t nbid;
  struct srcline *tab;
  size_t cap, n;
};

static void resolve(struct resolver *r, const struct rp_model *m, const struct rp_frame_loc *l,
                    uint32_t name, const char **file, unsigned *line) {
  *file = "";
  *line = 0;
#ifdef XPTRACE_HAVE_PERF
  if (!l->mapping || !r->x)
    return;
  if ((r->n + 1) * 2 > r->cap) {
    size_t nc = r->cap ? r->cap * 2 : 1024;
    struct srcline *nt = calloc(nc, sizeof *nt);
    if (!nt)
      return;
    for (size_t i = 0; i < r->cap; i++)
      if (r->tab[i].mapping) {
        size_t k = (r->tab[i].rel_pc * 31 + r->tab[i].mapping * 17 + r->tab[i].name) & (nc - 1);
        while (nt[k].mapping)
          k = (k + 1) & (nc - 1);
        nt[k] = r->tab[i];
      }
    free(r->tab);
    r->tab = nt;
    r->cap = nc;
  }
  size_t k = (l->rel_pc * 31 + l->mapping * 17 + name) & (r->cap - 1);
  for (; r->tab[k].mapping; k = (k + 1) & (r->cap - 1))
    if (r->tab[k].mapping == l->mapping && r->tab[k].rel_pc == l->rel_pc &&
        r->tab[k].name == name) {
      *file = r->tab[k].file;
      *line = r->tab[k].line;
      return;
    }
  struct srcline *e = &r->tab[k];
  *e = (struct srcline){l->mapping, l->rel_pc, name, "", 0};
  r->n++;
  uint8_t bid[64];
  size_t blen = 0;
  const char *hex = rp_str_get(&m->s, l->build_id);
  for (; hex[0] && hex[1] && blen < sizeof bid; hex += 2) {
    unsigned v;
    if (sscanf(hex, "%2x", &v) != 1)
      break;
    bid[blen++] = (uint8_t)v;
  }
  xsym_module_t *mod = xsym_module(r->x, rp_str_get(&m->s, l->mapping), blen ? bid : NULL, blen);
  if (!mod)
    return;
  xsym_frame_t fr[16];
  size_t n = xsym_lookup(r->x, mod, l->rel_pc, fr, 16);
  const char *want = rp_str_get(&m->s, name);
  for (size_t i = 0; i < n; i++)
    if (fr[i].file && strcmp(fr[i].function, want) == 0) {
      e->file = fr[i].file;
      e->line = fr[i].line;
      break;
    }
  *file = e->file;
  *line = e->line;
#else
  (void)r, (void)m, (void)l, (void)name;
#endif
}

/* The build id of a mapping: the trace's, else its file's (which the
 * source lines were read from). */
static const char *build_id(struct resolver *r, const struct rp_model *m,
                            const struct rp_frame_loc *l) {
  if (l->build_id)
    return rp_str_get(&m->s, l->build_id);
#ifdef XPTRACE_HAVE_PERF
  if (!r->x)
    return "";
  if (l->mapping >= r->nbid) {
    size_t nn = (size_t)l->mapping * 2 + 16;
    char **nb = realloc(r->bid, nn * sizeof *nb);
    if (!nb)
      return "";
    memset(nb + r->nbid, 0, (nn - r->nbid) * sizeof *nb);
    r->bid = nb;
    r->nbid = nn;
  }
  if (!r->bid[l->mapping]) {
    const uint8_t *bits;
    xsym_module_t *mod = xsym_module(r->x, rp_str_get(&m->s, l->mapping), NULL, 0);
    size_t n = mod ? xsym_module_file_build_id(r->x, mod, &bits) : 0;
    char *hex = calloc(1, 2 * n + 1);
    if (!hex)
      return "";
    for (size_t i = 0; i < n; i++)
      snprintf(hex + 2 * i, 3, "%02x", bits[i]);
    r->bid[l->mapping] = hex;
  }
  return r->bid[l->mapping];
#else
  (void)r, (void)m;
  return "";
#endif
}

/* Off-CPU stacks carry no pid or tid: left out when those select. */
static bool offcpu_selected(const struct rp_model *m, const struct rp_offcpu *o,
                            const struct rp_select *sel) {
  if (sel->pid >= 0 || sel->tid >= 0)
    return false;
  if (!sel->have_regex)
    return true;
  for (uint32_t i = 0; i < o->nframes; i++)
    if (rp_select_name(sel, rp_str_get(&m->s, m->framepool[o->frames + i])))
      return true;
  return false;
}

static void samples_profile(struct pp_profile *pp, const struct rp_model *m,
                            const struct rp_select *sel, uint64_t period, bool offcpu) {
  pp_sample_type(pp, "samples", "count");
  pp_sample_type(pp, "cpu", "nanoseconds");
  if (offcpu) /* a third column: the CPU samples' is 0, the blocked stacks' their time */
    pp_sample_type(pp, "offcpu", "nanoseconds");
  pp_default_sample_type(pp, "cpu");
  pp_period(pp, "cpu", "nanoseconds", (int64_t)period);
  char note[96];
  snprintf(note, sizeof note, "xptrace report: cpu = samples x %.6g ms (--freq %.6g)",
           (double)period / 1e6, 1e9 / (double)period);
  pp_comment(pp, note);
  if (offcpu)
    pp_comment(pp, "xptrace report: offcpu = blocked time by stack at the switch-out "
                   "(samples_offcpu.folded)");
  struct resolver r = {0};
#ifdef XPTRACE_HAVE_PERF
  r.x = xsym_new(0);
#endif
  uint64_t locs[DEPTH_MAX];
  for (size_t k = 0; k < m->nsamples; k++) {
    const struct rp_sample *s = &m->samples[k];
    if (!rp_sample_selected(m, s, sel))
      continue;
    size_t n = 0;
    for (uint32_t i = s->nframes; i-- > 0 && n < DEPTH_MAX;) { /* innermost first */
      uint32_t name = m->framepool[s->frames + i];
      const struct rp_frame_loc *l = &m->locpool[s->frames + i];
      const char *file;
      unsigned line;
      resolve(&r, m, l, name, &file, &line);
      uint64_t map =
          l->mapping ? pp_mapping(pp, rp_str_get(&m->s, l->mapping), build_id(&r, m, l)) : 0;
      uint64_t fn = pp_function(pp, rp_str_get(&m->s, name), file);
      locs[n++] = pp_location(pp, map, l->rel_pc, fn, line);
    }
    char tid[16];
    snprintf(tid, sizeof tid, "%d", (int)s->tid);
    int64_t v[3] = {1, (int64_t)period, 0};
    pp_sample(pp, locs, n, v, "thread", tid);
  }
  for (size_t k = 0; offcpu && k < m->noffcpu; k++) {
    const struct rp_offcpu *o = &m->offcpu[k];
    if (!offcpu_selected(m, o, sel))
      continue;
    size_t n = 0;
    for (uint32_t i = o->nframes; i-- > 0 && n < DEPTH_MAX;)
      locs[n++] = pp_location(pp, 0, 0, pp_function(pp, rp_str_get(&m->s, m->framepool[o->frames + i]), ""),
                              0);
    int64_t v[3] = {0, 0, (int64_t)(o->us * 1000)};
    pp_sample(pp, locs, n, v, "thread", rp_str_get(&m->s, o->thread));
  }
#ifdef XPTRACE_HAVE_PERF
  xsym_free(r.x); /* pp copied the strings */
#endif
  free(r.tab);
  for (size_t i = 0; i < r.nbid; i++)
    free(r.bid[i]);
  free(r.bid);
}

static void slices_profile(struct pp_profile *pp, const struct rp_model *m,
                           const struct rp_select *sel) {
  pp_sample_type(pp, "calls", "count");
  pp_sample_type(pp, "time", "nanoseconds");
  pp_default_sample_type(pp, "time");
  pp_comment(pp, "xptrace report: time = self time of each call path, calls = its calls");
  uint64_t locs[DEPTH_MAX];
  for (uint32_t i = 1; i < m->ncnodes; i++) {
    const struct rp_cnode *c = &m->cnodes[i];
    if (!c->count || !rp_cnode_selected(m, i, sel))
      continue;
    size_t n = 0;
    for (uint32_t k = i; k && n < DEPTH_MAX; k = m->cnodes[k].parent)
      locs[n++] = pp_location(pp, 0, 0, pp_function(pp, rp_str_get(&m->s, m->cnodes[k].name), ""),
                              0);
    int64_t v[2] = {(int64_t)c->count, (int64_t)c->self};
    pp_sample(pp, locs, n, v, NULL, NULL);
  }
}

int rp_pprof_write(const struct rp_model *m, const struct rp_select *sel, uint64_t period_ns,
                   int fd) {
  bool samples = false, calls = false, offcpu = false;
  for (size_t k = 0; k < m->nsamples && !samples; k++)
    samples = rp_sample_selected(m, &m->samples[k], sel);
  for (size_t k = 0; k < m->noffcpu && !offcpu; k++)
    offcpu = offcpu_selected(m, &m->offcpu[k], sel);
  samples |= offcpu;
  for (uint32_t i = 1; i < m->ncnodes && !samples && !calls; i++)
    calls = m->cnodes[i].count && rp_cnode_selected(m, i, sel);
  if (!samples && !calls)
    return ENODATA;
  struct pp_profile *pp = pp_new();
  if (!pp)
    return ENOMEM;
  if (samples)
    samples_profile(pp, m, sel, period_ns, offcpu);
  else
    slices_profile(pp, m, sel);
  pp_times(pp, 0, (int64_t)(m->last_ts - m->first_ts));
  int err = pp_ok(pp) ? pp_write_gz(pp, fd) : ENOMEM;
  pp_free(pp);
  return err;
}
#endif

struct tid_ts {
  int32_t tid;
  uint64_t ts;
};

static int tid_ts_cmp(const void *a, const void *b) {
  const struct tid_ts *x = a, *y = b;
  if (x->tid != y->tid)
    return x->tid < y->tid ? -1 : 1;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

double rp_sample_rate_estimate(const struct rp_model *m) {
  size_t n = m->nsamples;
  if (n < 17)
    return 0;
  struct tid_ts *v = malloc(n * sizeof *v);
  uint64_t *gaps = malloc(n * sizeof *gaps);
  double hz = 0;
  if (v && gaps) {
    for (size_t i = 0; i < n; i++)
      v[i] = (struct tid_ts){m->samples[i].tid, m->samples[i].ts};
    qsort(v, n, sizeof *v, tid_ts_cmp);
    size_t ng = 0;
    for (size_t i = 1; i < n; i++) /* equal times: one capture's weight */
      if (v[i].tid == v[i - 1].tid && v[i].ts > v[i - 1].ts)
        gaps[ng++] = v[i].ts - v[i - 1].ts;
    if (ng >= 16) {
      qsort(gaps, ng, sizeof *gaps, u64_cmp);
      double raw = 1e9 / (double)gaps[ng / 4];
      double scale = pow(10, floor(log10(raw)) - 1);
      hz = round(raw / scale) * scale;
    }
  }
  free(v);
  free(gaps);
  return hz;
}
