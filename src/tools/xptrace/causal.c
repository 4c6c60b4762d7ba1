/* xptrace causal: which line, made faster, would make the program faster
 * (Coz's method, run inside the program by libxptrace_causal.so; see
 * docs/causal.md).  One configuration runs like `sample`; several (many
 * --line/--speedup values, --variants N) run one child after the other,
 * each with its own environment, and the parent combines them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "causal_report.h"
#include "xpt_files.h"
#include "options.h"
#include "xptrace_cmds.h"

/* The one table of causal's options: the parser's, --help's, avail's and
 * docs/causal.md's (`xptrace avail --markdown causal`).  Most become a
 * variable that libxptrace_causal.so reads: the option names it. */
enum { OPT_VARIANTS = 256, OPT_SSCOPE, OPT_BSCOPE, OPT_WINDOW, OPT_EXPS, OPT_DURATION, OPT_PERIOD,
       OPT_PFUNC, OPT_REPORT };
static const struct xopt causal_opts[] = {
    {"line", 'l', required_argument, "FILE:N",
     "experiment on this line only (repeat: one variant each); sets XPTRACE_CAUSAL_LINE",
     "experiment on this line only; FILE matches a path suffix (`src/a.c:12`, `a.c:12`); "
     "repeated: one variant each; sets `XPTRACE_CAUSAL_LINE` (each variant's)",
     "per experiment, a line of the last 4096 samples in scope"},
    {"speedup", 's', required_argument, "PCT",
     "this virtual speedup only, 0 to 100 by 5 (repeat: one variant each); alternates with 0 % "
     "(the baseline); sets XPTRACE_CAUSAL_SPEEDUP",
     "this virtual speedup only, 0 to 100 in steps of 5, alternating with 0 (the baseline); "
     "repeated: one variant each; sets `XPTRACE_CAUSAL_SPEEDUP` (each variant's)",
     "per experiment, 0 half of the time (the baseline), else 5 to 100 in steps of 5"},
    {"variants", OPT_VARIANTS, required_argument, "N",
     "run each configuration N times, one process each",
     "run each configuration N times (1 to 1000), one process each ([variants](#options))", "1"},
    {"source-scope", OPT_SSCOPE, required_argument, "GLOB",
     "lines of these source files only; sets XPTRACE_CAUSAL_SOURCE_SCOPE",
     "lines of matching source files only (the path or its base name); sets "
     "`XPTRACE_CAUSAL_SOURCE_SCOPE`",
     "every source not under `/usr/`"},
    {"binary-scope", OPT_BSCOPE, required_argument, "GLOB",
     "lines of these binaries only; sets XPTRACE_CAUSAL_BINARY_SCOPE",
     "lines of matching binaries only (path or base name, e.g. `libfoo.so*`); sets "
     "`XPTRACE_CAUSAL_BINARY_SCOPE`",
     "the executable"},
    {"window", OPT_WINDOW, required_argument, "MS",
     "length of one experiment, 10 to 3600000; sets XPTRACE_CAUSAL_WINDOW_MS",
     "one experiment's length in ms (10 to 3600000); sets `XPTRACE_CAUSAL_WINDOW_MS`", "500"},
    {"experiments", OPT_EXPS, required_argument, "N",
     "stop experimenting after N experiments per process; sets XPTRACE_CAUSAL_EXPERIMENTS",
     "stop experimenting after N experiments per process; sets `XPTRACE_CAUSAL_EXPERIMENTS`",
     "unlimited"},
    {"duration", OPT_DURATION, required_argument, "S",
     "stop experimenting after S seconds per process; sets XPTRACE_CAUSAL_DURATION",
     "stop experimenting after S (whole) seconds per process; sets `XPTRACE_CAUSAL_DURATION`",
     "unlimited"},
    {"period", OPT_PERIOD, required_argument, "US",
     "sample period of each thread's CPU time, 100 to 1000000; sets XPTRACE_CAUSAL_PERIOD_US",
     "sample period of each thread's CPU time in us (100 to 1000000); sets "
     "`XPTRACE_CAUSAL_PERIOD_US`",
     "1000"},
    {"progress", 'p', required_argument, "STREAM:TYPE[:NAME]",
     "count an XPTI trace point type on a stream (e.g. opencl.graph:task_end), of events named "
     "NAME only if given, as a progress point (repeatable; sets XPTRACE_CAUSAL_PROGRESS)",
     "an XPTI trace point type on a stream as a progress point ([above](#progress-points)); "
     "repeatable; sets `XPTRACE_CAUSAL_PROGRESS` (comma list) and makes the library an XPTI "
     "subscriber (`XPTI_TRACE_ENABLE`, `XPTI_FRAMEWORK_DISPATCHER`, `XPTI_SUBSCRIBERS`)",
     "off"},
    {"progress-function", OPT_PFUNC, required_argument, "NAME",
     "count the entries of function NAME, patched in the unmodified program (see "
     "docs/functions.md); sets XPTRACE_FUNCTIONS",
     "entries of function NAME as a progress point: preloads `libxptrace_functions.so` with "
     "`XPTRACE_FUNCTIONS` matching NAME alone, and counts "
     "`xptrace.functions:function_begin:NAME` as `--progress` does, in "
     "`XPTRACE_CAUSAL_PROGRESS` ([above](#progress-points))",
     "off"},
    {"report", OPT_REPORT, required_argument, "FILE",
     "rank the experiments of a profile.coz and exit",
     "rank the experiments of a `profile.coz` again (stdout) and exit", "off"},
    {"output", 'o', required_argument, "DIR", "output folder",
     "output folder, as for `xptrace run`; the library gets it as `XPTRACE_OUTPUT`",
     "`./xptrace-<command>-<pid of xptrace>`, a new folder (`-1`, `-2` ... if the name is taken)"},
    {"verbose", 'v', no_argument, NULL, "print the environment and command before running",
     "print every variable set and the command before running", "off"},
    {"help", 'h', no_argument, NULL, "this help", NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL, NULL},
};

const struct xopt_cmd xopt_causal = {
    "causal",
    "usage: xptrace causal [options] -- command [args...]\n"
    "       xptrace causal --report profile.coz\n"
    "Causal profiling: experiments inside the program virtually speed up one source\n"
    "line at a time and measure the effect on progress points (XPTRACE_PROGRESS,\n"
    "COZ_PROGRESS, latency points, or XPTI trace points with --progress).  Writes\n"
    "profile.coz (Coz's format, for Coz's viewer), causal.txt and causal.csv.\n",
    causal_opts,
    "Exit status: the command's (the first failing variant's); 128+N if it was killed\n"
    "by signal N; 2 for bad usage; 127/126 if the command cannot be run.\n"};
static char usage_causal[8192]; /* xopt_usage's, made first thing */

enum { MAX_SET = 32 };

static bool parse_num(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static bool line_spec_ok(const char *s) {
  const char *colon = strrchr(s, ':');
  long n;
  return colon && colon != s && parse_num(colon + 1, 1, INT32_MAX, &n);
}

static bool is_part(const char *name) {
  size_t m = strlen(name);
  return strncmp(name, "causal-", 7) == 0 && m > 11 && strcmp(name + m - 4, ".coz") == 0;
}

/* The parts an -o folder already held: not this run's, left out. */
static char **old_parts;
static int nold;

static void note_old_parts(const char *dir) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  for (int i = 0; i < n; ++i) {
    char **v = is_part(names[i]->d_name) ? realloc(old_parts, (size_t)(nold + 1) * sizeof *v)
                                         : NULL;
    if (v && (v[nold] = strdup(names[i]->d_name)) != NULL)
      ++nold;
    if (v)
      old_parts = v;
    free(names[i]);
  }
  if (n >= 0)
    free(names);
}

static bool was_there(const char *name) {
  for (int i = 0; i < nold; ++i)
    if (strcmp(old_parts[i], name) == 0)
      return true;
  return false;
}

/* profile.coz: this run's causal-<pid>.coz, in name order. */
static int combine(const char *dir, char *profile, size_t len) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  if (n < 0)
    return -1;
  int out = xpt_create_file(dir, "profile.coz", profile, len);
  int parts = 0;
  for (int i = 0; i < n; ++i) {
    const char *name = names[i]->d_name;
    if (out >= 0 && is_part(name) && !was_there(name)) {
      char path[PATH_MAX + 300];
      snprintf(path, sizeof path, "%s/%s", dir, name);
      int in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      char buf[65536];
      ssize_t r;
      while (in >= 0 && (r = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)r) != r)
          break;
      if (in >= 0)
        close(in);
      ++parts;
    }
    free(names[i]);
  }
  free(names);
  if (out >= 0)
    close(out);
  return out < 0 ? -1 : parts;
}

static int report(const char *dir) {
  char profile[PATH_MAX + 64];
  int parts = combine(dir, profile, sizeof profile);
  if (parts < 0) {
    fprintf(stderr, "xptrace: cannot write %s/profile.coz: %s\n", dir, strerror(errno));
    return 1;
  }
  if (parts == 0) {
    fprintf(stderr, "xptrace: no causal profile written (the program was not profiled)\n");
    return 1;
  }
  return causal_report_write(profile, dir);
}

/* A C or C++ (demangled) name: no space, comma or colon-free garbage. */
static bool function_name_ok(const char *s) {
  if (!*s || strlen(s) > 120)
    return false;
  for (; *s; ++s)
    if (*s == ',' || *s == ' ' || *s == '\t' || *s == '\n')
      return false;
  return true;
}

/* --progress-function: libxptrace_functions.so patches NAME's entry (or
 * uses the compiler's hooks) and notifies function_begin on stream
 * xptrace.functions; we count those of NAME through the same XPTI
 * subscription as --progress.  The regex matches NAME literally. */
static int progress_function(bool verbose, const char *name, const char **progress, int *n) {
  static char spec[256];
  char fnlib[PATH_MAX + 64], regex[512], *r = regex;
  lib_path("libxptrace_functions.so", fnlib, sizeof fnlib);
  if (access(fnlib, R_OK) != 0)
    return usage_error(usage_causal, "function hooks not installed: %s: %s", fnlib,
                       strerror(errno));
  for (const char *c = name; *c && r < regex + sizeof regex - 3; ++c) {
    if (strchr("\\^$.|?*+()[]{}", *c))
      *r++ = '\\';
    *r++ = *c;
  }
  *r = '\0';
  set_env(verbose, "XPTRACE_FUNCTIONS", regex);
  unsetenv("XPTRACE_FUNCTIONS_EXCLUDE");
  unsetenv("XPTRACE_FUNCTIONS_DEPTH");
  unsetenv("XPTRACE_FUNCTIONS_MIN_DURATION");
  const char *preload = getenv("LD_PRELOAD"); /* ours: causal first, then the user's */
  char *joined = NULL;
  if (asprintf(&joined, "%s:%s", fnlib, preload ? preload : "") < 0)
    return 1;
  set_env(verbose, "LD_PRELOAD", joined); /* the hooks must come first (docs/functions.md) */
  free(joined);
  snprintf(spec, sizeof spec, "xptrace.functions:function_begin:%s", name);
  if (*n >= MAX_SET)
    return usage_error(usage_causal, "more than %d progress points", MAX_SET);
  progress[(*n)++] = spec;
  return 0;
}

static int add_set(const char **set, int *n, const char *v, const char *what) {
  if (*n >= MAX_SET)
    return usage_error(usage_causal, "more than %d %s values", MAX_SET, what);
  set[(*n)++] = v;
  return 0;
}

int cmd_causal(int argc, char **argv) {
  xopt_usage(&xopt_causal, usage_causal, sizeof usage_causal);
  struct option longopts[32];
  char shorts[32];
  /* "+": options end at the command, whose own options are its own. */
  xopt_getopt(&xopt_causal, longopts, 32, "+:", shorts, sizeof shorts);
  const char *lines[MAX_SET], *speedups[MAX_SET], *progress[MAX_SET];
  int nlines = 0, nspeedups = 0, nprogress = 0, rc;
  const char *sscope = NULL, *bscope = NULL, *window = NULL, *exps = NULL, *duration = NULL,
             *period = NULL, *output = NULL, *pfunc = NULL;
  long variants = strtol(xopt_default(&xopt_causal, "variants"), NULL, 10), v;
  bool verbose = false;
  opterr = 0;
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
    switch (opt) {
    case 'l':
      if (!line_spec_ok(optarg))
        return usage_error(usage_causal, "line '%s' is not FILE:N", optarg);
      if ((rc = add_set(lines, &nlines, optarg, "--line")))
        return rc;
      break;
    case 's':
      if (!parse_num(optarg, 0, 100, &v) || v % 5)
        return usage_error(usage_causal, "speedup '%s' is not 0 to 100 in steps of 5", optarg);
      if ((rc = add_set(speedups, &nspeedups, optarg, "--speedup")))
        return rc;
      break;
    case 'p':
      if (!strchr(optarg, ':') || optarg[0] == ':' || strchr(optarg, ',') ||
          strlen(optarg) > 200)
        return usage_error(usage_causal, "progress '%s' is not STREAM:TYPE[:NAME]", optarg);
      if ((rc = add_set(progress, &nprogress, optarg, "--progress")))
        return rc;
      break;
    case OPT_VARIANTS:
      if (!parse_num(optarg, 1, 1000, &variants))
        return usage_error(usage_causal, "variants '%s' is not a number from 1 to 1000", optarg);
      break;
    case OPT_SSCOPE: sscope = optarg; break;
    case OPT_BSCOPE: bscope = optarg; break;
    case OPT_WINDOW:
      if (!parse_num(optarg, 10, 3600000, &v))
        return usage_error(usage_causal, "window '%s' is not 10 to 3600000 ms", optarg);
      window = optarg;
      break;
    case OPT_EXPS:
      if (!parse_num(optarg, 1, 1000000000, &v))
        return usage_error(usage_causal, "experiments '%s' is not a positive number", optarg);
      exps = optarg;
      break;
    case OPT_DURATION:
      if (!parse_num(optarg, 1, 100000000, &v))
        return usage_error(usage_causal, "duration '%s' is not a whole number of seconds", optarg);
      duration = optarg;
      break;
    case OPT_PERIOD:
      if (!parse_num(optarg, 100, 1000000, &v))
        return usage_error(usage_causal, "period '%s' is not 100 to 1000000 us", optarg);
      period = optarg;
      break;
    case OPT_PFUNC:
      if (!function_name_ok(optarg))
        return usage_error(usage_causal, "function '%s' is not a function name", optarg);
      if (pfunc)
        return usage_error(usage_causal, "--progress-function given twice");
      pfunc = optarg;
      break;
    case OPT_REPORT: return causal_report_write(optarg, NULL);
    case 'o': output = optarg; break;
    case 'v': verbose = true; break;
    case 'h': fputs(usage_causal, stdout); return 0;
    case ':': return usage_error(usage_causal, "option '%s' needs a value", argv[optind - 1]);
    default: {
      const char *names[64];
      option_names(longopts, names, 64);
      return unknown_option(usage_causal, names, argv[optind - 1]);
    }
    }
  }
  if (optind >= argc)
    return usage_error(usage_causal, "missing command");
  char lib[PATH_MAX + 64];
  lib_path("libxptrace_causal.so", lib, sizeof lib);
  if (access(lib, R_OK) != 0)
    return usage_error(usage_causal, "causal profiler not installed: %s: %s", lib, strerror(errno));
  char **command = &argv[optind];
  if ((rc = command_check(command[0])) != 0)
    return rc;
  char dir[PATH_MAX];
  if ((rc = output_dir_prepare(usage_causal, output, command[0], dir, sizeof dir)))
    return rc;

  note_old_parts(dir);
  set_env(verbose, "XPTRACE_OUTPUT", dir);
  const char *preload = getenv("LD_PRELOAD");
  char *joined = NULL;
  if (preload && *preload && asprintf(&joined, "%s:%s", lib, preload) > 0) {
    set_env(verbose, "LD_PRELOAD", joined);
    free(joined);
  } else {
    set_env(verbose, "LD_PRELOAD", lib);
  }
  const struct { const char *name, *value; } plain[] = {
      {"XPTRACE_CAUSAL_SOURCE_SCOPE", sscope}, {"XPTRACE_CAUSAL_BINARY_SCOPE", bscope},
      {"XPTRACE_CAUSAL_WINDOW_MS", window},    {"XPTRACE_CAUSAL_EXPERIMENTS", exps},
      {"XPTRACE_CAUSAL_DURATION", duration},   {"XPTRACE_CAUSAL_PERIOD_US", period},
  };
  for (size_t i = 0; i < sizeof plain / sizeof *plain; ++i)
    if (plain[i].value)
      set_env(verbose, plain[i].name, plain[i].value);
  if (pfunc && (rc = progress_function(verbose, pfunc, progress, &nprogress)))
    return rc;
  if (nprogress) {
    char list[4096] = "", dispatcher[PATH_MAX + 64];
    for (int i = 0; i < nprogress; ++i)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "", progress[i]);
    lib_path("libxptifw.so", dispatcher, sizeof dispatcher);
    set_env(verbose, "XPTRACE_CAUSAL_PROGRESS", list);
    set_env(verbose, "XPTI_TRACE_ENABLE", "1");
    set_env(verbose, "XPTI_FRAMEWORK_DISPATCHER", dispatcher);
    set_env(verbose, "XPTI_SUBSCRIBERS", lib);
  }

  int nl = nlines ? nlines : 1, ns = nspeedups ? nspeedups : 1;
  long total = (long)nl * ns * variants, k = 0;
  int status = 0;
  for (int i = 0; i < nl; ++i) {
    for (int j = 0; j < ns; ++j) {
      for (long r = 0; r < variants; ++r) {
        /* Each variant's child gets its own environment. */
        if (nlines)
          set_env(verbose, "XPTRACE_CAUSAL_LINE", lines[i]);
        if (nspeedups)
          set_env(verbose, "XPTRACE_CAUSAL_SPEEDUP", speedups[j]);
        if (total > 1)
          fprintf(stderr, "xptrace: variant %ld/%ld%s%s%s%s\n", ++k, total,
                  nlines ? " --line " : "", nlines ? lines[i] : "",
                  nspeedups ? " --speedup " : "", nspeedups ? speedups[j] : "");
        rc = launch_and_wait(command, verbose, NULL, NULL);
        if (rc && !status)
          status = rc;
      }
    }
  }
  fprintf(stderr, "xptrace: output in %s\n", dir);
  report(dir);
  return status;
}
