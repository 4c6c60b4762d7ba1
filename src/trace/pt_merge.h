/* Merging Perfetto traces of many processes into one (xptrace merge, and
 * `xptrace run` at the end of a run).  Streams: one packet at a time, the
 * memory is a read buffer, an output buffer and a few small tables per
 * process (sequences, pids), whatever the size of the inputs. */
#ifndef PT_MERGE_H
#define PT_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_MERGE_API __attribute__((visibility("hidden")))

/* One input trace.  Traces with the same `group` (the folder holding
 * them: the events and samples traces of one process) share their track
 * uuids and pids; traces of the same `arg` (the command-line argument:
 * one run) share their flow ids, so that flows between processes of a
 * run join, and those of different runs never do. */
struct pt_merge_input {
  const char *path;
  const char *group;
  unsigned arg;
  /* A trace of processes that other inputs of its argument describe
   * (the samples trace `xptrace run --sample` writes at the run's top):
   * its process tracks take the pid those inputs' got, never a moved
   * one, so its samples and threads land on the same process.  Give
   * such inputs after the others of their argument. */
  bool joins;
};

/* A per-process time mapping, applied to every timestamp of a group (ns
 * of the clock the trace uses, MONOTONIC for ours): the hook for clock
 * correction across hosts.  Must be non-decreasing. */
typedef uint64_t (*pt_time_fn)(const void *ctx, uint64_t ns);

struct pt_merge_opts {
  /* Called once per group before its first packet: set *fn (NULL =
   * identity) and *fn_ctx.  NULL: identity for every group. */
  void (*time_map)(void *ctx, const char *group, pt_time_fn *fn, const void **fn_ctx);
  void *ctx;
  /* One line per problem (no newline), prefixed by the caller. */
  void (*warn)(void *ctx, const char *line);
};

struct pt_merge_stats {
  uint64_t packets, bytes_in, bytes_out;
  unsigned inputs, bad_inputs, processes, pids_moved;
};

/* Merge `n` inputs into the open descriptor `fd`.  Returns 0, 1 when an
 * input was unreadable or corrupt (what could be read is merged; warned),
 * -1 when the output could not be written (warned). */
PT_MERGE_API int pt_merge(const struct pt_merge_input *in, size_t n, int fd,
                          const struct pt_merge_opts *o, struct pt_merge_stats *st);

#endif /* PT_MERGE_H */
