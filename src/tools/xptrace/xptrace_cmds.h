/* Inside the xptrace command: one file per subcommand (run.c, sample.c,
 * avail.c, finish.c) and what they share (launch.c). */
#ifndef XPTRACE_CMDS_H
#define XPTRACE_CMDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum { EXIT_USAGE = 2, EXIT_CANNOT_RUN = 126, EXIT_NOT_FOUND = 127 };

int cmd_run(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_avail(int argc, char **argv);
/* xptrace report PATH (report.c) */
int cmd_report(int argc, char **argv);
/* The trace points table of `xptrace report TRACE` (its top rows) to out:
 * the per-function table after `xptrace run --functions`.  0, or 1 when
 * the trace could not be read whole. */
int report_points_table(FILE *out, const char *trace, size_t top);
/* The same table from the slices the finisher counted (xpt_slices.h):
 * nothing read again. */
struct xpt_slice_table;
int report_slices_table(FILE *out, const struct xpt_slice_table *slices, size_t top,
                        const char *source);
/* xptrace causal (causal.c) */
int cmd_causal(int argc, char **argv);
/* xptrace finish DIR... */
int cmd_finish(int argc, char **argv);
/* Finish every recording under dir, printing each trace written;
 * *traces gets their number.  Returns 0, or 1 when one failed. */
int xptrace_finish_dir(const char *dir, int *traces);
/* The same, printing each trace's path only when print_traces. */
int xptrace_finish_dir_print(const char *dir, int *traces, bool print_traces);
/* xptrace merge DIR|TRACE... [-o OUT] */
int cmd_merge(int argc, char **argv);
/* The process folders of `xptrace run` session `token` in dir (sorted,
 * malloc'ed); their number. */
size_t xptrace_session_dirs(const char *dir, const char *token, char ***out);
/* Merge the traces of those folders, and the run's samples trace when
 * not NULL (it joins their processes), into dir/trace.perfetto-trace (a
 * new name if taken); path gets it.  Returns 0, or 1 (said why). */
int xptrace_merge_session(const char *dir, char **leaves, size_t n, const char *samples,
                          char *path, size_t len, unsigned *processes);

/* The collectors `run -c` knows, in the order of their index. */
enum { NCOLLECTORS = 3 };
extern const struct xptrace_collector {
  const char *name;
  const char *library;
  const char *description;
} xptrace_collectors[NCOLLECTORS];

/* Our libraries: <bin>/../<libdir> installed, <bin>/../lib in the build tree. */
extern char lib_dir[]; /* PATH_MAX bytes */
void locate_lib_dir(void);
void lib_path(const char *library, char *buf, size_t len);
bool lib_exists(const char *library);

/* One line naming the problem, then the usage; returns EXIT_USAGE. */
int usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "unknown option 'ARG'" with the nearest of `names` (NULL-ended, no
 * dashes) when one is close: "(did you mean --NAME?)"; then the usage. */
int unknown_option(const char *usage, const char *const *names, const char *arg);
/* The long option names of a getopt table, NULL-ended (at most max - 1). */
void option_names(const void *longopts, const char **names, size_t max);
/* The name in `names` nearest to `word` (edit distance <= 2, at most
 * half its length), NULL when none. */
const char *nearest_name(const char *const *names, const char *word);
/* 0, or the shell's status (127/126) after its one-line message. */
int command_check(const char *cmd);
/* "SIGSEGV" for 11. */
const char *signal_name(int sig);
/* setenv, printed with -v. */
void set_env(bool verbose, const char *name, const char *value);
/* The output folder made absolute into `dir` (-o, or a new default). */
int output_dir_prepare(const char *usage, const char *output, const char *command0, char *dir,
                       size_t len);
/* An MPI rank's xptrace (run_mpi.c): its rank (NULL: not a rank); the
 * folder the job's ranks share when no -o is given (false: none known);
 * its one line at the end, and the merge command from the job's last. */
const char *run_mpi_rank(void);
bool run_mpi_job_dir(const char *command0, char *buf, size_t len);
void run_mpi_rank_done(const char *dir, const char *rank, const char *trace, const char *stats,
                       bool mergeable);
/* LD_PRELOAD gets the sampler first. */
int preload_sampler(const char *usage, bool verbose);
void print_sample_outputs(const char *dir, bool explain);
/* When set, called in xptrace with the command's pid once it is forked,
 * before its exec (which waits until the hook returns). */
extern void (*launch_on_fork)(int pid, void *ctx);
extern void *launch_on_fork_ctx;
/* fork + exec `command`, forwarding SIGTERM/SIGHUP; `after(ctx)` runs once
 * it ended; returns its status (128+N when killed by signal N). */
int launch_and_wait(char **command, bool verbose, void (*after)(const void *), const void *ctx);
/* From now on every signal that would end xptrace (but SIGINT/SIGQUIT,
 * the faults, SIGPIPE and those ignored at start) is passed on to the
 * command `pid`; launch_forward_said prints one line if any was. */
void launch_forward_signals(int pid);
void launch_forward_said(const char *command);

#endif /* XPTRACE_CMDS_H */
