/* xptrace report's exports for other tools: pprof profiles
 * (report_pprof.c) and flame graphs (report_svg.c). */
#ifndef REPORT_EXPORT_H
#define REPORT_EXPORT_H

#include <stdio.h>

#include "report_model.h"

/* A gzipped pprof profile of the selected samples (values: samples and
 * CPU nanoseconds, `period_ns` each: the trace does not say its rate),
 * or, with no sample, of the slices on threads (calls and nanoseconds
 * per call path).  0, or an errno value (ENODATA: nothing to write;
 * ENOSYS: built without zlib). */
int rp_pprof_write(const struct rp_model *m, const struct rp_select *sel, uint64_t period_ns,
                   int fd);

/* The rate the samples were taken at, from their spacing: the lower
 * quartile of the gaps between a thread's consecutive samples (a busy
 * thread's gap is one period; waits only lengthen gaps), rounded to two
 * significant digits.  0 when fewer than 16 gaps say it. */
double rp_sample_rate_estimate(const struct rp_model *m);

/* A flame graph (SVG) of the same: samples, else call paths worth their
 * self time.  0, or an errno value (ENODATA: nothing to draw). */
int rp_svg_write(const struct rp_model *m, const struct rp_select *sel, const char *title,
                 FILE *out);

/* Whether sample s is selected (pid, tid, a frame matching the regex). */
bool rp_sample_selected(const struct rp_model *m, const struct rp_sample *s,
                        const struct rp_select *sel);
/* Whether call path node (or one of its callers) matches the regex. */
bool rp_cnode_selected(const struct rp_model *m, uint32_t node, const struct rp_select *sel);

#endif /* REPORT_EXPORT_H */
