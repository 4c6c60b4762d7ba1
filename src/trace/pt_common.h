/* Helpers shared by the protobuf and JSON encoders. */
#ifndef PT_COMMON_H
#define PT_COMMON_H

#include "pt_internal.h"

enum pt_arg_kind { PT_ARG_UINT, PT_ARG_INT, PT_ARG_DOUBLE, PT_ARG_BOOL, PT_ARG_STR };
struct pt_arg {
  const char *name;
  enum pt_arg_kind kind;
  uint64_t u;
  int64_t i;
  double d;
  const char *s;
};
#define PT_ARGS_MAX 32
struct pt_args {
  size_t n;
  size_t used;
  struct pt_arg v[PT_ARGS_MAX];
  char scratch[4096];
};
/* What pt_collect_args adds: the trace point's properties (uid, source
 * file:line, source/target uid, metadata), the instance. */
enum { PT_ARGS_PROPS = 1, PT_ARGS_INSTANCE = 2 };
PT_HIDDEN void pt_collect_args(struct pt_args *a, const xpti_trace_event_data_t *e,
                               uint64_t instance, unsigned what);
/* The entry of event e on sequence s (added when new: *fresh set), NULL
 * when out of memory. */
PT_HIDDEN struct pt_seen *pt_seq_seen(struct pt_seq *s, const xpti_trace_event_data_t *e,
                                      bool *fresh);
/* Annotations a begin/instant record of e gets on sequence s: everything
 * with XPTRACE_ANNOTATE=all, else the properties on the first record of
 * each trace point (and again when its metadata grew), else none. */
PT_HIDDEN unsigned pt_args_wanted(struct pt_seen *seen, bool fresh,
                                  const xpti_trace_event_data_t *e);

/* Edges of a batch of graph records, as lists per node (indices). */
struct pt_graph_links {
  size_t cap;
  size_t *slot;
  size_t *out_head, *in_head, *out_next, *in_next;
  uint8_t *linked; /* edge i has both ends in the batch */
};
/* Sorts recs by time and links them (an edge whose source node comes
 * later moves to the source's time, after it); false when out of memory. */
PT_HIDDEN bool pt_graph_link(struct pt_graph_rec *recs, size_t n, struct pt_graph_links *l);
PT_HIDDEN size_t pt_graph_node(const struct pt_graph_rec *recs, const struct pt_graph_links *l,
                               uint64_t uid);
PT_HIDDEN void pt_graph_unlink(struct pt_graph_links *l);
/* The annotations of an edge drawn as an instant of its target node:
 * the edge's properties with its uid as edge_uid, and the target's uid. */
PT_HIDDEN void pt_edge_args(struct pt_args *a, const xpti_trace_event_data_t *edge,
                            uint64_t instance, const xpti_trace_event_data_t *target);
/* A flow id unique in this process's trace (and across parent/child). */
PT_HIDDEN uint64_t pt_flow_id(size_t edge_index, uint64_t base);

static inline uint64_t pt_process_uuid(void) { return (uint64_t)pt_proc.pid << 32; }
static inline uint64_t pt_thread_uuid(const struct pt_thread *t) {
  return ((uint64_t)t->pid << 32) | (uint32_t)t->tid;
}
/* Device lanes: above every tid (< 2^22) and below the graph track. */
static inline uint64_t pt_lane_uuid(uint32_t track_index, uint32_t lane) {
  return ((uint64_t)pt_proc.pid << 32) | 0x80000000u | (track_index << 12) | lane;
}
/* JSON pseudo thread of a lane. */
static inline pid_t pt_lane_tid(uint32_t track_index, uint32_t lane) {
  return (pid_t)(0x40000000u | (track_index << 12) | lane);
}
static inline uint64_t pt_graph_uuid(void) { return ((uint64_t)pt_proc.pid << 32) | 0xffffffffu; }
/* JSON pseudo thread of the graph: above every tid (< 2^22), below the
 * lanes (tid 0 would be folded into the main thread by importers). */
static inline pid_t pt_graph_tid(void) { return (pid_t)0x3fffffff; }
/* Every thread is named: the main thread after the program. */
static inline const char *pt_thread_name(const struct pt_thread *t) {
  if (t->name[0])
    return t->name;
  return t->tid == t->pid && pt_proc.program[0] ? pt_proc.program : "thread";
}

#endif /* PT_COMMON_H */
