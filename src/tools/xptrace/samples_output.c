/* The sample session's outputs (samples.h): symbols, then per clock the
 * folded file, its flame graph, the csv and the summary table, the
 * processes, the method's line and the diagnostics. */
#include "samples_internal.h"
#include "sample_kernel.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph.h"
#include "xpt_files.h"

/* ---- symbols ---- */

static void symbolize(xs_session_t *s) {
  xsym_frame_t out[32];
  const xsym_module_t *said[8];
  size_t nsaid = 0;
  for (size_t i = 0; i < s->nframes; ++i) {
    xs_frm_t *f = &s->frames[i];
    size_t n = 1;
    if (f->module) {
      n = xsym_lookup(s->xsym, f->module, f->off, out, 32);
      bool known = false;
      for (size_t k = 0; k < nsaid; ++k)
        known |= said[k] == f->module;
      if (!known && nsaid < 8 && xsym_module_changed(f->module)) {
        said[nsaid++] = f->module;
        fprintf(stderr, "xptrace sample: %s was replaced after it was mapped (another build id): its "
                "frames are shown as %s+0xoffset\n", xsym_module_path(f->module), xsym_module_name(f->module));
      }
    } else {
      out[0] = (xsym_frame_t){f->name ? f->name : "[unknown]", NULL, 0, false};
    }
    f->sym = (uint32_t)s->nsyms;
    f->nsym = 0;
    for (size_t k = 0; k < n; ++k) {
      if (!xs_grow(&s->syms, &s->capsyms, s->nsyms, sizeof *s->syms))
        break;
      const char *mod = f->module ? xsym_module_name(f->module) : f->modname ? f->modname : "?";
      s->syms[s->nsyms++] = (xs_sym_t){out[k].function, mod, out[k].file, out[k].line, out[k].inlined};
      f->nsym++;
    }
  }
}

/* ---- folded, csv, summary ---- */

/* The flame graph of a folded file just written (dir/samples*.folded). */
static void folded_svg(const xs_session_t *s, const char *folded_path, xs_clock_t clock) {
  const char *name = strrchr(folded_path, '/');
  name = name ? name + 1 : folded_path;
  char svg[128], title[256];
  size_t stem = strlen(name) - strlen(".folded");
  snprintf(svg, sizeof svg, "%.*s.svg", (int)stem, name);
  const char *base = strrchr(s->o.command, '/');
  snprintf(title, sizeof title, "%s: %s", base ? base + 1 : s->o.command,
           clock == XS_CPUTIME ? "CPU-time samples" : clock == XS_OFFCPU ? "off-CPU time (us)"
           : s->o.realtime_us ? "wall time (us)" : "wall-time samples");
  /* Off-CPU and perf wall-time weights are microseconds, not samples. */
  bool us = clock == XS_OFFCPU || (clock == XS_REALTIME && s->o.realtime_us);
  int err = fg_folded_to_svg(s->o.dir, name, svg, title, us ? "us" : "samples");
  if (err)
    fprintf(stderr, "xptrace: cannot write %s/%s: %s\n", s->o.dir, svg, strerror(err));
}

typedef struct fn {
  const char *name, *module;
  uint64_t self, incl, stamp;
} fn_t;

typedef struct line {
  uint64_t count;
  char text[];
} line_t;

typedef struct agg {
  fn_t *fns;
  size_t nfns, capfns;
  xs_index_t fn_index;
  line_t **lines;
  size_t nlines, caplines;
  xs_index_t line_index;
  const void *key_fn; /* comparison context */
} agg_t;

static agg_t *agg_ctx;

static bool fn_eq(const xs_session_t *s, uint32_t index, const void *key) {
  (void)s;
  const fn_t *a = &agg_ctx->fns[index], *b = key;
  return strcmp(a->name, b->name) == 0 && strcmp(a->module, b->module) == 0;
}

static bool line_eq(const xs_session_t *s, uint32_t index, const void *key) {
  (void)s;
  return strcmp(agg_ctx->lines[index]->text, key) == 0;
}

static fn_t *fn_get(xs_session_t *s, agg_t *a, const char *name, const char *module) {
  fn_t key = {name, module, 0, 0, 0};
  uint64_t h = xs_hash_mem(name, strlen(name), xs_hash_mem(module, strlen(module), 3));
  if (!xs_index_reserve(&a->fn_index))
    return NULL;
  bool found;
  size_t slot = xs_index_find(s, &a->fn_index, h, &key, fn_eq, &found);
  if (found)
    return &a->fns[a->fn_index.slot[slot] - 1];
  if (!xs_grow(&a->fns, &a->capfns, a->nfns, sizeof *a->fns))
    return NULL;
  a->fns[a->nfns] = key;
  xs_index_set(&a->fn_index, slot, h, (uint32_t)a->nfns);
  return &a->fns[a->nfns++];
}

static void line_add(xs_session_t *s, agg_t *a, const char *text, size_t len, uint64_t count) {
  uint64_t h = xs_hash_mem(text, len, 5);
  if (!xs_index_reserve(&a->line_index))
    return;
  bool found;
  size_t slot = xs_index_find(s, &a->line_index, h, text, line_eq, &found);
  if (found) {
    a->lines[a->line_index.slot[slot] - 1]->count += count;
    return;
  }
  line_t *l = malloc(sizeof *l + len + 1);
  if (!l || !xs_grow(&a->lines, &a->caplines, a->nlines, sizeof *a->lines)) {
    free(l);
    return;
  }
  l->count = count;
  memcpy(l->text, text, len + 1);
  a->lines[a->nlines] = l;
  xs_index_set(&a->line_index, slot, h, (uint32_t)a->nlines++);
}

/* Frame names go into "a;b;c count" lines: no separators inside. */
static size_t put_name(char **buf, size_t *cap, size_t len, const char *name) {
  size_t n = strlen(name);
  if (len + n + 2 > *cap) {
    size_t c = 2 * (len + n + 2);
    char *p = realloc(*buf, c);
    if (!p)
      return len;
    *buf = p;
    *cap = c;
  }
  (*buf)[len++] = ';';
  for (size_t i = 0; i < n; ++i) {
    char c = name[i];
    (*buf)[len++] = c == ';' || c == '\n' || c == '\r' || c == '\t' ? '_' : c;
  }
  (*buf)[len] = '\0';
  return len;
}

static void thread_label(const xs_session_t *s, const xs_thread_t *t, char *buf, size_t len) {
  const xs_proc_t *p = xs_proc_of(s, t->pid);
  int n = 0;
  /* Processes other than the command are named before their threads. */
  if (t->pid != s->root)
    n = snprintf(buf, len, "[%s-%d];", p && p->name[0] ? p->name : "process", (int)t->pid);
  if (n < 0 || (size_t)n >= len)
    n = 0;
  if (t->index == 0)
    snprintf(buf + n, len - (size_t)n, "[main]");
  else if (t->name[0] && p && strcmp(t->name, p->name) != 0)
    snprintf(buf + n, len - (size_t)n, "[thread-%u:%s]", t->index, t->name);
  else
    snprintf(buf + n, len - (size_t)n, "[thread-%u]", t->index);
  for (char *c = buf + n; *c; ++c)
    if (*c == ';' || *c == ' ')
      *c = '_';
}

static int line_cmp(const void *a, const void *b) {
  return strcmp((*(line_t *const *)a)->text, (*(line_t *const *)b)->text);
}

static int fn_cmp(const void *a, const void *b) {
  const fn_t *x = *(fn_t *const *)a, *y = *(fn_t *const *)b;
  if (x->self != y->self)
    return x->self < y->self ? 1 : -1;
  if (x->incl != y->incl)
    return x->incl < y->incl ? 1 : -1;
  return strcmp(x->name, y->name);
}

static void csv_field(FILE *f, const char *text) {
  if (!strpbrk(text, ",\"\n")) {
    fputs(text, f);
    return;
  }
  fputc('"', f);
  for (const char *p = text; *p; ++p) {
    if (*p == '"')
      fputc('"', f);
    fputc(*p, f);
  }
  fputc('"', f);
}

static const char *const clock_name[XS_NCLOCKS] = {"cputime", "realtime", "offcpu"};
static const char *const clock_suffix[XS_NCLOCKS] = {"", "_realtime", "_offcpu"};

/* Whether a clock's weights are microseconds rather than periods. */
static bool clock_us(const xs_session_t *s, xs_clock_t clock) {
  return clock == XS_OFFCPU || (clock == XS_REALTIME && s->o.realtime_us);
}

/* One clock's files and table; returns its total weight. */
/* Whether `clock` was sampled, and at what rate (xs_options_t.clock_hz). */
static bool clock_on(const xs_session_t *s, xs_clock_t clock) {
  return !(s->o.clock_hz[XS_CPUTIME] || s->o.clock_hz[XS_REALTIME]) || s->o.clock_hz[clock] > 0;
}
static double clock_rate(const xs_session_t *s, xs_clock_t clock) {
  return s->o.clock_hz[clock] > 0 ? s->o.clock_hz[clock] : s->o.hz;
}

static uint64_t report_clock(xs_session_t *s, xs_clock_t clock, bool table) {
  agg_t a = {0};
  agg_ctx = &a;
  size_t cap = 4096;
  char *text = malloc(cap);
  uint64_t total = 0, stamp = 0;
  for (size_t r = 0; text && r < s->nrecs; ++r) {
    const xs_rec_t *rec = &s->recs[r];
    if (rec->clock != clock)
      continue;
    total += rec->weight;
    ++stamp;
    const xs_stack_t *st = s->stacks[rec->stack];
    thread_label(s, &s->threads[rec->thread], text, cap);
    size_t len = strlen(text);
    if (st->truncated)
      len = put_name(&text, &cap, len, "[truncated]");
    for (uint32_t d = st->n; d-- > 0;) {
      const xs_frm_t *f = &s->frames[st->frame[d]];
      /* Outermost first: the function, then what was inlined into it. */
      for (uint32_t k = f->nsym; k-- > 0;) {
        const xs_sym_t *y = &s->syms[f->sym + k];
        len = put_name(&text, &cap, len, y->function);
        fn_t *fn = fn_get(s, &a, y->function, y->module);
        if (!fn)
          continue;
        if (d == 0 && k == 0)
          fn->self += rec->weight;
        if (fn->stamp != stamp) {
          fn->stamp = stamp;
          fn->incl += rec->weight;
        }
      }
    }
    line_add(s, &a, text, len, rec->weight);
  }
  free(text);

  char name[64], path[PATH_MAX + 64];
  if (a.nlines)
    qsort(a.lines, a.nlines, sizeof *a.lines, line_cmp);
  snprintf(name, sizeof name, "samples%s.folded", clock_suffix[clock]);
  FILE *f = total ? xpt_create_stream(s->o.dir, name, path, sizeof path) : NULL;
  if (f) {
    for (size_t i = 0; i < a.nlines; ++i)
      fprintf(f, "%s %llu\n", a.lines[i]->text, (unsigned long long)a.lines[i]->count);
    if (fclose(f) != 0)
      fprintf(stderr, "xptrace: cannot write %s: %s\n", path, strerror(errno));
    else
      folded_svg(s, path, clock); /* samples.svg beside it (flamegraph.h) */
  } else if (total) {
    fprintf(stderr, "xptrace: cannot write %s: %s\n", path, strerror(errno));
  }
  fn_t **fns = calloc(a.nfns + 1, sizeof *fns);
  size_t nf = 0;
  for (size_t i = 0; fns && i < a.nfns; ++i)
    fns[nf++] = &a.fns[i];
  if (fns)
    qsort(fns, nf, sizeof *fns, fn_cmp);
  double scale = total ? 100.0 / (double)total : 0;
  snprintf(name, sizeof name, "samples%s.csv", clock_suffix[clock]);
  f = total ? xpt_create_stream(s->o.dir, name, path, sizeof path) : NULL;
  if (f) {
    fputs(clock_us(s, clock) ? "function,module,self_us,inclusive_us,self_percent,inclusive_percent\n"
                             : "function,module,self_samples,inclusive_samples,self_percent,inclusive_percent\n",
          f);
    for (size_t i = 0; i < nf; ++i) {
      csv_field(f, fns[i]->name);
      fputc(',', f);
      csv_field(f, fns[i]->module);
      fprintf(f, ",%llu,%llu,%.2f,%.2f\n", (unsigned long long)fns[i]->self,
              (unsigned long long)fns[i]->incl, (double)fns[i]->self * scale,
              (double)fns[i]->incl * scale);
    }
    if (fclose(f) != 0)
      fprintf(stderr, "xptrace: cannot write %s: %s\n", path, strerror(errno));
  }
  size_t sampled = 0;
  for (size_t i = 0; i < s->nthreads; ++i)
    sampled += s->threads[i].samples[clock] != 0;
  const char *base = strrchr(s->o.command, '/');
  base = base ? base + 1 : s->o.command;
  bool us = clock_us(s, clock);
  if (us)
    fprintf(stderr, "xptrace sample: %s (pid %d): %.3f s %s, %zu of %zu thread(s)", base, (int)s->root,
            (double)total * 1e-6,
            clock == XS_OFFCPU ? "off-CPU (blocked, by stack at the switch-out)"
                               : "of wall time (CPU samples and off-CPU intervals)",
            sampled, s->nthreads);
  else
    fprintf(stderr, "xptrace sample: %s (pid %d): %llu %s samples at %g Hz, %zu of %zu thread(s) sampled",
            base, (int)s->root, (unsigned long long)total, clock_name[clock], clock_rate(s, clock),
            sampled, s->nthreads);
  if (s->nprocs > 1)
    fprintf(stderr, " in %zu processes", s->nprocs);
  fputc('\n', stderr);
  if (table && nf) {
    fprintf(stderr, "  %6s %6s %8s  %s\n", "self%", "incl%", us ? "self ms" : "samples", "function (module)");
    for (size_t i = 0; i < nf && i < 20; ++i)
      fprintf(stderr, "  %6.1f %6.1f %8llu  %s (%s)\n", (double)fns[i]->self * scale,
              (double)fns[i]->incl * scale, (unsigned long long)(us ? (fns[i]->self + 500) / 1000 : fns[i]->self),
              fns[i]->name, fns[i]->module);
  }
  free(fns);
  for (size_t i = 0; i < a.nlines; ++i)
    free(a.lines[i]);
  free(a.lines);
  free(a.fns);
  xs_index_free(&a.fn_index);
  xs_index_free(&a.line_index);
  agg_ctx = NULL;
  return total;
}

/* Per process, when there are several: where the samples went; every
 * process, so that the count on the line above is the rows' (one that ran
 * less CPU time than a sampling period has 0). */
static void report_processes(const xs_session_t *s, uint64_t total) {
  if (s->nprocs < 2 || !total)
    return;
  for (size_t i = 0; i < s->nprocs; ++i) {
    uint64_t n = 0;
    size_t nth = 0;
    for (size_t k = 0; k < s->nthreads; ++k)
      if (s->threads[k].pid == s->procs[i].pid) {
        n += s->threads[k].samples[XS_CPUTIME];
        nth++;
      }
    fprintf(stderr, "  process %d %s: %llu samples (%.1f%%), %zu thread(s)\n", (int)s->procs[i].pid,
            s->procs[i].name[0] ? s->procs[i].name : "?", (unsigned long long)n,
            100.0 * (double)n / (double)total, nth);
  }
}

/* Every thread's CPU time (the kernel's) against its samples, with the
 * cause that fits what was measured. */
static const char *too_few_why(const xs_session_t *s, const xs_thread_t *t, const xs_method_stats_t *m) {
  if (strcmp(s->o.method, "perf") != 0)
    return "it blocked or took the sampling signal; use --method perf";
  bool kernel_time = t->sys_share >= 0.5;
  if (kernel_time && !(m && m->kernel))
    return "its time was mostly in the kernel (system calls, page faults; its utime and stime say so), which "
           "the perf method samples only as root or with kernel.perf_event_paranoid <= 1";
  if (m && !m->per_cpu)
    return "per-thread events lose the period in progress whenever a thread ends, so the time of threads "
           "shorter than a period (and beside them) goes unsampled; per-CPU sampling (root or "
           "kernel.perf_event_paranoid <= 0) has no such loss, or raise -f";
  return "the kernel did not deliver them (throttled or lost: see above)";
}

static void diagnose_threads(const xs_session_t *s, const xs_method_stats_t *m) {
  if (clock_rate(s, XS_CPUTIME) <= 0 || !clock_on(s, XS_CPUTIME))
    return;
  double period = 1e9 / clock_rate(s, XS_CPUTIME);
  unsigned shown = 0, quiet = 0;
  for (size_t i = 0; i < s->nthreads; ++i) {
    const xs_thread_t *t = &s->threads[i];
    if (t->cpu_ns == UINT64_MAX)
      continue;
    double expect = (double)t->cpu_ns / period;
    double got = (double)t->samples[XS_CPUTIME];
    /* Short threads: a sample is a coin toss below a few periods. */
    if (expect < 20 || got >= 0.5 * expect)
      continue;
    if (shown >= 5) {
      quiet++;
      continue;
    }
    shown++;
    const xs_proc_t *p = xs_proc_of(s, t->pid);
    fprintf(stderr,
            "xptrace sample: thread %d (%s) used %.3f CPU-s but got %.0f samples (%.0f expected): %s\n",
            (int)t->tid, t->name[0] ? t->name : p && p->name[0] ? p->name : "?", (double)t->cpu_ns * 1e-9,
            got, expect, too_few_why(s, t, m));
  }
  if (quiet)
    fprintf(stderr, "xptrace sample: %u more thread(s) with too few samples for their CPU time\n", quiet);
}

uint64_t xs_session_finish(xs_session_t *s, const xs_method_stats_t *m) {
  symbolize(s);
  uint64_t total = 0;
  bool any[XS_NCLOCKS] = {false};
  for (size_t i = 0; i < s->nrecs; ++i)
    any[s->recs[i].clock] = true;
  for (int c = 0; c < XS_NCLOCKS; ++c)
    if (any[c] || (c == XS_CPUTIME && clock_on(s, XS_CPUTIME))) {
      uint64_t n = report_clock(s, (xs_clock_t)c, !s->o.quiet_table);
      if (c == XS_CPUTIME)
        report_processes(s, n);
      if (!clock_us(s, (xs_clock_t)c)) /* samples, not microseconds */
        total += n;
    }
  char path[PATH_MAX + 64];
  bool wrote = s->o.trace && s->nrecs && xs_write_trace(s, path, sizeof path);
  if (s->o.trace && s->nrecs && !wrote)
    fprintf(stderr, "xptrace: cannot write %s: %s\n", path, strerror(errno));
  if (s->o.trace_path && s->o.trace_path_len)
    snprintf(s->o.trace_path, s->o.trace_path_len, "%s", wrote ? path : "");
  if (m && clock_on(s, XS_CPUTIME)) {
    uint64_t cpu_samples = 0;
    for (size_t i = 0; i < s->nthreads; ++i)
      cpu_samples += s->threads[i].samples[XS_CPUTIME];
    double rate = m->effective_hz >= 0 ? m->effective_hz
                  : m->cpu_seconds > 0 ? (double)cpu_samples / m->cpu_seconds
                                       : 0;
    if (rate > 0 || m->cpu_seconds > 0)
      fprintf(stderr, "xptrace sample: method %s (%s): %.0f samples per CPU-second (%llu samples, %.3f CPU-seconds)\n",
              s->o.method, m->unwinder ? m->unwinder : "?", rate, (unsigned long long)cpu_samples,
              m->cpu_seconds > 0 ? m->cpu_seconds : 0.0);
    else /* no CPU time measured: no rate to give */
      fprintf(stderr, "xptrace sample: method %s (%s): %llu samples; CPU time not measured\n",
              s->o.method, m->unwinder ? m->unwinder : "?", (unsigned long long)cpu_samples);
    if (m->throttled)
      fprintf(stderr, "xptrace sample: the kernel throttled sampling %llu time(s) "
                      "(kernel.perf_event_max_sample_rate): ask a lower -f\n",
              (unsigned long long)m->throttled);
    if (m->unwind_cut)
      fprintf(stderr, "xptrace sample: %llu stack(s) ended early: the user-stack copy was too small "
                      "or code had no unwind information (outermost frames missing)\n",
              (unsigned long long)m->unwind_cut);
    if (m->lost)
      fprintf(stderr, "xptrace sample: %llu sample(s) lost: the launcher did not keep up with the "
                      "ring buffers (ask a lower -f, or raise kernel.perf_event_mlock_kb)\n",
              (unsigned long long)m->lost);
  }
  if (s->truncated)
    fprintf(stderr, "xptrace sample: %llu sample(s) deeper than --depth %u were cut (their outermost "
                    "frames are missing, marked [truncated]): raise --depth\n",
            (unsigned long long)s->truncated, s->o.depth);
  if (s->dropped)
    fprintf(stderr, "xptrace sample: %llu sample(s) dropped (out of memory)\n",
            (unsigned long long)s->dropped);
  diagnose_threads(s, m);
  return total;
}

