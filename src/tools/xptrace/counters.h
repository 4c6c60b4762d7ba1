/* Counters of a launched program (`xptrace run --counters LIST`), taken
 * from outside: per-thread CPU time, context switches and page faults
 * (/proc, polled), process RSS and peak RSS (/proc, polled), and process
 * totals from perf_event (software counters; hardware ones where the
 * machine has a PMU).  Written as counter tracks into
 * counters.perfetto-trace in the process's output folder. */
#ifndef XPTRACE_COUNTERS_H
#define XPTRACE_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct xpt_counters;

/* LIST: comma list of counter names, "default" or "all".  NULL with a
 * reason in why when a name is unknown or the list is empty. */
struct xpt_counters *counters_parse(const char *list, char *why, size_t len);
/* The program is forked and waits before its exec: open the perf_event
 * counters on it (counting from the exec), start polling. */
void counters_start(struct xpt_counters *c, pid_t pid);
/* The program has ended: stop polling, read the totals, write the trace
 * into the process's folder (<program>-<pid>/ of session `token` under
 * dir; dir itself when there is none).  Frees c. */
void counters_finish(struct xpt_counters *c, const char *dir, const char *token, char *written,
                     size_t written_len); /* written: the file's path, "" when none */
/* `xptrace avail`: every counter, whether this machine offers it. */
void counters_avail(FILE *out);
/* The kernel's run time of a thread in ns (schedstat), else its user and
 * system ticks (stat); UINT64_MAX when it is gone.  Also the sampler's. */
uint64_t counters_thread_cpu_ns(pid_t pid, pid_t tid);

#endif /* XPTRACE_COUNTERS_H */
