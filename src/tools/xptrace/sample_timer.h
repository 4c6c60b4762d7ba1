/* `xptrace sample --method timer`: the launcher's side.  The preloaded
 * sampler (src/sampler) records into `samples.xsamp` files under the
 * output folder; after the command ended, these functions read them all
 * (forked and exec'd processes included), feed one sample session
 * (samples.h), print the timer method's diagnostics, and remove the
 * recordings they read. */
#ifndef XPTRACE_SAMPLE_TIMER_H
#define XPTRACE_SAMPLE_TIMER_H

#include <stdbool.h>
#include <stddef.h>

/* A statically linked program cannot take a preloaded library: true
 * (with the reason in `why`) when `cmd` (searched in PATH when it has no
 * slash) is an ELF executable without an interpreter. */
bool sample_timer_static(const char *cmd, char *why, size_t len);

typedef struct sample_timer_opts {
  const char *dir;     /* output folder */
  const char *command; /* argv[0]; NULL: the first process's name */
  double hz;           /* requested rate; 0: as recorded */
  unsigned depth;      /* 0: as recorded */
  bool demangle;
  bool silent_if_none; /* no recording: return 1 without a word */
  char *trace_path;    /* when set: gets the samples trace written ("" none) */
  size_t trace_path_len;
} sample_timer_opts_t;

/* Read every recording under o->dir, write the results (samples.folded,
 * samples.csv, the summary) and the diagnostics.  Returns 0, or 1 when
 * nothing could be reported (with one line saying why). */
int sample_timer_report(const sample_timer_opts_t *o);

/* launch_and_wait's `after` for the timer method: ctx is a
 * sample_timer_opts_t; reports, then names the output files. */
void sample_timer_after(const void *ctx);

#endif /* XPTRACE_SAMPLE_TIMER_H */
