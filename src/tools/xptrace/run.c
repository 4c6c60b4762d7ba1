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
#include <unistd.h>

#include <xpti/xpti_data_types.h>

#include "xpt_collector.h"
#include "xptrace_cmds.h"
#ifdef XPTRACE_HAVE_PERF
#include "sample_timer.h"
#endif

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
#ifdef XPTRACE_HAVE_PERF
  if (r->sample) { /* the timer sampler's recordings (sample_timer.c) */
    sample_timer_opts_t to = {.dir = r->dir, .demangle = true};
    sample_timer_report(&to);
  }
#endif
  if (r->sample)
    print_sample_outputs(r->dir);
}

int cmd_run(int argc, char **argv) {
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

