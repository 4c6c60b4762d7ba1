/* Inside the finisher (pt_finish.c: the recording's files, its clock
 * and trace point descriptions; pt_finish_scan.c: the chunks scanned into
 * per-thread segments, paired as they come; pt_finish_encode.c: the
 * segments encoded in order into the trace). */
#ifndef PT_FINISH_INTERNAL_H
#define PT_FINISH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pt_common.h"
#include "pt_pair.h"
#include "xpt_rec.h"

struct fin_seg {
  uint64_t key; /* pid << 32 | tid */
  uint64_t number;
  uint64_t ts0;
  const uint8_t *data;
  uint32_t from, to;
  uint32_t added; /* its index before the segments are sorted */
  char name[24];
};

struct fin_thread_order {
  size_t first; /* index of its first segment */
  uint64_t ts0;
};

/* A chunk to scan, in the order they were started (a thread's chunks in
 * its order: it is paired as it is scanned, pt_pair.h). */
struct fin_ref {
  uint64_t gen;
  size_t seq; /* ties: as found */
  const struct xpt_rec_chunk *c;
  uint32_t cap;
};

struct fin {
  const uint8_t *map;
  size_t map_len;
  const uint8_t *spill;
  size_t spill_len;
  uint64_t *spilled_gens; /* sorted */
  size_t spilled_n;
  struct fin_ref *refs; /* the chunks to scan */
  size_t refs_n, refs_cap;
  const struct xpt_rec_header *h;
  struct fin_seg *segs;
  size_t segs_n, segs_cap;
  struct pt_graph_rec *graph;
  size_t graph_n, graph_cap;
  uint64_t records, damaged;
  uint64_t unpaired; /* of damaged: halves of slices whose other half was lost */
  struct pt_buf out;
  int fd;
  bool failed;
  int err;
};

/* The encoder the trace is written with (perfetto or json). */
PT_HIDDEN extern const struct pt_encoder *fin_enc;

/* pt_finish.c: CLOCK_MONOTONIC now; trace point descriptions by uid. */
PT_HIDDEN uint64_t fin_mono_ns(void);
/* A recorded timestamp in ns (inline: once per record). */
static inline uint64_t fin_clock_ns(uint64_t raw) { return pt_rclock_ns(raw); }
PT_HIDDEN const xpti_trace_event_data_t *fin_desc_find(uint64_t uid);
PT_HIDDEN void fin_desc_add(uint64_t uid, const uint8_t *p, uint32_t len);
/* pt_finish_scan.c: segments by thread, then number; threads by first
 * timestamp; pages read through dropped; held segments paired; the
 * chunks (and spilled ones) listed and scanned. */
PT_HIDDEN int fin_seg_cmp(const void *x, const void *y);
PT_HIDDEN int fin_thread_cmp(const void *x, const void *y);
PT_HIDDEN void fin_release(const struct fin *f, const void *p, size_t len);
PT_HIDDEN void fin_pair_held(struct fin *f, struct pt_pair_thread *t, const uint32_t *map);
PT_HIDDEN void fin_ref_add(struct fin *f, uint64_t gen, const struct xpt_rec_chunk *c, uint32_t cap);
PT_HIDDEN void fin_scan_refs(struct fin *f);
PT_HIDDEN bool fin_spilled(const struct fin *f, uint64_t gen);
PT_HIDDEN void fin_read_spill(struct fin *f, int dirfd, const char *name);
/* pt_finish_encode.c: graph records kept for the end; the output
 * written out; every thread's segments encoded. */
PT_HIDDEN void fin_graph_add(struct fin *f, const struct pt_rec *r);
PT_HIDDEN void fin_out_flush(struct fin *f);
PT_HIDDEN void fin_encode(struct fin *f);

#endif /* PT_FINISH_INTERNAL_H */
