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

#include "xptrace_cmds.h"

#ifndef XPTRACE_VERSION
#define XPTRACE_VERSION "unknown"
#endif

static const char usage_main[] =
    "usage: xptrace run [options] -- command [args...]\n"
    "       xptrace sample [options] -- command [args...]\n"
    "       xptrace finish DIR...\n"
    "       xptrace merge [-o OUT] DIR|TRACE...\n"
    "       xptrace report [options] PATH\n"
    "       xptrace avail\n"
    "       xptrace causal [options] -- command [args...]\n"
    "       xptrace --help | --version\n"
    "run: run a program with XPTI tracing on and collectors loaded.\n"
    "sample: profile any program by sampling its call stacks (flame graph input).\n"
    "causal: which source line, made faster, would make the program faster.\n"
    "finish: write the traces of recordings a killed or crashed program left.\n"
    "merge: one trace from the traces of many processes, runs or hosts.\n"
    "report: top functions, trace points, device time, counters of a run's output;\n"
    "        call trees, flame graphs (--format svg), pprof profiles (--format pprof).\n"
    "avail: the collectors, counters and environment variables.\n"
    "'xptrace SUBCOMMAND --help' lists its options (run, sample, finish, merge, report,\n"
    "avail, causal).\n";


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
  if (strcmp(sub, "merge") == 0)
    return cmd_merge(argc - 1, argv + 1);
  if (strcmp(sub, "report") == 0)
    return cmd_report(argc - 1, argv + 1);
  if (strcmp(sub, "avail") == 0)
    return cmd_avail(argc - 1, argv + 1);
  if (strcmp(sub, "causal") == 0)
    return cmd_causal(argc - 1, argv + 1);
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
    fputs(usage_main, stdout);
    return 0;
  }
  if (strcmp(sub, "--version") == 0 || strcmp(sub, "-V") == 0) {
    printf("xptrace %s (XPTI %s)\n", XPTRACE_VERSION, XPTI_VERSION_STRING);
    return 0;
  }
  static const char *const subs[] = {"run", "sample", "finish", "merge", "report", "avail",
                                     "causal", NULL};
  static const char *const opts[] = {"help", "version", NULL};
  if (sub[0] == '-')
    return unknown_option(usage_main, opts, sub);
  const char *near = nearest_name(subs, sub);
  if (near)
    return usage_error(usage_main, "unknown subcommand '%s' (did you mean %s?)", sub, near);
  return usage_error(usage_main, "unknown subcommand '%s'", sub);
}
