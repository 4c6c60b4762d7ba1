/* xptrace report PATH: what a run recorded (samples, trace points,
 * device work, counters, processes, threads), read back from its output
 * folder or trace without running anything again.  See docs/report.md. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"
#include "progress.h"
#include "report_export.h"
#include "report_load.h"
#include "report_table.h"
#include "xpt_slices.h"
#include "xptrace_cmds.h"

/* Section ids of every mode (report_tables.c, report_tree.c, report_calls.c). */
#define SECTION_LIST                                                                         \
  "functions, points, devices, counters, processes, threads, windows, tree, calltree, "     \
  "callers, callees"

enum {
  R_TOP = 256, R_SORT, R_FILTER, R_PID, R_TID, R_TREE, R_DEPTH, R_DIFF, R_FORMAT, R_GRAPH,
  R_FREQ, R_SECTION
};

/* The one table of report's options: the parser's, --help's, avail's and
 * docs/report.md's (`xptrace avail --markdown report`). */
static const struct xopt report_opts[] = {
    {"top", R_TOP, required_argument, "N", "rows per table (0 = all)",
     "rows per table (`0`: all)", "20"},
    {"sort", R_SORT, required_argument, "COLUMN",
     "sort every table having COLUMN by it (self, total, count, mean, p99, inclusive, name, ...)",
     "sort every table that has the column by it (`self`, `total`, `count`, `mean`, `p99`, "
     "`inclusive`, `delta`, ...; `name` sorts by the first text column; in `--diff`, `total` "
     "means `total_b`)",
     "each table's own (below)"},
    {"filter", R_FILTER, required_argument, "REGEX",
     "only functions, trace points, commands, counters matching it (POSIX extended); --tree: "
     "only samples with a matching frame",
     "POSIX extended regex: only the functions, trace points, commands and counters whose name "
     "matches; with `--tree`, only the samples with a matching frame",
     "all"},
    {"pid", R_PID, required_argument, "PID", "only this process", NULL, "all"},
    {"tid", R_TID, required_argument, "TID", "only this thread",
     "only this thread (device work has no thread: `--tid` leaves it out)", "all"},
    {"tree", R_TREE, no_argument, NULL,
     "the samples' call tree with percentages; without samples, that of the function calls "
     "(calls, total and self time)",
     "the samples' call tree instead of the tables; with no sample selected, the call tree of "
     "the function calls (slices on threads)",
     "off"},
    {"graph", R_GRAPH, required_argument, "FUNCTION",
     "its callers (every call path to it) and callees (merged)",
     "callers (every call path to FUNCTION) and callees (its calls merged over its outermost "
     "calls) of a function of the slices on threads, as `uftrace graph`",
     "off"},
    {"depth", R_DEPTH, required_argument, "N", "--tree: N levels",
     "`--tree`: N levels; the deeper frames count in their ancestors' inclusive samples", "all"},
    {"diff", R_DIFF, required_argument, "OTHER",
     "compare with another run: a = PATH, b = OTHER, delta = b - a, ratio = b / a",
     "two runs side by side: a = `PATH`, b = `OTHER`, `delta` = b − a, `ratio` = b / a", "off"},
    {"section", R_SECTION, required_argument, "LIST",
     "only these sections (ids, comma-separated: " SECTION_LIST "); one with --format csv: "
     "one header, a plain CSV file",
     "only these sections, by id (below), comma-separated; a name that is none is one line, exit "
     "2 (with \"did you mean\"); one section in CSV is a plain CSV file: one header, kept when "
     "the section has no row",
     "all"},
    {"format", R_FORMAT, required_argument, "text\\|csv\\|json\\|pprof\\|svg",
     "output format; pprof: a gzipped profile.proto of the samples, else of the function calls "
     "(go tool pprof reads it); svg: their flame graph (a browser shows it: click zooms)",
     "output format; `pprof`: [a profile for pprof](#pprof-profiles); `svg`: [a flame "
     "graph](#flame-graphs)",
     "`text`"},
    {"freq", R_FREQ, required_argument, "HZ", "pprof: the run's sampling rate, for CPU time",
     "`pprof`: the rate the run sampled at, which makes each sample's CPU time; by default the "
     "rate the trace says (xptrace writes it), else one estimated from the samples' spacing (said)",
     "the trace's rate; 100 when it cannot be told"},
    {"output", 'o', required_argument, "FILE",
     "write there (created, never overwritten) instead of stdout",
     "write to FILE (created; an existing file is never overwritten) instead of stdout",
     "stdout"},
    {"help", 'h', no_argument, NULL, "this help", NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL, NULL},
};

const struct xopt_cmd xopt_report = {
    "report",
    "usage: xptrace report [options] PATH\n"
    "PATH: an output folder of xptrace run/sample/merge (every .perfetto-trace under it),\n"
    "or one trace file.\n",
    report_opts,
    "Exit status: 0; 1 a trace could not be read (what could be is reported); 2 bad usage.\n"};
static char usage_report[8192]; /* xopt_usage's, made first thing */

static const char *const section_ids[] = {"functions", "points",   "devices", "counters",
                                          "processes", "threads",  "windows", "tree",
                                          "calltree",  "callers",  "callees", NULL};

/* In a comma-separated list: the first name that is no section (NULL: none). */
static const char *section_unknown(const char *list) {
  static char word[64];
  for (const char *p = list;; p++) {
    size_t n = strcspn(p, ",");
    bool known = false;
    for (size_t k = 0; section_ids[k] && !known; k++)
      known = n && strlen(section_ids[k]) == n && !strncmp(section_ids[k], p, n);
    if (!known) {
      snprintf(word, sizeof word, "%.*s", (int)(n < 63 ? n : 63), p);
      return word;
    }
    p += n;
    if (!*p)
      return NULL;
  }
}

static bool section_in(const char *list, const char *id) {
  size_t k = strlen(id);
  for (const char *p = list; *p; p += *p == ',') {
    size_t n = strcspn(p, ",");
    if (n == k && !strncmp(p, id, n))
      return true;
    p += n;
  }
  return false;
}

static int parse_count(const char *s, long min, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > INT_MAX)
    return -1;
  *out = v;
  return 0;
}

static int load(struct rp_model *m, const char *path, const struct rp_select *sel) {
  char what[4200];
  snprintf(what, sizeof what, "xptrace report: reading %s", path);
  progress_begin(what, 0);
  int rc = rp_load(m, path);
  bool ok = rp_model_finish(m, sel);
  progress_end();
  if (!ok) {
    fprintf(stderr, "xptrace: report: out of memory reading %s\n", path);
    rc = -1;
  }
  return rc;
}

/* -o FILE: created, never an existing file overwritten. */
static int create_output(const char *file) {
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    fprintf(stderr, "xptrace: report: cannot create %s: %s\n", file, strerror(errno));
  return fd;
}

static int export_pprof(const struct rp_model *m, const struct rp_select *sel, double hz,
                        const char *output, const char *path, int status) {
  int fd = output ? create_output(output) : STDOUT_FILENO;
  if (fd < 0)
    return 1;
  int err = rp_pprof_write(m, sel, (uint64_t)(1e9 / hz + 0.5), fd);
  if (output && close(fd) != 0 && !err)
    err = errno;
  if (err == ENODATA) {
    fprintf(stderr, "xptrace: report: %s has no samples and no slices on threads%s: no profile\n",
            path, sel->have_regex || sel->pid >= 0 || sel->tid >= 0 ? " selected" : "");
    if (output)
      unlink(output);
    return 1;
  }
  if (err) {
    fprintf(stderr, "xptrace: report: cannot write the pprof profile%s%s: %s\n",
            output ? " " : "", output ? output : "",
            err == ENOSYS ? "this xptrace was built without zlib" : strerror(err));
    if (output)
      unlink(output);
    return 1;
  }
  if (output)
    fprintf(stderr, "xptrace report: pprof profile in %s (go tool pprof -top %s)\n", output,
            output);
  return status;
}

int cmd_report(int argc, char **argv) {
  xopt_usage(&xopt_report, usage_report, sizeof usage_report);
  struct option longopts[32];
  char shorts[16];
  xopt_getopt(&xopt_report, longopts, 32, "", shorts, sizeof shorts);
  /* --top's default is the table's word ("20"). */
  struct rp_options o = {.format = RP_FMT_TEXT,
                         .top = strtoul(xopt_default(&xopt_report, "top"), NULL, 10),
                         .sel = {.pid = -1, .tid = -1}};
  const char *other = NULL, *filter = NULL, *output = NULL, *graph = NULL, *sections = NULL;
  double hz = 0; /* --freq, else estimated from the samples */
  long v;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
    switch (c) {
    case R_TOP:
      if (parse_count(optarg, 0, &v))
        return usage_error(usage_report, "--top wants a count, not '%s'", optarg);
      o.top = (size_t)v;
      break;
    case R_SORT: {
      /* Every column some table has (report_tables.c, report_tree.c). */
      static const char *const columns[] = {
          "busy",    "calls",    "category", "change", "command", "count",     "counter", "delta",   "depth",
          "device",  "device_time", "first", "function", "inclusive", "inclusive%", "instants",
          "last",    "max",      "mean",    "min",       "name",    "open",    "pid",
          "queue",   "ratio",    "samples", "self",      "self%",   "slices",  "span",
          "threads", "tid",      "total",   "total%",    "values",  "windows", "p50",
          "p95",     "p99"};
      bool known = false;
      for (size_t k = 0; k < sizeof columns / sizeof *columns && !known; k++)
        known = strcmp(optarg, columns[k]) == 0;
      if (!known)
        return usage_error(usage_report,
                           "unknown --sort column '%s' (e.g. self, total, count, mean, p99, "
                           "inclusive, name)",
                           optarg);
      o.sort = optarg;
      break;
    }
    case R_FILTER:
      filter = optarg;
      break;
    case R_SECTION: {
      const char *bad = section_unknown(optarg);
      if (bad) {
        const char *near = nearest_name(section_ids, bad);
        return usage_error(usage_report, "unknown --section '%s'%s%s%s (known: %s)", bad,
                           near ? " (did you mean " : "", near ? near : "", near ? "?)" : "",
                           SECTION_LIST);
      }
      sections = optarg;
      break;
    }
    case R_PID:
    case R_TID:
      if (parse_count(optarg, 0, &v))
        return usage_error(usage_report, "--%s wants a number, not '%s'",
                           c == R_PID ? "pid" : "tid", optarg);
      *(c == R_PID ? &o.sel.pid : &o.sel.tid) = (int32_t)v;
      break;
    case R_TREE:
      o.tree = true;
      break;
    case R_DEPTH:
      if (parse_count(optarg, 1, &v))
        return usage_error(usage_report, "--depth wants a count of at least 1, not '%s'",
                           optarg);
      o.depth = (size_t)v;
      break;
    case R_DIFF:
      other = optarg;
      break;
    case R_FORMAT:
      if (!strcmp(optarg, "text"))
        o.format = RP_FMT_TEXT;
      else if (!strcmp(optarg, "csv"))
        o.format = RP_FMT_CSV;
      else if (!strcmp(optarg, "json"))
        o.format = RP_FMT_JSON;
      else if (!strcmp(optarg, "pprof"))
        o.format = RP_FMT_PPROF;
      else if (!strcmp(optarg, "svg"))
        o.format = RP_FMT_SVG;
      else
        return usage_error(usage_report,
                           "unknown format '%s' (known: text, csv, json, pprof, svg)", optarg);
      break;
    case 'o':
      output = optarg;
      break;
    case R_GRAPH:
      graph = optarg;
      break;
    case R_FREQ: {
      char *end;
      errno = 0;
      hz = strtod(optarg, &end);
      if (errno || end == optarg || *end || !(hz > 0 && hz <= 1e6))
        return usage_error(usage_report, "--freq wants a rate in Hz, not '%s'", optarg);
      break;
    }
    case 'h':
      fputs(usage_report, stdout);
      return 0;
    default:
      if (optopt)
        return usage_error(usage_report, "option '%s' wants a value", argv[optind - 1]);
      {
      const char *names[64];
      option_names(longopts, names, 64);
      return unknown_option(usage_report, names, argv[optind - 1]);
    }
    }
  }
  if (optind >= argc)
    return usage_error(usage_report, "missing PATH");
  if (optind + 1 < argc)
    return usage_error(usage_report, "one PATH only ('%s' is extra; --diff OTHER compares)",
                       argv[optind + 1]);
  if ((o.tree || graph) && other)
    return usage_error(usage_report, "--%s and --diff do not go together", graph ? "graph" : "tree");
  if (o.tree && graph)
    return usage_error(usage_report, "--tree or --graph, not both");
  if ((o.format == RP_FMT_PPROF || o.format == RP_FMT_SVG) && (other || o.tree))
    return usage_error(usage_report, "--format %s is of one run, without --diff or --tree",
                       o.format == RP_FMT_SVG ? "svg" : "pprof");
  if (o.format == RP_FMT_PPROF && !output && isatty(STDOUT_FILENO))
    return usage_error(usage_report, "a pprof profile is binary: -o FILE, or redirect stdout");
  if (filter) {
    int err = regcomp(&o.sel.regex, filter, REG_EXTENDED | REG_NOSUB);
    if (err) {
      char msg[128];
      regerror(err, &o.sel.regex, msg, sizeof msg);
      return usage_error(usage_report, "bad --filter '%s': %s", filter, msg);
    }
    o.sel.have_regex = true;
  }
  const char *path = argv[optind];
  int status = 0;
  struct rp_model a, b;
  rp_model_init(&a);
  rp_model_init(&b);
  if (load(&a, path, &o.sel) < 0)
    status = 1;
  if (other && load(&b, other, &o.sel) < 0)
    status = 1;
  if (o.format == RP_FMT_PPROF) {
    if (!(hz > 0) && a.sample_hz && !a.sample_hz_mixed) {
      hz = (double)a.sample_hz; /* the trace says it */
    } else if (!(hz > 0) && a.nsamples) {
      hz = rp_sample_rate_estimate(&a);
      if (hz > 0)
        fprintf(stderr, "xptrace report: sampling rate %.6g Hz, from the samples' spacing%s (--freq sets it)\n",
                hz, a.sample_hz_mixed ? " (the trace's processes say different rates)" : "");
    }
    if (!(hz > 0)) {
      hz = 100; /* xptrace sample's default rate */
      if (a.nsamples)
        fprintf(stderr, "xptrace report: too few samples to tell their rate: %.6g Hz (--freq sets it)\n", hz);
    }
    status = export_pprof(&a, &o.sel, hz, output, path, status);
    rp_model_free(&a);
    if (o.sel.have_regex)
      regfree(&o.sel.regex);
    return status;
  }
  FILE *out = stdout;
  if (output) {
    int fd = create_output(output);
    out = fd < 0 ? NULL : fdopen(fd, "w");
    if (!out) {
      if (fd >= 0)
        close(fd);
      rp_model_free(&a);
      rp_model_free(&b);
      if (o.sel.have_regex)
        regfree(&o.sel.regex);
      return 1;
    }
  }
  if (o.format == RP_FMT_SVG) {
    char title[512];
    snprintf(title, sizeof title, "xptrace report: %s", path);
    int err = rp_svg_write(&a, &o.sel, title, out);
    if (err == ENODATA)
      fprintf(stderr, "xptrace: report: %s has no samples and no slices on threads%s: no flame "
                      "graph\n", path, o.sel.have_regex || o.sel.pid >= 0 || o.sel.tid >= 0
                                          ? " selected" : "");
    else if (err || fflush(out) != 0)
      fprintf(stderr, "xptrace: report: cannot write the flame graph: %s\n",
              strerror(err ? err : errno));
    else if (output)
      fprintf(stderr, "xptrace report: flame graph in %s (open it in a browser)\n", output);
    if (out != stdout && fclose(out) != 0 && !err)
      err = errno;
    if (err && output)
      unlink(output);
    status = err ? 1 : status;
    rp_model_free(&a);
    if (o.sel.have_regex)
      regfree(&o.sel.regex);
    return status;
  }
  struct rp_table tables[RP_TABLES_MAX];
  size_t n;
  if (other)
    n = rp_tables_diff(&a, &b, &o.sel, tables);
  else if (graph) {
    n = rp_graph_build(&a, &o.sel, graph, o.depth, tables);
    if (tables[0].nrows == 0 && !tables[0].oom) {
      fprintf(stderr, "xptrace: report: no call of '%s' among the slices on threads of %s\n",
              graph, path);
      status = 1;
    }
  } else if (o.tree) {
    bool samples = false;
    for (size_t k = 0; k < a.nsamples && !samples; k++)
      samples = rp_sample_selected(&a, &a.samples[k], &o.sel);
    if (samples || a.ncnodes < 2)
      rp_tree_build(&a, &o.sel, o.depth, &tables[0]);
    else
      rp_calltree_build(&a, &o.sel, o.depth, &tables[0]);
    n = 1;
  } else
    n = rp_tables_build(&a, &o.sel, tables);
  if (sections) { /* only those, in the report's order; an empty one keeps its header */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      if (section_in(sections, tables[i].id))
        tables[k++] = tables[i];
      else
        rp_table_free(&tables[i]);
    }
    n = k;
    o.headers = true;
  }
  for (size_t i = 0; i < n; i++) {
    rp_table_sort(&tables[i], &o);
    if (tables[i].oom && status == 0) {
      fprintf(stderr, "xptrace: report: out of memory, table %s is incomplete\n", tables[i].id);
      status = 1;
    }
  }
  rp_print(out, tables, n, &o, path, other);
  if ((fflush(out) != 0 || (out != stdout && fclose(out) != 0)) && status == 0) {
    fprintf(stderr, "xptrace: report: cannot write the report: %s\n", strerror(errno));
    status = 1;
  }
  for (size_t i = 0; i < n; i++)
    rp_table_free(&tables[i]);
  rp_model_free(&a);
  rp_model_free(&b);
  if (o.sel.have_regex)
    regfree(&o.sel.regex);
  return status;
}

int report_points_table(FILE *out, const char *trace, size_t top) {
  struct rp_options o = {.format = RP_FMT_TEXT, .top = top, .sel = {.pid = -1, .tid = -1}};
  struct rp_model m;
  rp_model_init(&m);
  int status = load(&m, trace, &o.sel) < 0 ? 1 : 0;
  struct rp_table tables[RP_TABLES_MAX];
  size_t n = rp_tables_build(&m, &o.sel, tables);
  for (size_t i = 0; i < n; i++) {
    if (strcmp(tables[i].id, "points") == 0) {
      rp_table_sort(&tables[i], &o);
      rp_print(out, &tables[i], 1, &o, trace, NULL);
    }
    rp_table_free(&tables[i]);
  }
  rp_model_free(&m);
  return status;
}

int report_slices_table(FILE *out, const struct xpt_slice_table *sl, size_t top,
                        const char *source) {
  struct rp_options o = {.format = RP_FMT_TEXT, .top = top, .sel = {.pid = -1, .tid = -1}};
  struct rp_table t;
  rp_table_init(&t, "points", "Trace points (slices on threads)");
  rp_table_col(&t, "name", RP_K_STR);
  rp_table_col(&t, "category", RP_K_STR);
  rp_table_col(&t, "count", RP_K_INT);
  rp_table_col(&t, "total", RP_K_NS);
  rp_table_col(&t, "self", RP_K_NS);
  static const char *const dist[] = {"mean", "min", "max", "p50", "p95", "p99"};
  for (size_t i = 0; i < 6; i++)
    rp_table_col(&t, dist[i], RP_K_NS);
  t.sort_col = 3;
  uint64_t count = 0, total = 0, self = 0;
  for (size_t i = 0; i < sl->n; i++) {
    const struct xpt_slice_row *r = &sl->rows[i];
    if (!r->count)
      continue;
    struct rp_cell *c = rp_table_row(&t);
    if (!c)
      break;
    double v[11] = {0, 0, (double)r->count, (double)r->total, (double)r->self,
                    (double)(r->sum / r->count), (double)r->min, (double)r->max};
    static const double q[3] = {0.50, 0.95, 0.99};
    for (size_t k = 0; k < 3; k++) { /* a bucket's midpoint, within the exact range */
      uint64_t p = stats_hist_quantile(&r->hist, r->count, q[k]);
      v[8 + k] = (double)(p < r->min ? r->min : p > r->max ? r->max : p);
    }
    c[0] = (struct rp_cell){.s = r->name};
    c[1] = (struct rp_cell){.s = r->category};
    for (size_t k = 2; k < 11; k++)
      c[k] = (struct rp_cell){.s = "", .v = v[k]};
    count += r->count;
    total += r->total;
    self += r->self;
  }
  char b1[32], b2[32];
  rp_fmt_ns(b1, sizeof b1, (double)total);
  rp_fmt_ns(b2, sizeof b2, (double)self);
  /* As report's line; the finisher leaves no end without its begin. */
  snprintf(t.note, sizeof t.note,
           "slices %llu, total %s, self %s; ends without a begin 0, begins never ended %llu",
           (unsigned long long)count, b1, b2, (unsigned long long)sl->unclosed);
  rp_table_sort(&t, &o);
  rp_print(out, &t, 1, &o, source, NULL);
  if (sl->oom)
    fprintf(out, "xptrace: out of memory: some slices were not counted in this table\n");
  rp_table_free(&t);
  return 0;
}
