/* xptrace run: the command with tracing on and the collectors loaded. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xpti/xpti_data_types.h>

#include "counters.h"
#include "options.h"
#include "xpt_collector.h"
#include "xpt_slices.h"
#include "xptrace_cmds.h"
#include "sampler_config.h" /* the period syntax */
#include "fn_config.h" /* the function hooks' settings parsers */
#ifdef XPTRACE_HAVE_PERF
#include "sample_perf.h"
#include "sample_timer.h"
#endif

enum {
  OPT_FORMAT = 256, OPT_BUFFER_SIZE, OPT_MAX_SIZE, OPT_BUFFER_POLICY, OPT_STREAMS, OPT_OPENCL,
  OPT_SAMPLE, OPT_PERIODS, OPT_FUNCTIONS, OPT_FN_EXCLUDE, OPT_FN_DEPTH, OPT_FN_MIN_DURATION,
  OPT_COUNTERS, OPT_MPI, OPT_LEVEL_ZERO, OPT_METHOD, OPT_OFF_CPU, OPT_CLOCK, OPT_CALL_GRAPH,
  OPT_NO_DEMANGLE
};

/* The one table of run's options: the parser's, --help's, avail's and
 * docs/xptrace.md's (`xptrace avail --markdown run`). */
static const struct xopt run_opts[] = {
    {"output", 'o', required_argument, "DIR", "output folder",
     "the run's folder (created before the command starts; if it exists it must be yours, a real "
     "folder, not writable by group or others; not empty); every process writes into a folder of "
     "its own inside it, so several runs may share it ([merge.md](merge.md))",
     "`./xptrace-<command>-<pid of xptrace>`, a new folder (`-1`, `-2` ... if the name is taken)"},
    {"collectors", 'c', required_argument, "LIST", "comma list of perfetto, stats, text",
     "comma list of `perfetto`, `stats`, `text` (`text` writes `text.log` in the output folder: "
     "`XPTI_TEXT_OUTPUT`)",
     "`perfetto,stats`; with `--functions`, `perfetto`, then the per-function table counted while "
     "the trace is written ([functions.md](functions.md))"},
    {"format", OPT_FORMAT, required_argument, "perfetto\\|json", "trace format",
     "trace file format of the perfetto collector", "`perfetto`"},
    {"buffer-size", OPT_BUFFER_SIZE, required_argument, "SIZE", "trace buffer memory, at least 64K",
     "trace buffer memory: digits with an optional `K`, `M`, `G`, `T` (powers of 1024); at least "
     "`64K`, at most `1T` (bounded by half the output's free space, said)",
     "`64M`"},
    {"max-size", OPT_MAX_SIZE, required_argument, "SIZE",
     "stop recording a process once its recording holds SIZE",
     "stop recording a process once its recording holds `SIZE`; later events are dropped, counted "
     "and said (`XPTRACE_MAX_SIZE`)",
     "no limit (a recording passing `1G` is said once)"},
    {"buffer-policy", OPT_BUFFER_POLICY, required_argument, "flush\\|ring",
     "when buffers are full: write them out (flush) or keep the newest (ring)",
     "when buffers are full: write them out, or keep the newest", "`flush`"},
    {"streams", OPT_STREAMS, required_argument, "LIST",
     "record only these streams (comma list; shell patterns)",
     "record only these streams (comma list; shell patterns such as `sycl*`; must name one)", "all"},
    {"opencl", OPT_OPENCL, no_argument, NULL,
     "trace OpenCL calls (adds the xptrace layer to OPENCL_LAYERS)",
     "trace OpenCL calls: appends `<lib>/libxptrace_opencl.so` to `OPENCL_LAYERS` (after any "
     "layers already there, `:`-separated)",
     "off"},
    {"level-zero", OPT_LEVEL_ZERO, no_argument, NULL,
     "trace Level Zero calls (the loader's tracing layer, ours: ZE_ENABLE_TRACING_LAYER=1, "
     "<lib>/level_zero first in LD_LIBRARY_PATH)",
     "trace Level Zero calls with our loader tracing layer: sets `ZE_ENABLE_TRACING_LAYER=1` and "
     "puts `<lib>/level_zero` (holding our `libze_tracing_layer.so.1`) first in `LD_LIBRARY_PATH`; "
     "see [level_zero.md](level_zero.md)",
     "off"},
    {"sample", OPT_SAMPLE, no_argument, NULL,
     "also sample call stacks (as 'xptrace sample'; other settings from the XPTRACE_SAMPLE_* "
     "variables)",
     "also sample call stacks, as `xptrace sample` does, with its options and defaults: "
     "`--method`, `-f`, `--clock`, `--off-cpu`, `--call-graph`, `--no-demangle` "
     "([sampler.md](sampler.md#the-command); `--depth` stays function tracing's); other timer "
     "settings from the `XPTRACE_SAMPLE_*` variables",
     "off"},
    {"method", OPT_METHOD, required_argument, "M", "with --sample: perf or timer",
     "with `--sample`: `perf` or `timer` ([sampler.md](sampler.md))",
     "`perf` where the kernel allows it; `timer` with `--periods` on several clocks"},
    {"off-cpu", OPT_OFF_CPU, no_argument, NULL,
     "with --sample, perf method: where threads blocked, with stacks",
     "with `--sample`, perf method: where threads blocked, with stacks "
     "([sampler.md](sampler.md#the-command))",
     "off"},
    {"clock", OPT_CLOCK, required_argument, "C",
     "with --sample: cputime, realtime or both, as 'xptrace sample'",
     "with `--sample`: `cputime`, `realtime` or `both`, as `xptrace sample --clock` "
     "([sampler.md](sampler.md#the-command))",
     "`cputime`"},
    {"call-graph", OPT_CALL_GRAPH, required_argument, "M",
     "with --sample, perf method: dwarf or fp, as 'xptrace sample'",
     "with `--sample`, perf method: `dwarf` or `fp`, as `xptrace sample --call-graph` "
     "([sampler.md](sampler.md#the-command))",
     "`dwarf`"},
    {"no-demangle", OPT_NO_DEMANGLE, no_argument, NULL, "with --sample: as 'xptrace sample'",
     "with `--sample`: C++ names as the binary has them ([sampler.md](sampler.md#the-command))",
     "off"},
    {"freq", 'f', required_argument, "HZ", "with --sample: samples per CPU-second",
     "with `--sample`: samples per CPU-second", "100"},
    {"periods", OPT_PERIODS, required_argument, "SPEC",
     "record (and sample) only inside time windows: space-separated clock:delay:duration:cycles "
     "(see docs/xptrace.md)",
     "record only inside time windows (below); sets `XPTRACE_PERIODS` and, for `--sample`, "
     "`XPTRACE_SAMPLE_PERIODS` (the perf method keeps windows on one clock itself; specs on "
     "several clocks take the timer method, said)",
     "the whole run"},
    {"functions", OPT_FUNCTIONS, optional_argument, "[REGEX]",
     "trace function entries and exits (all of the program's, whatever its build, or those whose "
     "name REGEX is found in: ^ and $ anchor it; given again, either one; see docs/functions.md)",
     "trace function entries and exits (every function of the program, whatever its build: "
     "`-finstrument-functions`, `-pg`, patchable entries or none; or those whose name REGEX, a "
     "POSIX extended regex, is found in (`^`, `$` anchor it; several `--functions` accumulate), "
     "in the program and the libraries it loads; as a separate word it must come before `--`): "
     "preloads `<lib>/libxptrace_functions.so` and sets `XPTRACE_FUNCTIONS*`; see "
     "[functions.md](functions.md)",
     "off"},
    {"exclude", OPT_FN_EXCLUDE, required_argument, "REGEX",
     "with --functions: not these functions (accumulates too)",
     "with `--functions`: not the functions whose name REGEX is found in (several accumulate; "
     "`XPTRACE_FUNCTIONS_EXCLUDE`)",
     "none"},
    {"depth", OPT_FN_DEPTH, required_argument, "N",
     "with --functions: record nesting levels 1 to N only",
     "with `--functions`: record nesting levels 1 to N only (`XPTRACE_FUNCTIONS_DEPTH`)", "all"},
    {"min-duration", OPT_FN_MIN_DURATION, required_argument, "D",
     "with --functions: only calls lasting D or more (10us, 1ms)",
     "with `--functions`: only calls lasting D or more (`10us`, `1ms`; "
     "`XPTRACE_FUNCTIONS_MIN_DURATION`)",
     "`0`"},
    {"counters", OPT_COUNTERS, required_argument, "LIST",
     "counter tracks (default, all, or names 'xptrace avail' lists) into "
     "counters.perfetto-trace",
     "counter tracks (CPU time, context switches, page faults per thread; RSS, peak RSS; "
     "perf_event totals, hardware ones where a PMU exists) into `counters.perfetto-trace`: "
     "`default`, `all` or names from `xptrace avail`; see [report.md](report.md#counters)",
     "off"},
    {"mpi", OPT_MPI, no_argument, NULL,
     "trace MPI calls and messages (preloads the xptrace MPI layer; also as 'mpirun ... xptrace "
     "run --mpi -- app')",
     "trace MPI calls and messages: appends `<lib>/libxptrace_mpi.so` to `LD_PRELOAD` "
     "([mpi.md](mpi.md)); also as `mpirun ... xptrace run --mpi -- app`",
     "off"},
    {"verbose", 'v', no_argument, NULL, "print the environment and command before running",
     "print every variable set and the command before running", "off"},
    {"help", 'h', no_argument, NULL, "this help", NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL, NULL},
};

const struct xopt_cmd xopt_run = {
    "run", "usage: xptrace run [options] -- command [args...]\n", run_opts,
    "Exit status: the command's; 128+N if it was killed by signal N; 2 for bad usage;\n"
    "127 if the command cannot be found; 126 if it is a folder or not executable.\n"};
static char usage_run[8192]; /* xopt_usage's, made first thing */

/* ---- run ----------------------------------------------------------------- */

typedef struct run_options {
  const char *output;
  const char *collectors;
  const char *format;
  const char *buffer_size;
  const char *max_size;
  const char *buffer_policy;
  const char *streams;
  bool opencl;
  bool level_zero;
  bool verbose;
  bool functions;
  const char *fn_select, *fn_exclude, *fn_depth, *fn_min_duration;
} run_options_t;

/* Several --functions (--exclude): either one matches, as uftrace's -F. */
enum { FN_REGEX_MAX = 4096 };
static char fn_select_buf[FN_REGEX_MAX], fn_exclude_buf[FN_REGEX_MAX];
static const char *fn_accumulate(char *buf, const char *so_far, const char *re) {
  char prev[FN_REGEX_MAX];
  snprintf(prev, sizeof prev, "%s", so_far ? so_far : "");
  int n = so_far ? snprintf(buf, FN_REGEX_MAX, "(%s)|(%s)", prev, re)
                 : snprintf(buf, FN_REGEX_MAX, "%s", re);
  if (n < 0 || n >= FN_REGEX_MAX)
    return NULL;
  return buf;
}

/* Each regex on its own: the message names the one that is wrong. */
static bool fn_regex_ok(const char *re) {
  regex_t r;
  if (!fn_regex_compile(re, &r))
    return false;
  regfree(&r);
  return true;
}

/* --functions: the settings travel in XPTRACE_FUNCTIONS*, the library
 * goes first in LD_PRELOAD (its hooks must win over glibc's no-ops). */
static int run_functions(const run_options_t *o) {
  regex_t re;
  unsigned depth;
  uint64_t ns;
  if (!o->functions) {
    if (o->fn_exclude || o->fn_depth || o->fn_min_duration)
      return usage_error(usage_run, "--exclude, --depth and --min-duration need --functions");
    return 0;
  }
  const char *bad = NULL;
  if (o->fn_select && !fn_regex_compile(o->fn_select, &re))
    bad = o->fn_select;
  else if (o->fn_select)
    regfree(&re);
  if (!bad && o->fn_exclude && !fn_regex_compile(o->fn_exclude, &re))
    bad = o->fn_exclude;
  else if (!bad && o->fn_exclude)
    regfree(&re);
  if (bad)
    return usage_error(usage_run, "'%s' is not a regular expression", bad);
  if (o->fn_depth && !fn_parse_depth(o->fn_depth, &depth))
    return usage_error(usage_run, "depth '%s' is not a number from 1 to %u", o->fn_depth,
                       FN_MAX_DEPTH);
  if (o->fn_min_duration && !fn_parse_duration(o->fn_min_duration, &ns))
    return usage_error(usage_run, "duration '%s' is not a duration (e.g. 10us, 1ms)",
                       o->fn_min_duration);
  char lib[PATH_MAX + 64];
  lib_path("libxptrace_functions.so", lib, sizeof lib);
  if (access(lib, R_OK) != 0)
    return usage_error(usage_run, "function hooks not installed: %s: %s", lib, strerror(errno));
  const struct { const char *name, *value; } vars[] = {
      {"XPTRACE_FUNCTIONS", o->fn_select}, {"XPTRACE_FUNCTIONS_EXCLUDE", o->fn_exclude},
      {"XPTRACE_FUNCTIONS_DEPTH", o->fn_depth}, {"XPTRACE_FUNCTIONS_MIN_DURATION", o->fn_min_duration}};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) {
    if (vars[i].value)
      set_env(o->verbose, vars[i].name, vars[i].value);
    else
      unsetenv(vars[i].name);
  }
  const char *preload = getenv("LD_PRELOAD");
  size_t n = strlen(lib) + (preload ? strlen(preload) : 0) + 2;
  char *joined = malloc(n);
  if (!joined)
    return 1;
  snprintf(joined, n, "%s%s%s", lib, preload && *preload ? ":" : "", preload ? preload : "");
  set_env(o->verbose, "LD_PRELOAD", joined);
  free(joined);
  return 0;
}

/* Validate the collector list; fills `subscribers` with their paths. */
static int run_collectors(const char *list, char *subscribers, size_t len, bool chosen[]) {
  char copy[1024];
  if (strlen(list) >= sizeof copy)
    return usage_error(usage_run, "collector list too long");
  snprintf(copy, sizeof copy, "%s", list);
  subscribers[0] = '\0';
  int count = 0;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int i = 0; i < NCOLLECTORS; ++i)
      if (strcmp(tok, xptrace_collectors[i].name) == 0)
        found = i;
    if (found < 0)
      return usage_error(usage_run, "unknown collector '%s' (known: perfetto, stats, text)", tok);
    if (chosen[found])
      continue;
    char path[PATH_MAX + 64];
    lib_path(xptrace_collectors[found].library, path, sizeof path);
    if (access(path, R_OK) != 0)
      return usage_error(usage_run, "collector '%s' not installed: %s: %s", tok, path,
                         strerror(errno));
    chosen[found] = true;
    size_t used = strlen(subscribers);
    snprintf(subscribers + used, len - used, "%s%s", used ? "," : "", path);
    ++count;
  }
  if (count == 0)
    return usage_error(usage_run, "no collector given");
  return 0;
}

/* --functions with the trace collector alone (its default): the
 * per-function table, from the slices counted while the traces were
 * written; read back from the trace (as `xptrace report` does) only when
 * nothing was counted here (a process that finished its own recording). */
static void print_function_table(const char *trace, const struct xpt_slice_table *slices,
                                 int finished_here) {
  fflush(stderr);
  if (slices->n)
    report_slices_table(stderr, slices, 20, trace);
  else if (finished_here && getenv("XPTRACE_FUNCTIONS"))
    fprintf(stderr, "xptrace: --functions '%s' recorded no call: no function whose name it is "
                    "found in ran (docs/functions.md)\n", getenv("XPTRACE_FUNCTIONS"));
  else if (finished_here)
    /* Every function of the program is traced: none ran, or none could be
     * patched (the library said why). */
    fprintf(stderr, "xptrace: --functions recorded no call: no traced function of the program "
                    "ran (docs/functions.md)\n");
  else
    report_points_table(stderr, trace, 20);
}

/* Whether some process of the run called XPTI: the collectors left a
 * trace, a recording or statistics in its folder. */
static bool run_recorded(char *const *leaves, size_t n) {
  static const char *const made[] = {"trace.perfetto-trace", "trace.json", "stats.csv",
                                     "events.xprec"};
  char path[PATH_MAX + 64];
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < sizeof made / sizeof made[0]; k++) {
      snprintf(path, sizeof path, "%s/%s", leaves[i], made[k]);
      if (access(path, F_OK) == 0)
        return true;
    }
  return false;
}

/* Every process of the run wrote into a folder of its own (marked with
 * the session token); their traces become one, dir/trace.perfetto-trace,
 * except for an MPI rank (the ranks share the folder: `xptrace merge`
 * joins them once all have ended). */
static void print_outputs(const char *dir, const bool chosen[], const char *format,
                          const char *token, const char *samples, bool fn_table, bool hint,
                          const char *counters, bool sampled) {
  const char *rank = run_mpi_rank();
  if (!rank) /* a rank says one line (run_mpi.c) */
    fprintf(stderr, "xptrace: output in %s\n", dir);
  char **leaves = NULL;
  size_t n = xptrace_session_dirs(dir, token, &leaves);
  bool merge = !rank && !(format && strcmp(format, "json") == 0);
  char path[PATH_MAX + 64];
  /* A program that never calls XPTI (most do not) leaves nothing to
   * finish or count: said once, with what would trace it. */
  bool recorded = run_recorded(leaves, n);
  /* Counters and samples are taken from outside it: not "no events". */
  if (!recorded && (chosen[0] || chosen[1]) && (counters[0] || sampled))
    fprintf(stderr, "xptrace: the program made no XPTI calls: no trace points of its own%s\n",
            counters[0] && sampled ? " (counters and samples below)"
            : counters[0]          ? " (its counters below)"
                                   : " (its samples below)");
  else if (!recorded && (chosen[0] || chosen[1]))
    fprintf(stderr, "xptrace: the program made no XPTI calls: no events to trace or count%s\n",
            hint ? " (--functions traces its functions, --sample samples it)" : "");
  if (chosen[0]) {
    /* The program's recordings (its forked and exec'd children's too)
     * become traces here, however the program ended. */
    int traces = 0;
    struct xpt_slice_table slices = {0};
    if (fn_table)
      xpt_slices_collect(&slices);
    if (n == 0) {
      xptrace_finish_dir_print(dir, &traces, !merge && !rank);
    } else {
      /* only this run's: a shared -o holds other runs' processes */
      for (size_t i = 0; i < n; i++) {
        int k = 0;
        xptrace_finish_dir_print(leaves[i], &k, !merge && !rank);
        traces += k;
      }
    }
    xpt_slices_collect(NULL);
    unsigned processes = 0;
    char merged[PATH_MAX + 300];
    if (merge && n &&
        xptrace_merge_session(dir, leaves, n, samples, merged, sizeof merged, &processes) == 0) {
      if (processes > 1)
        fprintf(stderr, "xptrace: one trace of %u processes\n", processes);
      fprintf(stderr, "xptrace: trace %s (open in https://ui.perfetto.dev)\n", merged);
      if (fn_table)
        print_function_table(merged, &slices, traces);
    } else if (!recorded || rank) {
      /* said above; a rank's line below */
    } else if (traces == 0) {
      fprintf(stderr, "xptrace: no trace written (no recording in %s)\n", dir);
    } else if (merge) {
      fprintf(stderr, "xptrace: the traces are in the process folders of %s\n", dir);
    }
    xpt_slices_free(&slices);
  }
  if (counters[0])
    fprintf(stderr, "xptrace: counters %s (xptrace report --top 0 %s)\n", counters, dir);
  if (rank) { /* one line: its process's trace and statistics */
    char trace[PATH_MAX + 64] = "", stats[PATH_MAX + 64] = "";
    for (size_t i = 0; i < n; i++) {
      snprintf(path, sizeof path, "%s/trace.%s", leaves[i],
               format && !strcmp(format, "json") ? "json" : "perfetto-trace");
      if (!trace[0] && chosen[0] && access(path, R_OK) == 0)
        snprintf(trace, sizeof trace, "%s", path);
      snprintf(path, sizeof path, "%s/stats.csv", leaves[i]);
      if (!stats[0] && chosen[1] && access(path, R_OK) == 0)
        snprintf(stats, sizeof stats, "%s", path);
    }
    run_mpi_rank_done(dir, rank, trace[0] ? trace : NULL, stats[0] ? stats : NULL,
                      chosen[0] && !(format && !strcmp(format, "json")));
  } else if (chosen[1]) {
    int found = 0;
    for (size_t i = 0; i < n; i++) {
      snprintf(path, sizeof path, "%s/stats.csv", leaves[i]);
      if (access(path, R_OK) == 0 && ++found)
        fprintf(stderr, "xptrace: statistics %s/stats.csv, %s/stats.json\n", leaves[i], leaves[i]);
    }
    if (!found && recorded)
      fprintf(stderr, "xptrace: no statistics (written at the program's exit%s)\n",
              chosen[0] ? "; the trace has the events" : "");
  }
  for (size_t i = 0; i < n; i++)
    free(leaves[i]);
  free(leaves);
}

/* ---- run ----------------------------------------------------------------- */

typedef struct run_outputs {
  const char *dir;
  const bool *chosen;
  const char *format;
  bool sample;
  bool perf;           /* sampled by the perf method (the launcher) */
  char *samples_trace; /* perf: the samples trace it wrote */
  const char *token;
  struct xpt_counters *counters;
  bool fn_table; /* --functions without -c: the per-function table from the trace */
  bool functions;
  bool demangle;
} run_outputs_t;

static void start_counters(int pid, void *ctx) { counters_start(ctx, (pid_t)pid); }

static void run_after(const void *ctx) {
  const run_outputs_t *r = ctx;
  char counters[PATH_MAX + 64];
  counters_finish(r->counters, r->dir, r->token, counters, sizeof counters); /* before the merge */
  char samples[PATH_MAX + 64] = ""; /* the samples trace: the merge takes it too */
  if (r->perf)
    snprintf(samples, sizeof samples, "%s", r->samples_trace);
#ifdef XPTRACE_HAVE_PERF
  if (r->sample && !r->perf) { /* the timer sampler's recordings (sample_timer.c), before the merge */
    sample_timer_opts_t to = {.dir = r->dir, .demangle = r->demangle, .trace_path = samples,
                              .trace_path_len = sizeof samples};
    sample_timer_report(&to);
  }
#endif
  print_outputs(r->dir, r->chosen, r->format, r->token, samples, r->fn_table,
                !r->sample && !r->functions, counters, r->sample);
  if (r->sample)
    print_sample_outputs(r->dir, true);
}

int cmd_run(int argc, char **argv) {
  xopt_usage(&xopt_run, usage_run, sizeof usage_run);
  struct option longopts[64];
  char shorts[64];
  /* "+": options end at the command, whose own options are its own. */
  xopt_getopt(&xopt_run, longopts, 64, "+:", shorts, sizeof shorts);
  run_options_t o = {.collectors = "perfetto,stats"};
  bool collectors_given = false;
  bool sample = false, mpi = false, off_cpu = false, demangle = true;
  const char *clock = NULL, *call_graph = NULL;
  const char *periods = NULL, *method = NULL, *freq = NULL;
  const char *counters = NULL;
  opterr = 0;
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
    switch (opt) {
    case 'o': o.output = optarg; break;
    case 'c': o.collectors = optarg, collectors_given = true; break;
    case OPT_FORMAT: o.format = optarg; break;
    case OPT_BUFFER_SIZE: o.buffer_size = optarg; break;
    case OPT_MAX_SIZE: o.max_size = optarg; break;
    case OPT_BUFFER_POLICY: o.buffer_policy = optarg; break;
    case OPT_STREAMS: o.streams = optarg; break;
    case OPT_OPENCL: o.opencl = true; break;
    case OPT_LEVEL_ZERO: o.level_zero = true; break;
    case OPT_SAMPLE: sample = true; break;
    case OPT_METHOD: method = optarg; break;
    case OPT_OFF_CPU: off_cpu = true; break;
    case OPT_CLOCK: clock = optarg; break;
    case OPT_CALL_GRAPH: call_graph = optarg; break;
    case OPT_NO_DEMANGLE: demangle = false; break;
    case 'f': freq = optarg; break;
    case OPT_PERIODS: periods = optarg; break;
    case OPT_FUNCTIONS: {
      o.functions = true;
      const char *re = optarg;
      /* "--functions REGEX -- cmd": a word before a later "--" is the regex. */
      if (!optarg && optind < argc && argv[optind][0] != '-')
        for (int i = optind + 1; i < argc; ++i)
          if (strcmp(argv[i], "--") == 0) {
            re = argv[optind++];
            break;
          }
      if (re && !fn_regex_ok(re))
        return usage_error(usage_run, "'%s' is not a regular expression", re);
      if (re && !(o.fn_select = fn_accumulate(fn_select_buf, o.fn_select, re)))
        return usage_error(usage_run, "--functions: the regular expressions are too long");
      break;
    }
    case OPT_FN_EXCLUDE:
      if (!fn_regex_ok(optarg))
        return usage_error(usage_run, "'%s' is not a regular expression", optarg);
      if (!(o.fn_exclude = fn_accumulate(fn_exclude_buf, o.fn_exclude, optarg)))
        return usage_error(usage_run, "--exclude: the regular expressions are too long");
      break;
    case OPT_FN_DEPTH: o.fn_depth = optarg; break;
    case OPT_FN_MIN_DURATION: o.fn_min_duration = optarg; break;
    case OPT_COUNTERS: counters = optarg; break;
    case OPT_MPI: mpi = true; break;
    case 'v': o.verbose = true; break;
    case 'h': fputs(usage_run, stdout); return 0;
    case ':': return usage_error(usage_run, "option '%s' needs a value", argv[optind - 1]);
    default: {
      const char *names[64];
      option_names(longopts, names, 64);
      return unknown_option(usage_run, names, argv[optind - 1]);
    }
    }
  }
  if (optind >= argc)
    return usage_error(usage_run, "missing command");

  if (o.format && strcmp(o.format, "perfetto") != 0 && strcmp(o.format, "json") != 0)
    return usage_error(usage_run, "unknown format '%s' (perfetto or json)", o.format);
  uint64_t size;
  if (o.buffer_size && !xpt_parse_size(o.buffer_size, &size))
    return usage_error(usage_run, "buffer size '%s' is not a size (e.g. 64K, 64M, 1G)",
                       o.buffer_size);
  char min_text[24];
  if (o.buffer_size && size < XPT_BUFFER_MIN)
    return usage_error(usage_run, "buffer size '%s' is below the minimum of %s", o.buffer_size,
                       xpt_size_text(XPT_BUFFER_MIN, min_text, sizeof min_text));
  if (o.buffer_size && size > XPT_BUFFER_MAX)
    return usage_error(usage_run, "buffer size '%s' is above the maximum of %s", o.buffer_size,
                       xpt_size_text(XPT_BUFFER_MAX, min_text, sizeof min_text));
  uint64_t max_size;
  if (o.max_size && (!xpt_parse_size(o.max_size, &max_size) || max_size == 0))
    return usage_error(usage_run, "maximum size '%s' is not a size (e.g. 512M, 4G)", o.max_size);
  if (o.buffer_policy && strcmp(o.buffer_policy, "flush") != 0 &&
      strcmp(o.buffer_policy, "ring") != 0)
    return usage_error(usage_run, "unknown buffer policy '%s' (flush or ring)", o.buffer_policy);
  if (o.streams && o.streams[strspn(o.streams, ", \t")] == '\0')
    return usage_error(usage_run, "stream list '%s' names no stream", o.streams);
  if (o.output && !*o.output)
    return usage_error(usage_run, "empty output folder name");
  /* Function tracing records with the trace collector alone unless told
   * otherwise: its direct path costs half of two listeners' (docs/functions.md),
   * and the per-function table is read back from the trace at the end. */
  bool fn_table = o.functions && !collectors_given;
  if (fn_table)
    o.collectors = "perfetto";
  bool chosen[NCOLLECTORS] = {false};
  char subscribers[4 * (PATH_MAX + 64)];
  int rc = run_collectors(o.collectors, subscribers, sizeof subscribers, chosen);
  if (rc)
    return rc;
  char dispatcher[PATH_MAX + 64];
  lib_path("libxptifw.so", dispatcher, sizeof dispatcher);
  if (access(dispatcher, R_OK) != 0)
    return usage_error(usage_run, "dispatcher not installed: %s: %s", dispatcher,
                       strerror(errno));
  char layer[PATH_MAX + 64] = "";
  if (o.opencl) {
    lib_path("libxptrace_opencl.so", layer, sizeof layer);
    if (access(layer, R_OK) != 0)
      return usage_error(usage_run, "OpenCL layer not installed: %s: %s", layer,
                         strerror(errno));
  }
  char ze_dir[PATH_MAX + 64] = "";
  if (o.level_zero) {
    char ze_layer[PATH_MAX + 64];
    lib_path("level_zero", ze_dir, sizeof ze_dir);
    lib_path("level_zero/libze_tracing_layer.so.1", ze_layer, sizeof ze_layer);
    if (access(ze_layer, R_OK) != 0)
      return usage_error(usage_run, "Level Zero layer not installed: %s: %s", ze_layer,
                         strerror(errno));
  }
  char sampler[PATH_MAX + 64];
  lib_path("libxptrace_sampler.so", sampler, sizeof sampler);
  double hz = 100;
  if ((method || freq || off_cpu || clock || call_graph || !demangle) && !sample)
    return usage_error(usage_run, "%s needs --sample", method ? "--method" : freq ? "--freq" : off_cpu ? "--off-cpu"
                       : clock ? "--clock" : call_graph ? "--call-graph" : "--no-demangle");
  bool on[SAMPLER_NCLOCKS] = {false};
  if (clock && !sampler_parse_clock(clock, on))
    return usage_error(usage_run, "unknown clock '%s' (cputime, realtime or both)", clock);
  bool wall = clock && !(on[SAMPLER_CPUTIME] && !on[SAMPLER_REALTIME]);
  bool fp = call_graph && strcmp(call_graph, "fp") == 0;
  if (call_graph && !fp && strcmp(call_graph, "dwarf") != 0)
    return usage_error(usage_run, "unknown call graph '%s' (dwarf or fp)", call_graph);
  if (method && strcmp(method, "perf") != 0 && strcmp(method, "timer") != 0)
    return usage_error(usage_run, "unknown method '%s' (perf or timer)", method);
  if (off_cpu && method && strcmp(method, "perf") != 0)
    return usage_error(usage_run, "--off-cpu needs the perf method");
  if (freq && !sampler_parse_freq(freq, &hz))
    return usage_error(usage_run, "frequency '%s' is not a number of Hz (0 < f <= 100000)", freq);
  /* As documented before --freq: the variable sets the rate of both methods. */
  const char *freq_env = getenv("XPTRACE_SAMPLE_FREQ");
  if (!freq && freq_env && *freq_env && !sampler_parse_freq(freq_env, &hz))
    hz = 100;
  if (sample && access(sampler, R_OK) != 0)
    return usage_error(usage_run, "sampler not installed: %s: %s", sampler, strerror(errno));

  sampler_period_t specs[SAMPLER_MAX_PERIODS];
  size_t nspecs = 0;
  char bad[64];
  if (periods && !sampler_parse_periods(periods, specs, &nspecs, bad, sizeof bad))
    return usage_error(usage_run,
                       "period '%s' is not clock:delay:duration:cycles (clock realtime, cputime "
                       "or process_cputime; seconds; duration > 0)",
                       bad[0] ? bad : periods);
  /* As `xptrace sample`: the perf method keeps windows on one clock;
   * specs mixing clocks are the timer's. */
  bool mixed_windows = false;
  for (size_t i = 1; periods && i < nspecs; ++i)
    mixed_windows |= specs[i].clock != specs[0].clock;
  bool want_perf = sample && (!method || strcmp(method, "perf") == 0);
  if (want_perf && (method || off_cpu) && mixed_windows)
    return usage_error(usage_run, "the perf method takes --periods on one clock (not several)");
  if (want_perf && (method || off_cpu) && fp && (wall || off_cpu))
    return usage_error(usage_run, "--off-cpu and --clock realtime need --call-graph dwarf");
  if (o.fn_select && !*o.fn_select)
    o.fn_select = NULL;
  /* Checked (and its environment set) before anything is created. */
  if ((rc = run_functions(&o)) != 0)
    return rc;
  struct xpt_counters *cnt = NULL;
  char why[160];
  if (counters && !(cnt = counters_parse(counters, why, sizeof why)))
    return usage_error(usage_run, "%s", why);
  free(cnt); /* checked; made again once nothing can fail before the launch */
  char mpi_layer[PATH_MAX + 64];
  lib_path("libxptrace_mpi.so", mpi_layer, sizeof mpi_layer);
  if (mpi && access(mpi_layer, R_OK) != 0)
    return usage_error(usage_run, "MPI layer not installed: %s: %s", mpi_layer, strerror(errno));

  char **command = &argv[optind];
  if ((rc = command_check(command[0])) != 0)
    return rc;

  char dir[PATH_MAX], job_dir[PATH_MAX];
  if (!o.output && run_mpi_job_dir(command[0], job_dir, sizeof job_dir))
    o.output = job_dir; /* the job's ranks share it */
  rc = output_dir_prepare(usage_run, o.output, command[0], dir, sizeof dir);
  if (rc)
    return rc;

  set_env(o.verbose, "XPTI_TRACE_ENABLE", "1");
  set_env(o.verbose, "XPTI_FRAMEWORK_DISPATCHER", dispatcher);
  set_env(o.verbose, "XPTI_SUBSCRIBERS", subscribers);
  set_env(o.verbose, "XPTRACE_OUTPUT", dir);
  set_env(o.verbose, "XPTRACE_FINISHER", "launcher"); /* the recordings are ours to finish */
  /* Marks the folders of this run's processes (a shared -o holds others). */
  char token[128], host[64] = "";
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  gethostname(host, sizeof host - 1);
  snprintf(token, sizeof token, "%s-%d-%lld%09ld", host, (int)getpid(), (long long)now.tv_sec,
           now.tv_nsec);
  set_env(o.verbose, "XPTRACE_SESSION", token);
  if (o.format)
    set_env(o.verbose, "XPTRACE_TRACE_FORMAT", o.format);
  if (o.buffer_size)
    set_env(o.verbose, "XPTRACE_BUFFER_SIZE", o.buffer_size);
  if (o.max_size)
    set_env(o.verbose, "XPTRACE_MAX_SIZE", o.max_size);
  if (o.buffer_policy)
    set_env(o.verbose, "XPTRACE_BUFFER_POLICY", o.buffer_policy);
  if (o.streams)
    set_env(o.verbose, "XPTRACE_STREAMS", o.streams);
  if (periods) { /* every recorder, and the sampler */
    set_env(o.verbose, "XPTRACE_PERIODS", periods);
    set_env(o.verbose, "XPTRACE_SAMPLE_PERIODS", periods);
  }
  if (chosen[2] && !getenv("XPTI_TEXT_OUTPUT")) {
    char text[PATH_MAX + 16];
    snprintf(text, sizeof text, "%s/text.log", dir);
    set_env(o.verbose, "XPTI_TEXT_OUTPUT", text);
  }
  if (o.opencl) {
    const char *layers = getenv("OPENCL_LAYERS");
    if (layers && *layers) {
      size_t n = strlen(layers) + strlen(layer) + 2;
      char *joined = malloc(n);
      if (!joined)
        return 1;
      snprintf(joined, n, "%s:%s", layers, layer);
      set_env(o.verbose, "OPENCL_LAYERS", joined);
      free(joined);
    } else {
      set_env(o.verbose, "OPENCL_LAYERS", layer);
    }
  }
  if (o.level_zero) { /* the loader dlopens libze_tracing_layer.so.1 by name: ours first */
    const char *paths = getenv("LD_LIBRARY_PATH");
    size_t n = (paths ? strlen(paths) : 0) + strlen(ze_dir) + 2;
    char *joined = malloc(n);
    if (!joined)
      return 1;
    snprintf(joined, n, "%s%s%s", ze_dir, paths && *paths ? ":" : "", paths ? paths : "");
    set_env(o.verbose, "LD_LIBRARY_PATH", joined);
    free(joined);
    set_env(o.verbose, "ZE_ENABLE_TRACING_LAYER", "1");
  }
  if (mpi) { /* preloaded after what the user preloads: theirs come first */
    const char *preload = getenv("LD_PRELOAD");
    size_t n = (preload ? strlen(preload) : 0) + strlen(mpi_layer) + 2;
    char *joined = malloc(n);
    if (!joined)
      return 1;
    snprintf(joined, n, "%s%s%s", preload && *preload ? preload : "",
             preload && *preload ? ":" : "", mpi_layer);
    set_env(o.verbose, "LD_PRELOAD", joined);
    free(joined);
  }
  /* The perf method where the kernel allows it, as `xptrace sample`. */
  bool perf = false;
  char samples_trace[PATH_MAX + 64] = "";
#ifdef XPTRACE_HAVE_PERF
  sample_perf_opts_t po = {hz, 256, dir, o.verbose, fp, demangle, 16384, samples_trace, sizeof samples_trace,
                           periods ? specs : NULL, periods ? nspecs : 0, off_cpu, wall};
  if (want_perf && (mixed_windows || (wall && !method && !off_cpu))) {
    /* As `xptrace sample`: wall time asked alone takes the timer method. */
    fprintf(stderr, "xptrace sample: %s needs the timer method; using it\n",
            mixed_windows ? "--periods on several clocks" : "--clock realtime");
  } else if (want_perf) {
    char why_not[256];
    perf = sample_perf_available(&po, why_not, sizeof why_not);
    if (!perf)
      fprintf(stderr, "xptrace sample: %s; using the timer method%s\n", why_not, off_cpu ? " (no off-CPU profile)" : "");
  }
#endif
  if (sample && !perf && freq)
    set_env(o.verbose, "XPTRACE_SAMPLE_FREQ", freq);
  if (sample && !perf && clock)
    set_env(o.verbose, "XPTRACE_SAMPLE_CLOCK", clock);
  if (sample && !perf && (rc = preload_sampler(usage_run, o.verbose)) != 0)
    return rc;
  cnt = counters ? counters_parse(counters, why, sizeof why) : NULL;
  run_outputs_t outputs = {dir,   chosen,   o.format, sample,      perf, samples_trace,
                           token, cnt,      fn_table, o.functions, demangle};
  if (cnt) {
    launch_on_fork = start_counters;
    launch_on_fork_ctx = cnt;
  }
#ifdef XPTRACE_HAVE_PERF
  if (perf)
    return sample_perf_run(command, &po, run_after, &outputs);
#endif
  return launch_and_wait(command, o.verbose, run_after, &outputs);
}

