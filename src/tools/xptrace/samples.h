/* The launcher's sample model, shared by every sampling method.
 *
 * A method (perf_event from outside, the in-process timer sampler read
 * back after the run) feeds one session with what it learnt: processes,
 * threads, mappings and samples, each stamped with CLOCK_MONOTONIC ns.
 * At the end the session symbolizes (src/symbols, with the mappings valid
 * at each sample's time) and writes every output:
 *   samples.folded, samples.csv           (CPU time; *_realtime.* wall time, *_offcpu.* blocked)
 *   samples.perfetto-trace                (PerfSample packets, docs/sampler.md)
 *   the summary table on stderr           (one for the whole process tree)
 * Single-threaded: one thread of the launcher owns a session. */
#ifndef XPTRACE_SAMPLES_H
#define XPTRACE_SAMPLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct xs_session xs_session_t;

/* The clock a sample was taken on: each has its own folded/csv files. */
/* XS_OFFCPU (perf method, --off-cpu): intervals a thread was blocked,
 * weighted in microseconds. */
typedef enum xs_clock { XS_CPUTIME = 0, XS_REALTIME = 1, XS_OFFCPU = 2, XS_NCLOCKS } xs_clock_t;

typedef struct xs_options {
  const char *dir;     /* output folder, already created */
  const char *command; /* argv[0] of the command, for the summary */
  const char *method;  /* "perf" or "timer", for the summary */
  double hz;           /* rate asked of the method */
  unsigned depth;      /* deepest stack kept; deeper ones were cut */
  bool demangle;       /* C++ names demangled (--no-demangle: false) */
  bool trace;          /* write samples.perfetto-trace */
  bool quiet_table;    /* no top-functions table, summary line only */
  char *trace_path;    /* when set: gets the samples trace written ("" none) */
  size_t trace_path_len;
  /* The rate of each clock sampled, 0 for a clock not sampled (messages
   * about CPU time, or at `hz`, were false under --clock realtime); all
   * 0: `hz` for every clock and CPU time always reported. */
  double clock_hz[XS_NCLOCKS];
  /* XS_REALTIME weighs microseconds of wall time (the perf method's CPU
   * samples and off-CPU intervals), not periods. */
  bool realtime_us;
} xs_options_t;

/* NULL when out of memory.  The strings of `o` must outlive the session. */
xs_session_t *xs_session_new(const xs_options_t *o);

/* The command's pid: its threads are named without a process frame in
 * samples.folded (other processes get "[name-pid]" as their root). */
void xs_root(xs_session_t *s, pid_t pid);

/* A process came to be (fork: ppid is its parent, whose mappings it
 * inherits as of `t`; ppid 0: none known). */
void xs_process(xs_session_t *s, pid_t pid, pid_t ppid, uint64_t t);
/* A process's name (comm or program); exec: its mappings end at `t`. */
void xs_process_name(xs_session_t *s, pid_t pid, uint64_t t, const char *name, bool exec);
/* A thread appeared (creation order numbers threads) or was named. */
void xs_thread(xs_session_t *s, pid_t pid, pid_t tid, uint64_t t, const char *name);
/* A thread ended; cpu_ns: its CPU time as the kernel counted it
 * (UINT64_MAX when unknown), for the samples-vs-CPU diagnostic. */
void xs_thread_exit(xs_session_t *s, pid_t pid, pid_t tid, uint64_t t, uint64_t cpu_ns);
/* A thread's CPU time so far, read while it runs: the largest is kept. */
void xs_thread_cpu(xs_session_t *s, pid_t pid, pid_t tid, uint64_t cpu_ns);
/* The share of a thread's CPU time spent in the kernel (0..1), as its
 * last reading of utime and stime gave it; for the diagnostics. */
void xs_thread_system(xs_session_t *s, pid_t pid, pid_t tid, double share);

/* A file (or anonymous, path "[anon]", "[vdso]"...) mapped at [start,
 * end) from file offset pgoff, from time t until a later mapping
 * overlaps it or the process execs.  build_id may be NULL. */
void xs_mapping(xs_session_t *s, pid_t pid, uint64_t t, uint64_t start, uint64_t end,
                uint64_t pgoff, const char *path, const uint8_t *build_id, size_t build_id_len);

/* A sample of thread tid: `n` code addresses innermost first; pc[0] is
 * the interrupted instruction, the others return addresses (looked up
 * one byte back); kernel addresses are named from /proc/kallsyms.  weight: how many sampling periods it stands for
 * (1, or 1 + timer overruns).  truncated: the stack was deeper than
 * what was kept (outermost frames missing). */
void xs_sample(xs_session_t *s, xs_clock_t clock, pid_t pid, pid_t tid, uint64_t t,
               uint64_t weight, const uint64_t *pc, size_t n, bool truncated);

/* A sample whose frames a method already named (innermost first). */
typedef struct xs_frame {
  const char *function; /* NULL: "[unknown]" */
  const char *module;   /* base name of the file, may be NULL */
} xs_frame_t;
void xs_sample_named(xs_session_t *s, xs_clock_t clock, pid_t pid, pid_t tid, uint64_t t,
                     uint64_t weight, const xs_frame_t *frames, size_t n, bool truncated);

/* What the method itself counted, for the summary and the diagnostics. */
typedef struct xs_method_stats {
  uint64_t lost;        /* samples the method lost (ring full, no memory) */
  uint64_t throttled;   /* times the kernel throttled sampling */
  uint64_t unwind_cut;  /* stacks whose unwinding stopped early (copy too small...) */
  double cpu_seconds;   /* CPU time of the whole tree (rusage), < 0 unknown */
  double effective_hz;  /* delivered rate, samples per CPU-second; < 0: computed here */
  const char *unwinder; /* e.g. "DWARF (libdwfl), 16 KiB stack copies" */
  bool kernel;          /* perf: kernel time sampled too (else user space only) */
  bool per_cpu;         /* perf: per-CPU events (else inherited per-thread ones) */
} xs_method_stats_t;

/* Symbolize, write the files, print the summary and diagnostics.
 * Returns the number of samples written. */
uint64_t xs_session_finish(xs_session_t *s, const xs_method_stats_t *m);
void xs_session_free(xs_session_t *s);

#endif /* XPTRACE_SAMPLES_H */
