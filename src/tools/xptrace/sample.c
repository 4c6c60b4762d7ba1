/* xptrace sample: call stacks of any program, sampled. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xpti/xpti_data_types.h>

#include "xpt_collector.h"
#include "options.h"
#include "xptrace_cmds.h"
/* The sampler's settings parsers: the command refuses what the library
 * would ignore. */
#include "sampler_config.h"
#ifdef XPTRACE_HAVE_PERF
#include "sample_perf.h"
#include "sample_timer.h"
#endif

/* The one table of sample's options: the parser's, --help's, avail's and
 * docs/sampler.md's (`xptrace avail --markdown sample`).  The timer
 * method's library reads variables: the options that set one name it. */
enum { OPT_CLOCK = 256, OPT_PERIODS, OPT_DEPTH, OPT_METHOD, OPT_CALL_GRAPH, OPT_NO_DEMANGLE,
       OPT_DURATION, OPT_OFF_CPU };
static const struct xopt sample_opts[] = {
    {"freq", 'f', required_argument, "HZ",
     "samples per second of each thread's clock; timer method: sets XPTRACE_SAMPLE_FREQ",
     "samples per second of each thread's clock (decimal, 0 < f ≤ 100000); without it "
     "`XPTRACE_SAMPLE_FREQ` where set (both methods); the timer method's library gets it as that "
     "variable",
     "`100`"},
    {"method", OPT_METHOD, required_argument, "M",
     "perf (kernel perf_event sampling from outside, CPU time) or timer (signals inside the "
     "program, the sampler library preloaded; also --periods on several clocks)",
     "`perf` ([below](#the-perf-method)) or `timer` ([below](#the-timer-method): "
     "`libxptrace_sampler.so` preloaded, set by the `XPTRACE_SAMPLE_*` variables)",
     "`perf` where the kernel allows it, else `timer` with one line saying why; `timer` for "
     "`--clock realtime` alone or `--periods` on several clocks"},
    {"call-graph", OPT_CALL_GRAPH, required_argument, "M",
     "perf method: dwarf (unwind copies of the stack) or fp (frame pointers)",
     "perf method: `dwarf` (unwind copies of the user stack) or `fp` (the kernel's frame-pointer "
     "walk)",
     "`dwarf`"},
    {"no-demangle", OPT_NO_DEMANGLE, no_argument, NULL,
     "keep C++ names as the symbol tables spell them",
     "keep C++ names as the symbol tables spell them (`_ZN6shapes5churnImEET_l`)", "off"},
    {"clock", OPT_CLOCK, required_argument, "CLOCK",
     "cputime (CPU time), realtime (wall time) or both (realtime: the timer method, unless "
     "--method perf or --off-cpu; timer method: sets XPTRACE_SAMPLE_CLOCK)",
     "`cputime` (each thread's CPU time), `realtime` (wall time) or `both`; wall time alone takes "
     "the timer method, with `--method perf` or `--off-cpu` the perf method's [wall-time "
     "profile](#off-cpu-time-and-wall-time); the timer method's library gets it as "
     "`XPTRACE_SAMPLE_CLOCK`",
     "`cputime`"},
    {"off-cpu", OPT_OFF_CPU, no_argument, NULL,
     "perf method: where threads blocked and for how long, with their stacks (samples_offcpu.*; "
     "root or paranoid <= 1)",
     "perf method: where each thread blocked and for how long, with its stack "
     "([below](#off-cpu-time-and-wall-time))",
     "off"},
    {"periods", OPT_PERIODS, required_argument, "SPEC",
     "sample only inside time windows: space-separated clock:delay:duration:cycles (clock "
     "realtime, cputime or process_cputime; seconds; cycles 0 = forever; timer method: sets "
     "XPTRACE_SAMPLE_PERIODS)",
     "sample only inside time windows (below). The perf method keeps windows on one clock "
     "itself: `realtime` counted from the command's `exec` by the samples' time stamps, "
     "`cputime` and `process_cputime` by the samples themselves (each process's, or its main "
     "thread's, samples so far times the period: its CPU time as sampled, from its own start); "
     "specs on several clocks need the timer method; its library gets them as "
     "`XPTRACE_SAMPLE_PERIODS`",
     "the whole run"},
    {"depth", OPT_DEPTH, required_argument, "N",
     "deepest stack recorded, 1 to 512 frames; timer method: sets XPTRACE_SAMPLE_DEPTH",
     "deepest stack recorded, 1 to 512 frames; deeper stacks keep their innermost frames and the "
     "cut is said; without it `XPTRACE_SAMPLE_DEPTH` where set (both methods); the timer method's "
     "library gets it as that variable",
     "`256`"},
    {"pid", 'p', required_argument, "PID[,PID...]",
     "sample running processes (perf method, per-CPU events: root, CAP_PERFMON or "
     "kernel.perf_event_paranoid <= 0) until they end, Ctrl-C or --duration; --off-cpu and "
     "--clock too",
     "sample running processes instead of a command, until they end, Ctrl-C or `--duration` "
     "([attach](#attaching-to-a-running-process))",
     "off"},
    {"duration", OPT_DURATION, required_argument, "S", "with -p: stop after S seconds",
     "with `-p`: stop after S seconds", "until they end or Ctrl-C"},
    {"output", 'o', required_argument, "DIR", "output folder",
     "output folder (created before the command starts); the timer method's library gets it as "
     "`XPTRACE_OUTPUT`",
     "`./xptrace-<command>-<pid of xptrace>` (with `-p`: the first process's name), a new folder "
     "(`-1`, `-2` ... if the name is taken)"},
    {"verbose", 'v', no_argument, NULL, "print the environment and command before running",
     "print every variable set and the command before running", "off"},
    {"help", 'h', no_argument, NULL, "this help", NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL, NULL},
};

const struct xopt_cmd xopt_sample = {
    "sample",
    "usage: xptrace sample [options] -- command [args...]\n"
    "       xptrace sample [options] -p PID[,PID...]\n"
    "Sample the call stacks of every thread of the command (and of its forked\n"
    "children) and write samples.folded (flamegraph.pl, speedscope) and samples.csv.\n",
    sample_opts,
    "Exit status: the command's; 128+N if it was killed by signal N; 2 for bad usage;\n"
    "127 if the command cannot be found; 126 if it is a folder or not executable.\n"};
static char usage_sample[8192]; /* xopt_usage's, made first thing */

/* ---- sample --------------------------------------------------------------- */


static void sample_after(const void *ctx) {
  const char *dir = ctx;
  fprintf(stderr, "xptrace: output in %s\n", dir);
  print_sample_outputs(dir, false);
}

/* The table's default of option `name` as plain text, in buf. */
static const char *sample_default(const char *name, char *buf, size_t len) {
  xopt_plain(xopt_default(&xopt_sample, name), buf, len);
  return buf;
}

/* The parsers start from the table's -f and --depth, so --help says what
 * they do (the timer method's library, given no variable, has its own). */
static double default_freq(void) {
  char buf[32];
  return strtod(sample_default("freq", buf, sizeof buf), NULL);
}

static unsigned default_depth(void) {
  char buf[32];
  return (unsigned)strtoul(sample_default("depth", buf, sizeof buf), NULL, 10);
}

/* xptrace sample -p PID[,PID...]: the perf method on running processes. */
static int sample_attach_cmd(const char *pids, const char *duration, bool command, const char *freq,
                             const char *method, const char *clock, const char *periods, const char *depth,
                             const char *call_graph, const char *output, bool verbose, bool demangle,
                             bool off_cpu) {
  if (!pids)
    return usage_error(usage_sample, "--duration needs -p");
  if (command)
    return usage_error(usage_sample, "-p samples running processes: no command");
  bool on[SAMPLER_NCLOCKS] = {false};
  if (clock && !sampler_parse_clock(clock, on))
    return usage_error(usage_sample, "unknown clock '%s' (cputime, realtime or both)", clock);
  bool wall = clock && on[SAMPLER_REALTIME]; /* the perf method's: beside the CPU profile */
  if ((method && strcmp(method, "perf") != 0) || periods)
    return usage_error(usage_sample, "-p samples with the perf method (no --periods)");
  pid_t list[64];
  size_t n = 0;
  for (const char *p = pids; *p;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v <= 0 || v > INT32_MAX || (*end && *end != ',') || n == 64)
      return usage_error(usage_sample, "'%s' is not a list of process ids", pids);
    list[n++] = (pid_t)v;
    p = *end ? end + 1 : end;
  }
  double secs = 0, hz = default_freq();
  char *end;
  if (duration && ((secs = strtod(duration, &end)) <= 0 || *end))
    return usage_error(usage_sample, "duration '%s' is not a number of seconds", duration);
  if (freq && !sampler_parse_freq(freq, &hz))
    return usage_error(usage_sample, "frequency '%s' is not a number of Hz (0 < f <= 100000)", freq);
  unsigned frames = default_depth();
  if (depth && !sampler_parse_depth(depth, &frames))
    return usage_error(usage_sample, "depth '%s' is not a number of frames from 1 to 512", depth);
  bool fp = strcmp(call_graph, "fp") == 0;
  if (!fp && strcmp(call_graph, "dwarf") != 0)
    return usage_error(usage_sample, "unknown call graph '%s' (dwarf or fp)", call_graph);
  if (fp && (wall || off_cpu))
    return usage_error(usage_sample, "--off-cpu and --clock realtime need --call-graph dwarf");
#ifdef XPTRACE_HAVE_PERF
  char name[64] = "process", path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", (int)list[0]);
  FILE *f = fopen(path, "re");
  if (f && fgets(name, sizeof name, f))
    name[strcspn(name, "\n")] = '\0';
  if (f)
    fclose(f);
  char dir[PATH_MAX];
  int rc = output_dir_prepare(usage_sample, output, name, dir, sizeof dir);
  if (rc)
    return rc;
  sample_perf_opts_t po = {hz, frames, dir, verbose, fp, demangle, 16384, NULL, 0, NULL, 0, off_cpu, wall};
  char why[256];
  if (!sample_perf_available(&po, why, sizeof why)) {
    fprintf(stderr, "xptrace sample: cannot attach: %s\n", why);
    return 1;
  }
  rc = sample_perf_attach(list, n, secs, &po);
  if (rc == 0)
    sample_after(dir);
  return rc;
#else
  (void)output, (void)verbose, (void)demangle, (void)secs, (void)list, (void)off_cpu;
  fprintf(stderr, "xptrace sample: -p needs the perf method (built without libdw)\n");
  return 1;
#endif
}

int cmd_sample(int argc, char **argv) {
  xopt_usage(&xopt_sample, usage_sample, sizeof usage_sample);
  struct option longopts[32];
  char shorts[32], cg_default[16];
  /* "+": options end at the command, whose own options are its own. */
  xopt_getopt(&xopt_sample, longopts, 32, "+:", shorts, sizeof shorts);
  const char *freq = NULL, *clock = NULL, *periods = NULL, *depth = NULL, *output = NULL;
  const char *method = NULL, *pids = NULL, *duration = NULL;
  const char *call_graph = sample_default("call-graph", cg_default, sizeof cg_default);
  bool verbose = false, demangle = true, off_cpu = false;
  opterr = 0;
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
    switch (opt) {
    case 'f': freq = optarg; break;
    case OPT_CLOCK: clock = optarg; break;
    case OPT_PERIODS: periods = optarg; break;
    case OPT_DEPTH: depth = optarg; break;
    case OPT_METHOD: method = optarg; break;
    case OPT_CALL_GRAPH: call_graph = optarg; break;
    case OPT_NO_DEMANGLE: demangle = false; break;
    case 'o': output = optarg; break;
    case 'p': pids = optarg; break;
    case OPT_DURATION: duration = optarg; break;
    case OPT_OFF_CPU: off_cpu = true; break;
    case 'v': verbose = true; break;
    case 'h': fputs(usage_sample, stdout); return 0;
    case ':': return usage_error(usage_sample, "option '%s' needs a value", argv[optind - 1]);
    default: {
      const char *names[64];
      option_names(longopts, names, 64);
      return unknown_option(usage_sample, names, argv[optind - 1]);
    }
    }
  }
  /* As `run --sample`: the variables set the rate and depth of both
   * methods where no option does (the perf method ignored them, and the
   * timer method's launcher assumed 100 Hz for the library's rate). */
  double env_hz;
  unsigned env_frames;
  const char *env_freq = getenv("XPTRACE_SAMPLE_FREQ"), *env_depth = getenv("XPTRACE_SAMPLE_DEPTH");
  if (!freq && env_freq && sampler_parse_freq(env_freq, &env_hz))
    freq = env_freq;
  if (!depth && env_depth && sampler_parse_depth(env_depth, &env_frames))
    depth = env_depth;
  if (pids || duration)
    return sample_attach_cmd(pids, duration, optind < argc, freq, method, clock, periods, depth, call_graph,
                             output, verbose, demangle, off_cpu);
  if (optind >= argc)
    return usage_error(usage_sample, "missing command");
  if (output && !*output)
    return usage_error(usage_sample, "empty output folder name");
  double hz = default_freq();
  if (freq && !sampler_parse_freq(freq, &hz))
    return usage_error(usage_sample, "frequency '%s' is not a number of Hz (0 < f <= 100000)", freq);
  bool on[SAMPLER_NCLOCKS] = {false};
  if (clock && !sampler_parse_clock(clock, on))
    return usage_error(usage_sample, "unknown clock '%s' (cputime, realtime or both)", clock);
  unsigned frames = default_depth();
  if (depth && !sampler_parse_depth(depth, &frames))
    return usage_error(usage_sample, "depth '%s' is not a number of frames from 1 to 512", depth);
  bool perf = !method || strcmp(method, "perf") == 0;
  if (method && !perf && strcmp(method, "timer") != 0)
    return usage_error(usage_sample, "unknown method '%s' (perf or timer)", method);
  bool wall = clock && !(on[SAMPLER_CPUTIME] && !on[SAMPLER_REALTIME]);
  bool fp = strcmp(call_graph, "fp") == 0;
  if (!fp && strcmp(call_graph, "dwarf") != 0)
    return usage_error(usage_sample, "unknown call graph '%s' (dwarf or fp)", call_graph);
  sampler_period_t specs[SAMPLER_MAX_PERIODS];
  size_t nspecs = 0;
  char bad[64];
  if (periods && !sampler_parse_periods(periods, specs, &nspecs, bad, sizeof bad))
    return usage_error(usage_sample,
                       "period '%s' is not clock:delay:duration:cycles (clock realtime, cputime "
                       "or process_cputime; seconds; duration > 0)",
                       bad[0] ? bad : periods);
  /* The perf method keeps windows on one clock (it drops the samples
   * outside them; CPU time as its samples count it); specs mixing clocks
   * are the timer method's. */
  bool mixed_windows = false;
  for (size_t i = 1; periods && i < nspecs; ++i)
    mixed_windows |= specs[i].clock != specs[0].clock;
  if (off_cpu && !perf)
    return usage_error(usage_sample, "--off-cpu needs the perf method");
  if ((method && perf) || off_cpu) {
    if (mixed_windows)
      return usage_error(usage_sample, "the perf method takes --periods on one clock (not several)");
    if (fp && (wall || off_cpu))
      return usage_error(usage_sample, "--off-cpu and --clock realtime need --call-graph dwarf");
  }
  char sampler[PATH_MAX + 64];
  int rc;
  lib_path("libxptrace_sampler.so", sampler, sizeof sampler);
  if (access(sampler, R_OK) != 0)
    return usage_error(usage_sample, "sampler not installed: %s: %s", sampler, strerror(errno));

  char **command = &argv[optind];
  if ((rc = command_check(command[0])) != 0)
    return rc;
  char dir[PATH_MAX];
  rc = output_dir_prepare(usage_sample, output, command[0], dir, sizeof dir);
  if (rc)
    return rc;
#ifdef XPTRACE_HAVE_PERF
  if (perf && !method && !off_cpu && (wall || mixed_windows)) {
    /* Wall time alone, windows on several clocks: the timer method's. */
    fprintf(stderr, "xptrace sample: %s needs the timer method; using it\n",
            mixed_windows ? "--periods on several clocks" : "--clock realtime");
  } else if (perf) {
    sample_perf_opts_t po = {hz, frames, dir, verbose, fp, demangle, 16384, NULL, 0,
                             periods ? specs : NULL, periods ? nspecs : 0, off_cpu, wall};
    char why[256];
    if (sample_perf_available(&po, why, sizeof why))
      return sample_perf_run(command, &po, sample_after, dir);
    fprintf(stderr, "xptrace sample: %s; using the timer method%s\n", why, off_cpu ? " (no off-CPU profile)" : "");
  }
#else
  if (perf && method)
    fprintf(stderr, "xptrace sample: built without the perf method (libdw); using the timer method\n");
#endif
  set_env(verbose, "XPTRACE_OUTPUT", dir);
  if (freq)
    set_env(verbose, "XPTRACE_SAMPLE_FREQ", freq);
  if (clock)
    set_env(verbose, "XPTRACE_SAMPLE_CLOCK", clock);
  if (depth)
    set_env(verbose, "XPTRACE_SAMPLE_DEPTH", depth);
  if (periods)
    set_env(verbose, "XPTRACE_SAMPLE_PERIODS", periods);
  if ((rc = preload_sampler(usage_sample, verbose)) != 0)
    return rc;
#ifdef XPTRACE_HAVE_PERF
  /* The timer method: the launcher reads the recordings (sample_timer.c). */
  set_env(verbose, "XPTRACE_FINISHER", "launcher");
  char why_static[PATH_MAX + 160];
  if (sample_timer_static(command[0], why_static, sizeof why_static))
    fprintf(stderr, "xptrace sample: %s\n", why_static);
  sample_timer_opts_t to = {.dir = dir, .command = command[0], .hz = freq ? hz : SAMPLER_DEFAULT_FREQ,
                            .depth = depth ? frames : SAMPLER_DEFAULT_DEPTH, .demangle = demangle};
  return launch_and_wait(command, verbose, sample_timer_after, &to);
#else
  return launch_and_wait(command, verbose, sample_after, dir);
#endif
}

