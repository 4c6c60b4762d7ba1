/* Finishing a run: recordings (xpt_rec.h) become trace files.  The same
 * code runs in the traced process at exit, in `xptrace` after the
 * program ended (whatever way it ended), and in `xptrace finish DIR`. */
#ifndef XPT_FINISH_H
#define XPT_FINISH_H

#include <stdbool.h>
#include <stdint.h>

struct xpt_finish_result {
  char trace[4096]; /* path of the trace written */
  int pid;
  char program[64];
  uint64_t records;  /* records read */
  uint64_t dropped;  /* events the recorder could not write */
  uint64_t unpaired; /* of those: halves of slices whose other half was lost (ring, lost chunks) */
  int disk_full;     /* copying out failed: 1 full disk, 2 descriptor closed, 3 max size */
  bool busy;         /* its process still runs: left as it is (trace: its folder) */
};

/* Finish the recording `name` in folder `dir`: write the trace under a
 * name of its own (never replacing a file), then remove the recording.
 * Messages are one line each, prefixed `prefix`.  Returns 0; 1 when the
 * recording is gone or already finished; 2 when its process still runs or
 * another finisher has it (res->busy, pid and program filled in); -1
 * (message printed; the recording is kept). */
__attribute__((visibility("hidden"))) int xpt_finish_recording(const char *dir, const char *name,
                                                               const char *prefix,
                                                               struct xpt_finish_result *res);

/* Finish every recording under `dir` (its subfolders too: forked and
 * exec'd processes).  `each` is called for every trace written, and for
 * every recording left because its process still runs (res->busy).
 * Returns the number written, or -1 when one failed. */
__attribute__((visibility("hidden"))) int
xpt_finish_tree(const char *dir, const char *prefix,
                void (*each)(const struct xpt_finish_result *res, void *ctx), void *ctx);

#endif /* XPT_FINISH_H */
