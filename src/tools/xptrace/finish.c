/* xptrace finish DIR...: turn the recordings left in output folders
 * (a program that was killed, called _exit, or crashed; one not run
 * under `xptrace`) into traces.  `xptrace run` does the same for its own
 * folder once the program has ended. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "progress.h"
#include "xpt_finish.h"
#include "xptrace_cmds.h"
#ifdef XPTRACE_HAVE_PERF
#include "sample_timer.h"
#endif

struct finish_ctx {
  int traces;
  bool print_traces;
};

static void finish_print(const struct xpt_finish_result *res, void *ctx) {
  struct finish_ctx *c = ctx;
  progress_clear();
  if (res->busy) {
    fprintf(stderr,
            "xptrace: %s [%d] is still running; when it ends: xptrace finish %s\n",
            res->program[0] ? res->program : "a process", res->pid, res->trace);
    return;
  }
  progress_set((uint64_t)++c->traces);
  if (c->print_traces)
    fprintf(stderr, "xptrace: trace %s (open in https://ui.perfetto.dev)\n", res->trace);
  if (res->dropped)
    fprintf(stderr, "xptrace: %s [%d] dropped %llu events%s%s\n", res->program, res->pid,
            (unsigned long long)res->dropped,
            res->unpaired ? " (and the other halves of the slices they cut)" : "",
            res->disk_full == 1   ? " (the disk was full)"
            : res->disk_full == 2 ? " (the program closed the recording's descriptor)"
            : res->disk_full == 3 ? " (the recording reached its maximum size)"
                                  : "");
}

int xptrace_finish_dir_print(const char *dir, int *traces, bool print_traces) {
  struct finish_ctx c = {0, print_traces};
  char what[4200];
  snprintf(what, sizeof what, "xptrace: finishing the recordings in %s", dir);
  progress_begin(what, 0);
  int rc = xpt_finish_tree(dir, "xptrace:", finish_print, &c) < 0 ? 1 : 0;
  progress_end();
  *traces = c.traces;
  return rc;
}

int xptrace_finish_dir(const char *dir, int *traces) {
  return xptrace_finish_dir_print(dir, traces, true);
}

static const char usage_finish[] =
    "usage: xptrace finish DIR...\n"
    "Writes the trace of every recording (events*.xprec) and the samples of\n"
    "every sampler recording (samples*.xsamp) under each DIR and removes the\n"
    "recordings. Recordings of processes still running are left.\n"
    "Exit status: 0 done, 1 a recording could not be finished, 2 bad usage.\n";

int cmd_finish(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    fputs(usage_finish, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
      fprintf(stderr, "xptrace: finish: '%s' is not a folder\n", argv[i]);
      rc = 2;
      continue;
    }
    int traces = 0;
    if (xptrace_finish_dir(argv[i], &traces) != 0 && rc == 0)
      rc = 1;
#ifdef XPTRACE_HAVE_PERF
    /* The timer sampler's recordings (samples*.xsamp), if any. */
    sample_timer_opts_t to = {.dir = argv[i], .demangle = true, .silent_if_none = true};
    if (sample_timer_report(&to) == 0)
      ++traces;
#endif
    if (traces == 0)
      fprintf(stderr, "xptrace: nothing to finish in %s\n", argv[i]);
  }
  return rc;
}
