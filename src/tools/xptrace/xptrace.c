/* xptrace: run a program with XPTI tracing on and the chosen collectors
 * loaded; list what is available.  See docs/xptrace.md. */
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
#include <unistd.h>

#include <xpti/xpti_data_types.h>

#include "xpt_collector.h"
#include "xptrace_cmds.h"
/* The sampler's settings parsers: the command refuses what the library
 * would ignore. */
#include "sampler_config.h"
#ifdef XPTRACE_HAVE_PERF
#include "sample_perf.h"
#endif

#ifndef XPTRACE_VERSION
#define XPTRACE_VERSION "unknown"
#endif
/* Library folder relative to the executable's, when installed
 * (CMAKE_INSTALL_LIBDIR) and in the build tree. */
#ifndef XPTRACE_REL_LIBDIR
#define XPTRACE_REL_LIBDIR "../lib"
#endif
#define XPTRACE_BUILD_REL_LIBDIR "../lib"

enum { EXIT_USAGE = 2, EXIT_CANNOT_RUN = 126, EXIT_NOT_FOUND = 127 };

static const struct {
  const char *name;
  const char *library;
  const char *description;
} collectors[] = {
    {"perfetto", "libxpti_perfetto.so", "trace file for ui.perfetto.dev (Perfetto protobuf or Chrome JSON)"},
    {"stats", "libxpti_stats.so", "count, total, self, mean, min, max, p50/p95/p99 per event name"},
    {"text", "libxpti_text.so", "one line per notification (reference collector)"},
};
enum { NCOLLECTORS = sizeof collectors / sizeof collectors[0] };

/* ---- library location -------------------------------------------------- */

static char lib_dir[PATH_MAX];

/* The folder holding libxptifw.so, found next to the executable. */
static void locate_lib_dir(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(lib_dir, sizeof lib_dir, "%s", XPTRACE_REL_LIBDIR);
    return;
  }
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash)
    *slash = '\0';
  const char *candidates[] = {XPTRACE_REL_LIBDIR, XPTRACE_BUILD_REL_LIBDIR};
  for (size_t i = 0; i < 2; ++i) {
    char dir[PATH_MAX + 32], probe[PATH_MAX + 64], resolved[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", exe, candidates[i]);
    snprintf(probe, sizeof probe, "%s/libxptifw.so", dir);
    if (access(probe, R_OK) == 0 && realpath(dir, resolved)) {
      snprintf(lib_dir, sizeof lib_dir, "%s", resolved);
      return;
    }
  }
  if (snprintf(lib_dir, sizeof lib_dir, "%s/%s", exe, XPTRACE_REL_LIBDIR) >= (int)sizeof lib_dir)
    snprintf(lib_dir, sizeof lib_dir, "%s", XPTRACE_REL_LIBDIR);
}

static void lib_path(const char *library, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", lib_dir, library);
}

static bool lib_exists(const char *library) {
  char path[PATH_MAX + 64];
  lib_path(library, path, sizeof path);
  return access(path, R_OK) == 0;
}

/* ---- usage -------------------------------------------------------------- */

static const char usage_main[] =
    "usage: xptrace run [options] -- command [args...]\n"
    "       xptrace sample [options] -- command [args...]\n"
    "       xptrace finish DIR...\n"
    "       xptrace avail\n"
    "       xptrace --help | --version\n"
    "run: run a program with XPTI tracing on and collectors loaded.\n"
    "sample: profile any program by sampling its call stacks (flame graph input).\n"
    "finish: write the traces of recordings a killed or crashed program left.\n"
    "'xptrace run --help' and 'xptrace sample --help' list the options, 'xptrace avail'\n"
    "the collectors and environment variables.\n";

static const char usage_run[] =
    "usage: xptrace run [options] -- command [args...]\n"
    "  -o, --output DIR         output folder (default: ./xptrace-<command>-<pid>)\n"
    "  -c, --collectors LIST    comma list of perfetto, stats, text (default: perfetto,stats)\n"
    "      --format FORMAT      trace format: perfetto (default) or json\n"
    "      --buffer-size SIZE   trace buffer memory, at least 64K (default 64M)\n"
    "      --buffer-policy P    flush (default: write full buffers) or ring (keep newest)\n"
    "      --streams LIST       record only these streams (comma list; shell patterns)\n"
    "      --opencl             trace OpenCL calls (adds the xptrace layer to OPENCL_LAYERS)\n"
    "      --sample             also sample call stacks (as 'xptrace sample'; settings from\n"
    "                           the XPTRACE_SAMPLE_* variables)\n"
    "  -v, --verbose            print the environment and command before running\n"
    "  -h, --help               this help\n"
    "Exit status: the command's; 128+N if it was killed by signal N; 2 for bad usage;\n"
    "127 if the command cannot be found; 126 if it is a folder or not executable.\n";

static const char usage_sample[] =
    "usage: xptrace sample [options] -- command [args...]\n"
    "Sample the call stacks of every thread of the command (and of its forked\n"
    "children) and write samples.folded (flamegraph.pl, speedscope) and samples.csv.\n"
    "  -f, --freq HZ            samples per second of each thread's clock (default 100)\n"
    "      --method M           timer (signals inside the program, default) or perf\n"
    "                           (kernel perf_event sampling from outside, CPU time only)\n"
    "      --clock CLOCK        cputime (CPU time, default), realtime (wall time) or both\n"
    "      --periods SPEC       sample only inside time windows: space-separated\n"
    "                           clock:delay:duration:cycles (clock realtime, cputime or\n"
    "                           process_cputime; seconds; cycles 0 = forever)\n"
    "      --depth N            deepest stack recorded, 1 to 512 frames (default 64)\n"
    "  -o, --output DIR         output folder (default: ./xptrace-<command>-<pid>)\n"
    "  -v, --verbose            print the environment and command before running\n"
    "  -h, --help               this help\n"
    "Exit status: the command's; 128+N if it was killed by signal N; 2 for bad usage;\n"
    "127 if the command cannot be found; 126 if it is a folder or not executable.\n";

static const char usage_avail[] =
    "usage: xptrace avail\n"
    "List the collectors (and whether their library is found), the environment\n"
    "variables with their defaults, and the trace point and event types.\n";

/* One line naming the problem, then the usage; the program is not run. */
static int usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *usage, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("xptrace: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fputs(usage, stderr);
  return EXIT_USAGE;
}

/* ---- avail --------------------------------------------------------------- */

static int cmd_avail(int argc, char **argv) {
  static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  opterr = 0;
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
    if (opt == 'h') {
      fputs(usage_avail, stdout);
      return 0;
    }
    return usage_error(usage_avail, "unknown option '%s'", argv[optind - 1]);
  }
  if (optind < argc)
    return usage_error(usage_avail, "unexpected argument '%s'", argv[optind]);

  printf("Collectors (libraries in %s):\n", lib_dir);
  for (int i = 0; i < NCOLLECTORS; ++i)
    printf("  %-9s %-66s [%s]\n", collectors[i].name, collectors[i].description,
           lib_exists(collectors[i].library) ? "found" : "not found");
  printf("  dispatcher libxptifw.so [%s]\n", lib_exists("libxptifw.so") ? "found" : "not found");
  printf("  sampler   libxptrace_sampler.so (xptrace sample, run --sample) [%s]\n",
         lib_exists("libxptrace_sampler.so") ? "found" : "not found");

  static const char *const env[][2] = {
      {"XPTI_TRACE_ENABLE", "unset = on when a dispatcher is loaded; 0/false off (run: 1)"},
      {"XPTI_FRAMEWORK_DISPATCHER", "unset: tracing off (run: <lib>/libxptifw.so)"},
      {"XPTI_SUBSCRIBERS", "unset: none (run: the collectors' libraries, comma list)"},
      {"XPTI_TEXT_OUTPUT", "stderr (run -c text: <output>/text.log)"},
      {"XPTRACE_OUTPUT", "./xptrace-<program>-<pid> (run: -o or ./xptrace-<command>-<pid>)"},
      {"XPTRACE_TRACE_FORMAT", "perfetto (or json)"},
      {"XPTRACE_BUFFER_SIZE", "64M"},
      {"XPTRACE_BUFFER_POLICY", "flush (or ring)"},
      {"XPTRACE_STREAMS", "unset: every stream"},
      {"XPTRACE_CLOCK", "auto: the TSC when invariant, else clock_gettime (or monotonic)"},
      {"XPTRACE_ANNOTATE", "minimal: trace point properties on its first slice (or all)"},
      {"OPENCL_LAYERS", "unset (run --opencl: appends <lib>/libxptrace_opencl.so)"},
      {"XPTRACE_SAMPLE_FREQ", "100 (Hz, both sampling clocks; sample -f)"},
      {"XPTRACE_SAMPLE_CLOCK", "cputime (or realtime, both; sample --clock)"},
      {"XPTRACE_SAMPLE_CPUTIME_FREQ", "XPTRACE_SAMPLE_FREQ (Hz of the CPU-time sampler)"},
      {"XPTRACE_SAMPLE_REALTIME_FREQ", "XPTRACE_SAMPLE_FREQ (Hz of the real-time sampler)"},
      {"XPTRACE_SAMPLE_DEPTH", "64 (frames, 1-512; sample --depth)"},
      {"XPTRACE_SAMPLE_PERIODS", "unset: the whole run (clock:delay:duration:cycles ...)"},
  };
  printf("\nEnvironment (default):\n");
  for (size_t i = 0; i < sizeof env / sizeof env[0]; ++i)
    printf("  %-28s %s\n", env[i][0], env[i][1]);

  printf("\nTrace point types (value):\n");
  static const uint16_t types[] = {
      XPTI_TRACE_GRAPH_CREATE, XPTI_TRACE_NODE_CREATE, XPTI_TRACE_EDGE_CREATE,
      XPTI_TRACE_REGION_BEGIN, XPTI_TRACE_REGION_END, XPTI_TRACE_TASK_BEGIN,
      XPTI_TRACE_TASK_END, XPTI_TRACE_BARRIER_BEGIN, XPTI_TRACE_BARRIER_END,
      XPTI_TRACE_LOCK_BEGIN, XPTI_TRACE_LOCK_END, XPTI_TRACE_SIGNAL,
      XPTI_TRACE_TRANSFER_BEGIN, XPTI_TRACE_TRANSFER_END, XPTI_TRACE_THREAD_BEGIN,
      XPTI_TRACE_THREAD_END, XPTI_TRACE_WAIT_BEGIN, XPTI_TRACE_WAIT_END,
      XPTI_TRACE_FUNCTION_BEGIN, XPTI_TRACE_FUNCTION_END, XPTI_TRACE_METADATA,
      XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN, XPTI_TRACE_FUNCTION_WITH_ARGS_END,
      XPTI_TRACE_MEM_ALLOC_BEGIN, XPTI_TRACE_MEM_ALLOC_END, XPTI_TRACE_MEM_RELEASE_BEGIN,
      XPTI_TRACE_MEM_RELEASE_END, XPTI_TRACE_DIAGNOSTICS, XPTI_TRACE_USER_DEFINED,
  };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
    char name[64];
    printf("  %-26s %u\n", xpt_trace_type_name(types[i], name, sizeof name), (unsigned)types[i]);
  }
  printf("  (user-defined: (tool_id << 8) | 0x80 | n; shown as <tool>:<n>_begin/_end)\n");

  static const struct {
    const char *name;
    unsigned value;
  } events[] = {
      {"unknown", XPTI_EVENT_UNKNOWN},       {"graph", XPTI_EVENT_GRAPH},
      {"algorithm", XPTI_EVENT_ALGORITHM},   {"barrier", XPTI_EVENT_BARRIER},
      {"scheduler", XPTI_EVENT_SCHEDULER},   {"async", XPTI_EVENT_ASYNC},
      {"lock", XPTI_EVENT_LOCK},             {"offload_read", XPTI_EVENT_OFFLOAD_READ},
      {"offload_write", XPTI_EVENT_OFFLOAD_WRITE},
      {"offload_memory_object", XPTI_EVENT_OFFLOAD_MEMORY_OBJECT},
      {"offload_accessor", XPTI_EVENT_OFFLOAD_ACCESSOR},
      {"user_defined", XPTI_EVENT_USER_DEFINED},
  };
  printf("\nEvent types (value):\n");
  for (size_t i = 0; i < sizeof events / sizeof events[0]; ++i)
    printf("  %-26s %u\n", events[i].name, events[i].value);
  return 0;
}

/* ---- run ----------------------------------------------------------------- */

typedef struct run_options {
  const char *output;
  const char *collectors;
  const char *format;
  const char *buffer_size;
  const char *buffer_policy;
  const char *streams;
  bool opencl;
  bool verbose;
} run_options_t;

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
      if (strcmp(tok, collectors[i].name) == 0)
        found = i;
    if (found < 0)
      return usage_error(usage_run, "unknown collector '%s' (known: perfetto, stats, text)", tok);
    if (chosen[found])
      continue;
    char path[PATH_MAX + 64];
    lib_path(collectors[found].library, path, sizeof path);
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

/* Whether `cmd` can be executed, searching PATH as execvp does.  Returns 0,
 * or the shell's exit status (127 not found, 126 not executable) after
 * the shell's one-line message; nothing is created before this. */
static int command_check(const char *cmd) {
  struct stat st;
  if (strchr(cmd, '/')) {
    if (stat(cmd, &st) != 0) {
      fprintf(stderr, "xptrace: %s: %s\n", cmd, strerror(errno));
      return errno == ENOENT || errno == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
    }
    if (S_ISDIR(st.st_mode)) {
      fprintf(stderr, "xptrace: %s: %s\n", cmd, strerror(EISDIR));
      return EXIT_CANNOT_RUN;
    }
    if (access(cmd, X_OK) != 0) {
      fprintf(stderr, "xptrace: %s: %s\n", cmd, strerror(errno));
      return EXIT_CANNOT_RUN;
    }
    return 0;
  }
  const char *path = getenv("PATH");
  if (!path)
    path = "/bin:/usr/bin";
  bool denied = false;
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    char full[PATH_MAX];
    if (snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? path : ".", cmd) < (int)sizeof full &&
        stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(full, X_OK) == 0)
        return 0;
      denied = true;
    }
    if (!end)
      break;
    path = end + 1;
  }
  if (denied) {
    fprintf(stderr, "xptrace: %s: %s\n", cmd, strerror(EACCES));
    return EXIT_CANNOT_RUN;
  }
  fprintf(stderr, "xptrace: %s: command not found\n", cmd);
  return EXIT_NOT_FOUND;
}

static const char *signal_name(int sig) {
  static char buf[16];
  const char *abbrev = sigabbrev_np(sig);
  if (!abbrev)
    return "unknown";
  snprintf(buf, sizeof buf, "SIG%s", abbrev);
  return buf;
}

static volatile sig_atomic_t child_pid;

/* A SIGTERM/SIGHUP sent to xptrace goes to the command, which then ends
 * as it would have; xptrace reports that. */
static void forward_signal(int sig) {
  if (child_pid > 0)
    kill((pid_t)child_pid, sig);
}

static void set_env(bool verbose, const char *name, const char *value) {
  setenv(name, value, 1);
  if (verbose)
    fprintf(stderr, "xptrace: %s=%s\n", name, value);
}

static void print_outputs(const char *dir, const bool chosen[], const char *format) {
  (void)format;
  fprintf(stderr, "xptrace: output in %s\n", dir);
  char path[PATH_MAX + 64];
  if (chosen[0]) {
    /* The program's recordings (its forked and exec'd children's too)
     * become traces here, however the program ended. */
    int traces = 0;
    xptrace_finish_dir(dir, &traces);
    if (traces == 0)
      fprintf(stderr, "xptrace: no trace written (no recording in %s)\n", dir);
  }
  if (chosen[1]) {
    snprintf(path, sizeof path, "%s/stats.csv", dir);
    if (access(path, R_OK) == 0)
      fprintf(stderr, "xptrace: statistics %s/stats.csv, %s/stats.json\n", dir, dir);
    else
      fprintf(stderr, "xptrace: no statistics (written at the program's exit%s)\n",
              chosen[0] ? "; the trace has the events" : "");
  }
}

/* ---- launching (run and sample) --------------------------------------- */

/* The output folder, absolute, created before the program starts so that
 * its name can be printed and a bad one refused.  -o: an existing folder
 * must be ours and not writable by others; the default name is always a
 * new folder ("-1", "-2" ... when taken: the pid is easy to guess). */
static int output_dir_prepare(const char *usage, const char *output, const char *command0,
                              char *dir, size_t len) {
  if (output && !*output)
    return usage_error(usage, "empty output folder name");
  if (output) {
    snprintf(dir, len, "%s", output);
  } else {
    const char *base = strrchr(command0, '/');
    snprintf(dir, len, "xptrace-%s-%d", base ? base + 1 : command0, (int)getpid());
  }
  if (dir[0] != '/') {
    char cwd[PATH_MAX], joined[2 * PATH_MAX + 1];
    if (!getcwd(cwd, sizeof cwd))
      return usage_error(usage, "cannot read the current folder: %s", strerror(errno));
    snprintf(joined, sizeof joined, "%s/%s", cwd, dir);
    if (snprintf(dir, len, "%s", joined) >= (int)len)
      return usage_error(usage, "output directory name too long");
  }
  char why[2 * PATH_MAX];
  int err = output ? xpt_dir_prepare(dir, why, sizeof why)
                   : xpt_dir_create_new(dir, len, why, sizeof why);
  if (err)
    return usage_error(usage, "%s", why);
  return 0;
}

/* LD_PRELOAD gets the sampler first, before what the user preloads. */
static int preload_sampler(const char *usage, bool verbose) {
  char sampler[PATH_MAX + 64];
  lib_path("libxptrace_sampler.so", sampler, sizeof sampler);
  if (access(sampler, R_OK) != 0)
    return usage_error(usage, "sampler not installed: %s: %s", sampler, strerror(errno));
  const char *preload = getenv("LD_PRELOAD");
  if (preload && *preload) {
    size_t n = strlen(preload) + strlen(sampler) + 2;
    char *joined = malloc(n);
    if (!joined)
      return 1;
    snprintf(joined, n, "%s:%s", sampler, preload);
    set_env(verbose, "LD_PRELOAD", joined);
    free(joined);
  } else {
    set_env(verbose, "LD_PRELOAD", sampler);
  }
  /* A sampled xptrace's own root marker is not the command's. */
  unsetenv("XPTRACE_SAMPLE_ROOT_PID");
  return 0;
}

static void print_sample_outputs(const char *dir) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/samples.folded", dir);
  if (access(path, R_OK) == 0)
    fprintf(stderr, "xptrace: samples %s (flamegraph.pl, speedscope), %s/samples.csv\n", path, dir);
  else
    fprintf(stderr, "xptrace: no samples written (%s missing)\n", path);
}

/* Run the command with the environment set up, wait for it; returns its
 * exit status (128+N when killed by signal N).  `after` prints what it
 * left, before the status is reported. */
static int launch_and_wait(char **command, bool verbose, void (*after)(const void *), const void *ctx) {
  if (verbose) {
    fputs("xptrace: running", stderr);
    for (char **a = command; *a; ++a)
      fprintf(stderr, " %s", *a);
    fputc('\n', stderr);
  }

  /* Ctrl-C reaches the command from the terminal; xptrace waits for it
   * to finish its output instead of dying first. */
  struct sigaction ignore = {.sa_handler = SIG_IGN}, forward = {.sa_handler = forward_signal};
  struct sigaction old_int, old_quit;
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "xptrace: cannot start %s: %s\n", command[0], strerror(errno));
    return 1;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    execvp(command[0], command);
    fprintf(stderr, "xptrace: cannot run %s: %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? EXIT_NOT_FOUND : 126);
  }
  child_pid = pid;
  sigaction(SIGTERM, &forward, NULL);
  sigaction(SIGHUP, &forward, NULL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "xptrace: lost %s: %s\n", command[0], strerror(errno));
      return 1;
    }
  }
  if (after)
    after(ctx);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fprintf(stderr, "xptrace: %s killed by signal %d (%s)\n", command[0], sig, signal_name(sig));
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ---- run ----------------------------------------------------------------- */

typedef struct run_outputs {
  const char *dir;
  const bool *chosen;
  const char *format;
  bool sample;
} run_outputs_t;

static void run_after(const void *ctx) {
  const run_outputs_t *r = ctx;
  print_outputs(r->dir, r->chosen, r->format);
  if (r->sample)
    print_sample_outputs(r->dir);
}

static int cmd_run(int argc, char **argv) {
  enum { OPT_FORMAT = 256, OPT_BUFFER_SIZE, OPT_BUFFER_POLICY, OPT_STREAMS, OPT_OPENCL, OPT_SAMPLE };
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      {"collectors", required_argument, NULL, 'c'},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"buffer-size", required_argument, NULL, OPT_BUFFER_SIZE},
      {"buffer-policy", required_argument, NULL, OPT_BUFFER_POLICY},
      {"streams", required_argument, NULL, OPT_STREAMS},
      {"opencl", no_argument, NULL, OPT_OPENCL},
      {"sample", no_argument, NULL, OPT_SAMPLE},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  run_options_t o = {.collectors = "perfetto,stats"};
  bool sample = false;
  opterr = 0;
  optind = 1;
  int opt;
  /* "+": options end at the command, whose own options are its own. */
  while ((opt = getopt_long(argc, argv, "+:o:c:vh", longopts, NULL)) != -1) {
    switch (opt) {
    case 'o': o.output = optarg; break;
    case 'c': o.collectors = optarg; break;
    case OPT_FORMAT: o.format = optarg; break;
    case OPT_BUFFER_SIZE: o.buffer_size = optarg; break;
    case OPT_BUFFER_POLICY: o.buffer_policy = optarg; break;
    case OPT_STREAMS: o.streams = optarg; break;
    case OPT_OPENCL: o.opencl = true; break;
    case OPT_SAMPLE: sample = true; break;
    case 'v': o.verbose = true; break;
    case 'h': fputs(usage_run, stdout); return 0;
    case ':': return usage_error(usage_run, "option '%s' needs a value", argv[optind - 1]);
    default: return usage_error(usage_run, "unknown option '%s'", argv[optind - 1]);
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
  if (o.buffer_policy && strcmp(o.buffer_policy, "flush") != 0 &&
      strcmp(o.buffer_policy, "ring") != 0)
    return usage_error(usage_run, "unknown buffer policy '%s' (flush or ring)", o.buffer_policy);
  if (o.streams && o.streams[strspn(o.streams, ", \t")] == '\0')
    return usage_error(usage_run, "stream list '%s' names no stream", o.streams);
  if (o.output && !*o.output)
    return usage_error(usage_run, "empty output folder name");
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
  char sampler[PATH_MAX + 64];
  lib_path("libxptrace_sampler.so", sampler, sizeof sampler);
  if (sample && access(sampler, R_OK) != 0)
    return usage_error(usage_run, "sampler not installed: %s: %s", sampler, strerror(errno));

  char **command = &argv[optind];
  if ((rc = command_check(command[0])) != 0)
    return rc;

  char dir[PATH_MAX];
  rc = output_dir_prepare(usage_run, o.output, command[0], dir, sizeof dir);
  if (rc)
    return rc;

  set_env(o.verbose, "XPTI_TRACE_ENABLE", "1");
  set_env(o.verbose, "XPTI_FRAMEWORK_DISPATCHER", dispatcher);
  set_env(o.verbose, "XPTI_SUBSCRIBERS", subscribers);
  set_env(o.verbose, "XPTRACE_OUTPUT", dir);
  set_env(o.verbose, "XPTRACE_FINISHER", "launcher"); /* the recordings are ours to finish */
  if (o.format)
    set_env(o.verbose, "XPTRACE_TRACE_FORMAT", o.format);
  if (o.buffer_size)
    set_env(o.verbose, "XPTRACE_BUFFER_SIZE", o.buffer_size);
  if (o.buffer_policy)
    set_env(o.verbose, "XPTRACE_BUFFER_POLICY", o.buffer_policy);
  if (o.streams)
    set_env(o.verbose, "XPTRACE_STREAMS", o.streams);
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
  if (sample && (rc = preload_sampler(usage_run, o.verbose)) != 0)
    return rc;
  run_outputs_t outputs = {dir, chosen, o.format, sample};
  return launch_and_wait(command, o.verbose, run_after, &outputs);
}

/* ---- sample --------------------------------------------------------------- */

static void sample_after(const void *ctx) {
  const char *dir = ctx;
  fprintf(stderr, "xptrace: output in %s\n", dir);
  print_sample_outputs(dir);
}

static int cmd_sample(int argc, char **argv) {
  enum { OPT_CLOCK = 256, OPT_PERIODS, OPT_DEPTH, OPT_METHOD };
  static const struct option longopts[] = {
      {"freq", required_argument, NULL, 'f'},
      {"method", required_argument, NULL, OPT_METHOD},
      {"clock", required_argument, NULL, OPT_CLOCK},
      {"periods", required_argument, NULL, OPT_PERIODS},
      {"depth", required_argument, NULL, OPT_DEPTH},
      {"output", required_argument, NULL, 'o'},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *freq = NULL, *clock = NULL, *periods = NULL, *depth = NULL, *output = NULL;
  const char *method = "timer";
  bool verbose = false;
  opterr = 0;
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, "+:f:o:vh", longopts, NULL)) != -1) {
    switch (opt) {
    case 'f': freq = optarg; break;
    case OPT_CLOCK: clock = optarg; break;
    case OPT_PERIODS: periods = optarg; break;
    case OPT_DEPTH: depth = optarg; break;
    case OPT_METHOD: method = optarg; break;
    case 'o': output = optarg; break;
    case 'v': verbose = true; break;
    case 'h': fputs(usage_sample, stdout); return 0;
    case ':': return usage_error(usage_sample, "option '%s' needs a value", argv[optind - 1]);
    default: return usage_error(usage_sample, "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind >= argc)
    return usage_error(usage_sample, "missing command");
  if (output && !*output)
    return usage_error(usage_sample, "empty output folder name");
  double hz = 100;
  if (freq && !sampler_parse_freq(freq, &hz))
    return usage_error(usage_sample, "frequency '%s' is not a number of Hz (0 < f <= 100000)", freq);
  bool on[SAMPLER_NCLOCKS] = {false};
  if (clock && !sampler_parse_clock(clock, on))
    return usage_error(usage_sample, "unknown clock '%s' (cputime, realtime or both)", clock);
  unsigned frames = 64;
  if (depth && !sampler_parse_depth(depth, &frames))
    return usage_error(usage_sample, "depth '%s' is not a number of frames from 1 to 512", depth);
  bool perf = strcmp(method, "perf") == 0;
  if (!perf && strcmp(method, "timer") != 0)
    return usage_error(usage_sample, "unknown method '%s' (perf or timer)", method);
  if (perf && ((clock && !(on[SAMPLER_CPUTIME] && !on[SAMPLER_REALTIME])) || periods))
    return usage_error(usage_sample, "--method perf samples CPU time only, without --periods");
  sampler_period_t specs[SAMPLER_MAX_PERIODS];
  size_t nspecs;
  char bad[64];
  if (periods && !sampler_parse_periods(periods, specs, &nspecs, bad, sizeof bad))
    return usage_error(usage_sample,
                       "period '%s' is not clock:delay:duration:cycles (clock realtime, cputime "
                       "or process_cputime; seconds; duration > 0)",
                       bad[0] ? bad : periods);
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
  if (perf) {
    sample_perf_opts_t po = {freq ? hz : 100, depth ? frames : 64, dir, verbose};
    char why[256];
    if (sample_perf_available(&po, why, sizeof why))
      return sample_perf_run(command, &po, sample_after, dir);
    fprintf(stderr, "xptrace sample: %s; using the timer method\n", why);
  }
#else
  if (perf)
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
  return launch_and_wait(command, verbose, sample_after, dir);
}

int main(int argc, char **argv) {
  locate_lib_dir();
  if (argc < 2)
    return usage_error(usage_main, "missing subcommand");
  const char *sub = argv[1];
  if (strcmp(sub, "run") == 0)
    return cmd_run(argc - 1, argv + 1);
  if (strcmp(sub, "sample") == 0)
    return cmd_sample(argc - 1, argv + 1);
  if (strcmp(sub, "finish") == 0)
    return cmd_finish(argc - 1, argv + 1);
  if (strcmp(sub, "avail") == 0)
    return cmd_avail(argc - 1, argv + 1);
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
    fputs(usage_main, stdout);
    return 0;
  }
  if (strcmp(sub, "--version") == 0 || strcmp(sub, "-V") == 0) {
    printf("xptrace %s (XPTI %s)\n", XPTRACE_VERSION, XPTI_VERSION_STRING);
    return 0;
  }
  if (sub[0] == '-')
    return usage_error(usage_main, "unknown option '%s'", sub);
  return usage_error(usage_main, "unknown subcommand '%s'", sub);
}
