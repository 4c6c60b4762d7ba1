/* Off-CPU time under the perf method (sample_perf_offcpu.c): where each
 * thread of the command's tree waited, for how long, with its stack. */
#ifndef XPTRACE_SAMPLE_PERF_OFFCPU_H
#define XPTRACE_SAMPLE_PERF_OFFCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "sample_perf_internal.h"

offcpu_t *offcpu_new(size_t depth);
void offcpu_free(offcpu_t *oc);
/* No ring was added: free *oc, clear it, and say why there is no off-CPU
 * (or wall-time) profile, in one line. */
void offcpu_unavailable(const sample_perf_opts_t *o, offcpu_t **oc);
/* Append one context-switch event and ring per CPU on `pid` (inherited,
 * enabled at its exec) to *rings (n of them); returns the new count. */
size_t offcpu_open_rings(const sample_perf_opts_t *o, pid_t pid, ring_t **rings, size_t n);
/* Attaching: one context-switch event per thread of `pids` and CPU (each
 * inherited: the threads they start), writing into one ring per CPU
 * appended to *rings (n of them); returns the new count, the threads
 * covered in *nthreads of *nseen, and the last open's errno in *err (0:
 * none failed).  `oc` keeps the events' other descriptors.  The events
 * leave OFFCPU_SPARE_FDS descriptors free under the open-file limit. */
#define OFFCPU_SPARE_FDS 32
size_t offcpu_attach_rings(const sample_perf_opts_t *o, offcpu_t *oc, const pid_t *pids, size_t npids,
                           ring_t **rings, size_t n, size_t *nthreads, size_t *nseen, int *err);
/* A switch-out sample or a switch record: true when it was one. */
bool offcpu_record(perf_state_t *s, const struct perf_event_header *hdr);
/* A thread ended: its last switch-out has no switch-in. */
void offcpu_exit(perf_state_t *s, pid_t tid);

#endif /* XPTRACE_SAMPLE_PERF_OFFCPU_H */
