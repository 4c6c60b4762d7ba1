/* `xptrace sample --method perf`: sampling from outside the program with
 * perf_event_open (see docs/sampler.md).  Nothing is loaded into the
 * program: the launcher opens the events on the child before its exec,
 * reads the ring buffers while it waits, unwinds the copied stacks and
 * hands everything to the sample session (samples.h), which writes the
 * outputs. */
#ifndef XPTRACE_SAMPLE_PERF_H
#define XPTRACE_SAMPLE_PERF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sample_perf_opts {
  double hz;           /* requested samples per CPU-second */
  unsigned depth;      /* deepest call chain kept */
  const char *dir;     /* output folder, already created */
  bool verbose;
  bool fp;             /* frame-pointer call chains instead of DWARF unwinding */
  bool demangle;       /* C++ names demangled */
  unsigned stack_size; /* bytes of user stack copied per sample (DWARF) */
  char *trace_path;    /* when set: gets the samples trace's path ("" none) */
  size_t trace_path_len;
  /* --periods of wall time (realtime specs only): samples outside the
   * windows, counted from the command's exec, are left out. */
  const struct sampler_period *periods;
  size_t nperiods;
  /* Context switches of the tree (needs kernel sampling): off_cpu writes
   * samples_offcpu.* (where threads blocked, in microseconds), realtime
   * samples_realtime.* (CPU samples and off-CPU intervals: wall time). */
  bool off_cpu, realtime;
} sample_perf_opts_t;

/* Whether this kernel lets us sample a child of ours; false with the
 * reason (errno and perf_event_paranoid) in `why`. */
bool sample_perf_available(const sample_perf_opts_t *o, char *why, size_t len);

/* Run `command` sampled, wait for it, write the outputs.  Returns the
 * command's exit status (128+N when killed by signal N); `after(ctx)`
 * prints what was left, before the status is reported. */
int sample_perf_run(char **command, const sample_perf_opts_t *o, void (*after)(const void *),
                    const void *ctx);

/* Sample running processes (every thread, and the children they start)
 * until they end, Ctrl-C or `duration` seconds (0: no limit); write the
 * outputs.  Needs per-CPU events (said in one line when refused).
 * Returns 0, or 1 after one line. */
#include <sys/types.h>
int sample_perf_attach(const pid_t *pids, size_t n, double duration, const sample_perf_opts_t *o);

#endif /* XPTRACE_SAMPLE_PERF_H */
