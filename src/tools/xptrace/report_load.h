/* xptrace report: reading traces into the model (report_load.c). */
#ifndef REPORT_LOAD_H
#define REPORT_LOAD_H

#include "report_model.h"

/* One trace file.  0, or -1 after one line on stderr (what was read
 * before a corrupt or truncated part stays in the model). */
int rp_load_trace(struct rp_model *m, const char *path);
/* A trace in memory, silently (fuzzing). */
int rp_load_mem(struct rp_model *m, const void *data, size_t len);
/* A trace file, or every *.perfetto-trace under a folder. */
int rp_load(struct rp_model *m, const char *path);

#endif /* REPORT_LOAD_H */
