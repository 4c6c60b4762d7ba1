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

#ifndef XPTRACE_VERSION
#define XPTRACE_VERSION "unknown"
#endif
/* Library folder relative to the executable's, when installed
 * (CMAKE_INSTALL_LIBDIR) and in the build tree. */
#ifndef XPTRACE_REL_LIBDIR
#define XPTRACE_REL_LIBDIR "../lib"
#endif
#define XPTRACE_BUILD_REL_LIBDIR "../lib"

enum { EXIT_USAGE = 2, EXIT_NOT_FOUND = 127 };

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
    "       xptrace avail\n"
    "       xptrace --help | --version\n"
    "Run a program with XPTI tracing on and collectors loaded; 'xptrace run --help'\n"
    "lists the options, 'xptrace avail' the collectors and environment variables.\n";

static const char usage_run[] =
    "usage: xptrace run [options] -- command [args...]\n"
    "  -o, --output DIR         output folder (default: ./xptrace-<command>-<pid>)\n"
    "  -c, --collectors LIST    comma list of perfetto, stats, text (default: perfetto,stats)\n"
    "      --format FORMAT      trace format: perfetto (default) or json\n"
    "      --buffer-size SIZE   trace buffer memory, e.g. 64M (default 64M)\n"
    "      --buffer-policy P    flush (default: write full buffers) or ring (keep newest)\n"
    "      --streams LIST       record only these streams (comma list; shell patterns)\n"
    "      --opencl             trace OpenCL calls (adds the xptrace layer to OPENCL_LAYERS)\n"
    "  -v, --verbose            print the environment and command before running\n"
    "  -h, --help               this help\n"
    "Exit status: the command's; 128+N if it was killed by signal N; 2 for bad usage;\n"
    "127 if the command cannot be found.\n";

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
      {"OPENCL_LAYERS", "unset (run --opencl: appends <lib>/libxptrace_opencl.so)"},
  };
  printf("\nEnvironment (default):\n");
  for (size_t i = 0; i < sizeof env / sizeof env[0]; ++i)
    printf("  %-26s %s\n", env[i][0], env[i][1]);

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

/* Whether `cmd` can be executed, searching PATH as execvp does. */
static bool command_found(const char *cmd) {
  if (strchr(cmd, '/'))
    return access(cmd, X_OK) == 0;
  const char *path = getenv("PATH");
  if (!path)
    path = "/bin:/usr/bin";
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    char full[PATH_MAX];
    if (snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? path : ".", cmd) < (int)sizeof full) {
      struct stat st;
      if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0)
        return true;
    }
    if (!end)
      break;
    path = end + 1;
  }
  return false;
}

static int make_dirs(const char *dir) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
    return ENAMETOOLONG;
  for (char *p = path + 1; *p; ++p) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
      return errno;
    *p = '/';
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST)
    return errno;
  struct stat st;
  if (stat(path, &st) != 0)
    return errno;
  if (!S_ISDIR(st.st_mode))
    return ENOTDIR;
  if (access(path, W_OK | X_OK) != 0)
    return errno;
  return 0;
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
  fprintf(stderr, "xptrace: output in %s\n", dir);
  char path[PATH_MAX + 64];
  if (chosen[0]) {
    bool json = format && strcmp(format, "json") == 0;
    snprintf(path, sizeof path, "%s/%s", dir, json ? "trace.json" : "trace.perfetto-trace");
    if (access(path, R_OK) == 0)
      fprintf(stderr, "xptrace: trace %s (open in https://ui.perfetto.dev)\n", path);
    else
      fprintf(stderr, "xptrace: no trace written (%s missing)\n", path);
  }
  if (chosen[1]) {
    snprintf(path, sizeof path, "%s/stats.csv", dir);
    if (access(path, R_OK) == 0)
      fprintf(stderr, "xptrace: statistics %s/stats.csv, %s/stats.json\n", dir, dir);
  }
}

static int cmd_run(int argc, char **argv) {
  enum { OPT_FORMAT = 256, OPT_BUFFER_SIZE, OPT_BUFFER_POLICY, OPT_STREAMS, OPT_OPENCL };
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      {"collectors", required_argument, NULL, 'c'},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"buffer-size", required_argument, NULL, OPT_BUFFER_SIZE},
      {"buffer-policy", required_argument, NULL, OPT_BUFFER_POLICY},
      {"streams", required_argument, NULL, OPT_STREAMS},
      {"opencl", no_argument, NULL, OPT_OPENCL},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  run_options_t o = {.collectors = "perfetto,stats"};
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
  if (o.buffer_size && (!xpt_parse_size(o.buffer_size, &size) || size == 0))
    return usage_error(usage_run, "buffer size '%s' is not a size (e.g. 4096, 64K, 64M, 1G)",
                       o.buffer_size);
  if (o.buffer_policy && strcmp(o.buffer_policy, "flush") != 0 &&
      strcmp(o.buffer_policy, "ring") != 0)
    return usage_error(usage_run, "unknown buffer policy '%s' (flush or ring)", o.buffer_policy);
  if (o.streams && !*o.streams)
    return usage_error(usage_run, "empty stream list");
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

  char **command = &argv[optind];
  if (!command_found(command[0])) {
    fprintf(stderr, "xptrace: command not found: %s\n", command[0]);
    return EXIT_NOT_FOUND;
  }

  /* The output folder exists before the program starts, so that its
   * name can be printed and a bad one refused. */
  char dir[PATH_MAX];
  if (o.output) {
    snprintf(dir, sizeof dir, "%s", o.output);
  } else {
    const char *base = strrchr(command[0], '/');
    snprintf(dir, sizeof dir, "xptrace-%s-%d", base ? base + 1 : command[0], (int)getpid());
  }
  if (dir[0] != '/') {
    char cwd[PATH_MAX], joined[2 * PATH_MAX + 1];
    if (!getcwd(cwd, sizeof cwd))
      return usage_error(usage_run, "cannot read the current folder: %s", strerror(errno));
    snprintf(joined, sizeof joined, "%s/%s", cwd, dir);
    if (snprintf(dir, sizeof dir, "%s", joined) >= (int)sizeof dir)
      return usage_error(usage_run, "output directory name too long");
  }
  int err = make_dirs(dir);
  if (err)
    return usage_error(usage_run, "cannot create output directory '%s': %s", dir, strerror(err));

  set_env(o.verbose, "XPTI_TRACE_ENABLE", "1");
  set_env(o.verbose, "XPTI_FRAMEWORK_DISPATCHER", dispatcher);
  set_env(o.verbose, "XPTI_SUBSCRIBERS", subscribers);
  set_env(o.verbose, "XPTRACE_OUTPUT", dir);
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
  if (o.verbose) {
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
  print_outputs(dir, chosen, o.format);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fprintf(stderr, "xptrace: %s killed by signal %d (%s)\n", command[0], sig, signal_name(sig));
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv) {
  locate_lib_dir();
  if (argc < 2)
    return usage_error(usage_main, "missing subcommand");
  const char *sub = argv[1];
  if (strcmp(sub, "run") == 0)
    return cmd_run(argc - 1, argv + 1);
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
