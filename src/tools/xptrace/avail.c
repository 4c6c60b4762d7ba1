/* xptrace avail: what this installation offers. */
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
#include "counters.h"
#include "options.h"
#include "xptrace_cmds.h"

static const char usage_avail[] =
    "usage: xptrace avail [--markdown [env|run|sample|causal|report|merge]]\n"
    "List the collectors (and whether their library is found), the options' and the\n"
    "environment variables' defaults, and the trace point and event types.\n"
    "  --markdown [TABLE]  one table as Markdown: the environment variables (env, the\n"
    "                      default) or a subcommand's options (the tables of docs/\n"
    "                      xptrace.md, sampler.md, causal.md, report.md, merge.md)\n";

/* The subcommands whose options are a table (options.h). */
static const struct xopt_cmd *const option_tables[] = {&xopt_run, &xopt_sample, &xopt_causal,
                                                       &xopt_report, &xopt_merge};

/* The one list of the variables and their defaults: `avail` prints it,
 * and docs/xptrace.md's table is its --markdown output (tests/xptrace
 * test_docs.sh diffs them), so the two cannot disagree. */
static const char *const env[][2] = {
    {"XPTI_TRACE_ENABLE", "unset = on when a dispatcher is loaded; 0/false off (run, causal --progress: "
                          "1)"},
    {"XPTI_FRAMEWORK_DISPATCHER", "unset: tracing off (run, causal --progress: <lib>/libxptifw.so)"},
    {"XPTI_SUBSCRIBERS", "unset: none (run: the collectors' libraries, comma list; causal --progress: "
                         "<lib>/libxptrace_causal.so)"},
    {"XPTI_TEXT_OUTPUT", "stderr (run -c text: <output>/text.log)"},
    {"XPTRACE_OUTPUT", "./xptrace-<program>-<pid> (run, causal, sample's timer method: -o, else "
                       "./xptrace-<command>-<pid>)"},
    {"XPTRACE_TRACE_FORMAT", "perfetto (or json)"},
    {"XPTRACE_BUFFER_SIZE", "64M (below 64K or not a size: one message, then 64M)"},
    {"XPTRACE_MAX_SIZE", "none (run --max-size)"},
    {"XPTRACE_BUFFER_POLICY", "flush (or ring)"},
    {"XPTRACE_PERIODS", "unset: the whole run (time windows of every collector; run --periods)"},
    {"XPTRACE_STREAMS", "unset: every stream (naming none, e.g. ',': one message, then every "
                        "stream)"},
    {"XPTRACE_CLOCK", "auto: the TSC when invariant, else clock_gettime (or monotonic)"},
    {"XPTRACE_ANNOTATE", "minimal: trace point properties on its first slice (or all)"},
    {"XPTRACE_PROGRESS_AFTER", "1: finish, merge, report show a progress line on a terminal "
                               "after 1 s (0: at once)"},
    {"OPENCL_LAYERS", "unset (run --opencl: appends <lib>/libxptrace_opencl.so)"},
    {"ZE_ENABLE_TRACING_LAYER", "unset (run --level-zero: 1, with <lib>/level_zero first in "
                                "LD_LIBRARY_PATH)"},
    {"XPTRACE_SAMPLE_FREQ", "100 (Hz, both sampling clocks; sample -f)"},
    {"XPTRACE_SAMPLE_CLOCK", "cputime (or realtime, both; sample --clock)"},
    {"XPTRACE_SAMPLE_CPUTIME_FREQ", "XPTRACE_SAMPLE_FREQ (Hz of the CPU-time sampler)"},
    {"XPTRACE_SAMPLE_REALTIME_FREQ", "XPTRACE_SAMPLE_FREQ (Hz of the real-time sampler)"},
    {"XPTRACE_SAMPLE_DEPTH", "256 (frames, 1-512; sample --depth)"},
    {"XPTRACE_SAMPLE_PERIODS", "unset: the whole run (clock:delay:duration:cycles ...; sample --periods, "
                               "run --periods)"},
    {"XPTRACE_SAMPLE_BUFFER_SIZE", "256M (timer method: a process's recording, reserved as used)"},
    {"XPTRACE_FUNCTIONS", "unset: off (run --functions [REGEX]: all, or the matching names; causal "
                          "--progress-function NAME: NAME alone)"},
    {"XPTRACE_FUNCTIONS_EXCLUDE", "unset (run --exclude REGEX)"},
    {"XPTRACE_FUNCTIONS_DEPTH", "unlimited (run --depth N)"},
    {"XPTRACE_FUNCTIONS_MIN_DURATION", "0 (run --min-duration D: 10us, 1ms)"},
    {"XPTRACE_CAUSAL_LINE", "unset: lines sampled (causal --line FILE:N)"},
    {"XPTRACE_CAUSAL_SPEEDUP", "unset: 0-100 in steps of 5 (causal --speedup)"},
    {"XPTRACE_CAUSAL_SOURCE_SCOPE", "sources not under /usr/ (causal --source-scope)"},
    {"XPTRACE_CAUSAL_BINARY_SCOPE", "the executable (causal --binary-scope)"},
    {"XPTRACE_CAUSAL_WINDOW_MS", "500 (causal --window)"},
    {"XPTRACE_CAUSAL_EXPERIMENTS", "unlimited (causal --experiments)"},
    {"XPTRACE_CAUSAL_DURATION", "unlimited (causal --duration)"},
    {"XPTRACE_CAUSAL_PERIOD_US", "1000 (causal --period)"},
    {"XPTRACE_CAUSAL_PROGRESS", "unset (comma list: causal --progress STREAM:TYPE[:NAME], causal "
                                "--progress-function NAME)"},
    {"XPTRACE_CAUSAL_CPU_ONLY", "unset: delays by runnable time (1: by CPU period, as Coz)"},
    {"XPTRACE_CAUSAL_SAMPLER", "perf: task-clock events (timer: CPU-time timers, also where perf "
                               "events are refused)"},
};

/* A Markdown cell: '|', '<' (an HTML tag) and '*' escaped. */
static void md_cell(const char *s) {
  for (; *s; s++) {
    if (*s == '|' || *s == '<' || *s == '*')
      putchar('\\');
    putchar(*s);
  }
}

static void env_markdown(void) {
  printf("| variable | default |\n| --- | --- |\n");
  for (size_t i = 0; i < sizeof env / sizeof env[0]; ++i) {
    printf("| `%s` | ", env[i][0]);
    md_cell(env[i][1]);
    printf(" |\n");
  }
}


/* ---- avail --------------------------------------------------------------- */

int cmd_avail(int argc, char **argv) {
  static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
                                           {"markdown", no_argument, NULL, 'm'},
                                           {NULL, 0, NULL, 0}};
  bool markdown = false;
  const char *table = "env";
  opterr = 0;
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
    if (opt == 'h') {
      fputs(usage_avail, stdout);
      return 0;
    }
    if (opt == 'm') {
      markdown = true;
      continue;
    }
    {
      const char *names[64];
      option_names(longopts, names, 64);
      return unknown_option(usage_avail, names, argv[optind - 1]);
    }
  }
  if (markdown && optind < argc)
    table = argv[optind++];
  if (optind < argc)
    return usage_error(usage_avail, "unexpected argument '%s'", argv[optind]);
  if (markdown && strcmp(table, "env") == 0) {
    env_markdown();
    return 0;
  }
  for (size_t i = 0; markdown && i < sizeof option_tables / sizeof option_tables[0]; i++)
    if (strcmp(table, option_tables[i]->name) == 0) {
      xopt_markdown(option_tables[i], stdout);
      return 0;
    }
  if (markdown)
    return usage_error(usage_avail, "no table '%s' (env, run, sample, causal, report or merge)", table);

  printf("Collectors (libraries in %s):\n", lib_dir);
  for (int i = 0; i < NCOLLECTORS; ++i)
    printf("  %-9s %-66s [%s]\n", xptrace_collectors[i].name, xptrace_collectors[i].description,
           lib_exists(xptrace_collectors[i].library) ? "found" : "not found");
  printf("  dispatcher libxptifw.so [%s]\n", lib_exists("libxptifw.so") ? "found" : "not found");
  printf("  sampler   libxptrace_sampler.so (xptrace sample, run --sample) [%s]\n",
         lib_exists("libxptrace_sampler.so") ? "found" : "not found");

  for (size_t i = 0; i < sizeof option_tables / sizeof option_tables[0]; i++) {
    printf("\nOptions of xptrace %s (default):\n", option_tables[i]->name);
    xopt_defaults(option_tables[i], stdout);
  }

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
  printf("\nStreams of xptrace's producers (run --streams):\n");
  printf("  %-26s %s\n", "opencl.api", "OpenCL API calls (run --opencl)");
  printf("  %-26s %s\n", "opencl.graph", "OpenCL task graph and device work (run --opencl)");
  printf("  %-26s %s\n", "level_zero.api", "Level Zero API calls (run --level-zero)");
  printf("  %-26s %s\n", "level_zero.graph",
         "Level Zero task graph and device work (run --level-zero)");
  printf("\n");
  counters_avail(stdout);
  return 0;
}

