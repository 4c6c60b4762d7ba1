/* Inside the perf method: sample_perf.c (a command) and
 * sample_perf_attach.c (running processes) share the state and the steps
 * of one sampling session. */
#ifndef XPTRACE_SAMPLE_PERF_INTERNAL_H
#define XPTRACE_SAMPLE_PERF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sample_perf.h"
#include "sample_perf_ring.h"
#include "sample_perf_unwind.h"
#include "samples.h"

typedef struct offcpu offcpu_t; /* sample_perf_offcpu.h */

typedef struct perf_state {
  xs_session_t *session;
  unw_t *unw;
  const sample_perf_opts_t *o;
  uint64_t *pcs;
  uint64_t lost, throttled, cut, outside; /* outside: of the --periods windows */
  struct live { pid_t pid, tid; uint64_t base; } *live; /* running threads, their CPU times */
  size_t nlive, cap_live, next_live;
  bool per_cpu, kernel; /* per-CPU events (the reader keeps the tree's records); kernel time */
  bool root_execed;     /* the command's exec seen: its samples count */
  uint64_t t_exec;      /* its time (CLOCK_MONOTONIC ns), for --periods */
  pid_t root;
  /* --periods on a CPU-time clock: each process's CPU time as its samples
   * count it (all, and its main thread's), periods of CPU time each. */
  struct cpuclock { pid_t pid; uint64_t proc, main; } *cpu;
  size_t ncpu, capcpu;
  offcpu_t *off;     /* --off-cpu, --clock realtime: switch-outs waiting for their switch-in */
  uint64_t period_us; /* of a CPU sample, for the wall-time profile */
} perf_state_t;

/* A sample record's first fields (PERF_SAMPLE_IP | TID | TIME). */
typedef struct perf_head {
  uint64_t ip;
  uint32_t pid, tid;
  uint64_t time;
} perf_head_t;
/* Its user registers and stack copy (PERF_SAMPLE_REGS_USER | STACK_USER);
 * abi PERF_SAMPLE_REGS_ABI_NONE: no user context (a kernel thread). */
typedef struct perf_user {
  uint64_t abi, regs[UNW_NREGS];
  const unsigned char *stack; /* NULL: none copied */
  uint64_t dyn;               /* bytes of it valid */
} perf_user_t;
/* Copy n bytes from *p (before end) and step over them; false: too short. */
bool perf_take(const unsigned char **p, const unsigned char *end, void *out, size_t n);
/* Read the registers and the stack copy; false: the record is cut short. */
bool perf_take_user(const unsigned char **p, const unsigned char *end, perf_user_t *u);

/* A thread whose CPU time the launcher reads while it runs. */
void live_add(perf_state_t *s, pid_t pid, pid_t tid);
/* Read a few threads' CPU times (in turn) into the session. */
void live_refresh(perf_state_t *s);
/* Whether thread tid of pid at time t (CLOCK_MONOTONIC ns) is inside the
 * --periods windows; count: a CPU sample of it (CPU-time clocks advance). */
bool perf_in_window(perf_state_t *s, pid_t pid, pid_t tid, uint64_t t, bool count);
/* The clock of the --periods windows (enum sampler_period_clock), one for
 * all specs; PERF_WINDOWS_MIXED when they mix clocks (the timer's then). */
#define PERF_WINDOWS_MIXED (-1)
int perf_window_clock(const sample_perf_opts_t *o);
/* Hand what the reader copied to the session, in time order. */
void handle_batch(perf_state_t *s, reader_t *rd);
long read_sysctl(const char *name, long fallback);
/* The rate asked, within kernel.perf_event_max_sample_rate. */
double effective_hz(const sample_perf_opts_t *o);
/* What the kernel permits: kernel time, per-CPU events. */
void probe_scope(const sample_perf_opts_t *o, bool *kernel, bool *per_cpu);
/* One event and ring per CPU (pid -1 with per_cpu); the count opened. */
size_t open_rings(const sample_perf_opts_t *o, pid_t pid, bool kernel, bool per_cpu, ring_t **out, int *err);

#endif /* XPTRACE_SAMPLE_PERF_INTERNAL_H */
