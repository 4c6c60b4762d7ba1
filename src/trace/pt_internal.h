/* The trace writer: turns a recording (xpt_rec.h) into a Perfetto or
 * Chrome JSON trace (pt_finish.c drives the encoders pt_proto.c,
 * pt_json.c, pt_device.c).  Single-threaded. */
#ifndef PT_INTERNAL_H
#define PT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "xpt_rec.h"

#include "xpti/xpti_trace_framework.h"

#define PT_HIDDEN __attribute__((visibility("hidden")))

/* A record as the encoders see it: the recording's record
 * (xpt_rec.h) with the trace point's universal id replaced by its
 * description (pt_desc), followed by its inline bytes.  ts is MONOTONIC
 * ns by then. */
struct pt_rec {
  uint64_t ts;
  const xpti_trace_event_data_t *event;
  uint64_t instance;
  uint16_t type;
  uint8_t stream;
  uint8_t pad; /* the record kind: what its inline bytes are */
  uint32_t name_len;
};
_Static_assert(sizeof(struct pt_rec) == 32, "record layout");

/* What a record's inline bytes are (its `pad` byte; xpt_rec_kind). */
enum { PT_INLINE_NAME = 0, PT_INLINE_TIMED = 1, PT_INLINE_EDGE = 2 };
/* A timed slice (xptrace_protocol.h): this, then the track name and the
 * name (no terminators). */
struct pt_timed_inline {
  uint64_t begin_ns, end_ns, track_id;
  uint16_t track_name_len, name_len;
  uint32_t unused;
};
/* An edge_create: the instances of its two nodes when it was made. */
struct pt_edge_inline {
  uint64_t source_instance, target_instance;
};
#define PT_NAME_MAX 255u

/* A trace point as the recording describes it: an event and payload of
 * the finisher's own, so that encoders read the usual fields, and the
 * metadata it had (entries of struct xpt_rec_meta). */
struct pt_desc {
  xpti_trace_event_data_t ev;
  xpti_payload_t payload;
  uint32_t meta_count;
  const uint8_t *meta; /* in the finisher's memory */
  size_t meta_len;
};
static inline const struct pt_desc *pt_desc_of(const xpti_trace_event_data_t *e) {
  return (const struct pt_desc *)(const void *)e; /* ev is the first member */
}

/* A trace point already seen on a sequence: its interned name, and the
 * metadata count when its properties were last written. */
struct pt_seen {
  const xpti_trace_event_data_t *event; /* NULL: free slot */
  const char *name;                     /* payload name the id was made from */
  uint32_t name_id;
  uint32_t meta_count;
};

/* Encoder state of one thread's packet sequence, owned by the writer. */
struct pt_seq {
  bool started;
  uint32_t seq_id;
  uint64_t last_ts; /* ns of the last packet written */
  uint8_t *interned; /* bit per string id: bit0 name, bit1 category, bit2 annotation name */
  size_t interned_cap;
  struct pt_seen *seen; /* open addressing, by event pointer */
  size_t seen_cap, seen_n;
  uint32_t cat_id[256]; /* interned category id of each stream, 0 = not yet */
};
/* Forget everything written on the sequence (a new one starts). */
PT_HIDDEN void pt_seq_reset(struct pt_seq *s);

/* A thread of the recorded process, as the finisher writes it. */
struct pt_thread {
  pid_t pid;
  pid_t tid;
  uint32_t index;
  char name[24];
  uint64_t last_ns; /* timestamps never go back on a thread */
  struct pt_seq seq;
  /* JSON: the open slices' names (interned) and streams, for their ends */
  struct pt_open_slice {
    const char *name;
    uint8_t stream;
  } *open;
  size_t open_n, open_cap;
};

/* ---- global state of the finisher (pt_finish.c) ---- */
/* The recording's clock (TSC ticks or MONOTONIC ns) to MONOTONIC ns. */
struct pt_rclock {
  bool tsc;
  uint64_t base, base_ns; /* a (TSC, ns) pair */
  double ns_per_tick;
  int64_t skew_ns; /* tests of the clock correction (an MPI rank's) */
};
PT_HIDDEN extern struct pt_rclock pt_rclock;
static inline uint64_t pt_rclock_ns(uint64_t raw) {
  int64_t ns = (int64_t)raw;
  if (pt_rclock.tsc) {
    double d = (double)(int64_t)(raw - pt_rclock.base) * pt_rclock.ns_per_tick;
    ns = (int64_t)pt_rclock.base_ns + (int64_t)d;
  }
  ns += pt_rclock.skew_ns;
  return ns > 0 ? (uint64_t)ns : 0;
}

enum pt_format { PT_FORMAT_PROTO, PT_FORMAT_JSON };
PT_HIDDEN extern enum pt_format pt_format;

/* ---- a growable output buffer with nested protobuf lengths ---- */
#define PT_OUT_FLUSH (1u << 20) /* the writer writes out at this much */
struct pt_buf {
  uint8_t *data;
  size_t len;
  size_t cap;
  bool failed; /* out of memory: the packet is dropped */
};

/* ---- writer (pt_finish.c) ---- */
/* Per-record information the encoders need. */
enum pt_kind { PT_KIND_BEGIN, PT_KIND_END, PT_KIND_INSTANT, PT_KIND_GRAPH };
PT_HIDDEN enum pt_kind pt_kind_of(uint16_t type);
/* A flow mark (xptrace_protocol.h): 1 out, 2 in, 0 not one. */
PT_HIDDEN int pt_flow_kind(uint16_t type);
/* The writer's (single-threaded) copies of the two, read from a table
 * filled on first use: they ran three times per record.  Forgotten by
 * pt_kind_reset when the process's tool names change. */
PT_HIDDEN extern uint8_t pt_kind_table[65536]; /* kind | flow << 2 | 0x80 when known */
PT_HIDDEN uint8_t pt_kind_fill(uint16_t type);
static inline enum pt_kind pt_kind_fast(uint16_t type) {
  uint8_t k = pt_kind_table[type];
  return (enum pt_kind)((k ? k : pt_kind_fill(type)) & 3);
}
static inline int pt_flow_fast(uint16_t type) {
  uint8_t k = pt_kind_table[type];
  return ((k ? k : pt_kind_fill(type)) >> 2) & 3;
}
PT_HIDDEN void pt_kind_reset(void);
/* Name of a record's slice: payload name, inline name, or type name. */
PT_HIDDEN const char *pt_rec_name(const struct pt_rec *r, char *buf, size_t buflen);
PT_HIDDEN const char *pt_stream_name(uint8_t stream);
/* pt_slices.c: the finisher's slice statistics (xpt_slices.h), fed one
 * thread at a time with the records it encodes. */
PT_HIDDEN void pt_slices_thread(void);
PT_HIDDEN void pt_slices_record(const struct pt_rec *r, uint64_t ts);
PT_HIDDEN extern bool pt_slices_on; /* a table is being filled */
/* A trace point type's name (user-defined ones after their tool). */
PT_HIDDEN const char *pt_type_name(uint16_t type, char *buf, size_t buflen);
PT_HIDDEN void pt_str_reset(void);
/* Forget what the encoders wrote (a new file starts). */
PT_HIDDEN void pt_encoders_reset(void);

/* Global string table (writer only): content -> id, ids from 1. */
PT_HIDDEN uint32_t pt_str_id(const char *s, size_t len);
/* The table's copy of s (NULL when out of memory). */
PT_HIDDEN const char *pt_str_intern(const char *s, size_t len);

/* ---- device tracks (pt_device.c, writer only) ---- */
struct pt_encoder;
PT_HIDDEN void pt_dev_add(const struct pt_rec *r);
PT_HIDDEN void pt_dev_edge(uint64_t source_uid, uint64_t source_instance, uint64_t target_uid,
                           uint64_t target_instance);
/* Draw the held slices that are due (all when final). */
PT_HIDDEN void pt_dev_pass(struct pt_buf *out, const struct pt_encoder *enc, bool final,
                           uint64_t now_ns);
PT_HIDDEN uint64_t pt_dev_dropped(void);
PT_HIDDEN void pt_dev_reset(void); /* before each recording is finished */

/* Slices begun on one thread and ended on another (pt_handoff.c, writer
 * only).  The finisher hands in each thread's halves that found no other
 * half there; after every thread, pt_handoff_match pairs them across
 * threads by (trace point, instance), the earliest begin first, and
 * lists what each record at a place becomes.  A pair is drawn as one
 * slice on a track of its stream's (PT_HANDOFF_TRACK | stream). */
enum pt_half_kind {
  PT_HALF_CLOSED, /* a begin an enclosing end closed on its thread */
  PT_HALF_OPEN,   /* a begin still open when its thread ended */
  PT_HALF_END,    /* an end with no begin on its thread */
};
enum pt_half_fate { PT_FATE_DROP, PT_FATE_SKIP, PT_FATE_HANDED };
struct pt_half_place {
  uint64_t pos;    /* the finisher's record place */
  uint64_t end_ts; /* PT_FATE_HANDED: the raw time of its end */
  uint8_t fate;
};
#define PT_HANDOFF_TRACK 0xfffffffffff00000ull
PT_HIDDEN void pt_handoff_reset(void);
PT_HIDDEN bool pt_handoff_add(uint64_t uid, uint64_t instance, uint64_t raw_ts, uint64_t pos,
                              enum pt_half_kind kind);
/* Decide every half (a begin open at its thread's end is kept when
 * nothing was lost); false when out of memory (then every half drops). */
PT_HIDDEN bool pt_handoff_match(bool lost);
/* The places decided, sorted by place; pt_handoff_from: the first at or
 * after `pos`. */
PT_HIDDEN const struct pt_half_place *pt_handoff_places(size_t *n);
PT_HIDDEN size_t pt_handoff_from(uint64_t pos);
/* Draw the begin r (its inline name bytes after it) as a whole slice
 * ending at end_ns (device tracks: pt_dev_add). */
PT_HIDDEN void pt_handoff_draw(const struct pt_rec *r, const uint8_t *inline_bytes,
                               uint64_t end_ns);

/* Graph records kept for the final flush (edges need both ends). */
struct pt_graph_rec {
  uint64_t ts;
  const xpti_trace_event_data_t *event;
  uint64_t instance;
  uint16_t type;
  uint8_t stream;
  uint32_t order; /* ties of equal times keep it (set by pt_graph_link) */
};

/* A device slice as the encoders write it: absolute MONOTONIC ns, on a
 * lane; flows start (out) or end (in) on it. */
struct pt_dev_out {
  uint64_t begin, end;
  uint32_t track_index, lane;
  const char *name, *cat;
  const xpti_trace_event_data_t *event;
  uint64_t instance;
  unsigned args; /* PT_ARGS_* */
  const uint64_t *flows_out, *flows_in;
  size_t n_out, n_in;
  bool end_later; /* nested lane: the end comes by device_end, in time order */
};

/* An encoder turns records into bytes appended to `out`. */
struct pt_encoder {
  void (*begin_file)(struct pt_buf *out);
  /* ts: the record's time in CLOCK_MONOTONIC ns */
  void (*thread_record)(struct pt_buf *out, struct pt_thread *t, const struct pt_rec *r,
                        uint64_t ts);
  void (*graph)(struct pt_buf *out, struct pt_graph_rec *recs, size_t n);
  void (*dropped)(struct pt_buf *out, uint64_t count, uint64_t ts);
  /* A device lane's track (child of the process track). */
  void (*device_lane)(struct pt_buf *out, uint32_t track_index, uint32_t lane, const char *name);
  void (*device_slice)(struct pt_buf *out, const struct pt_dev_out *s);
  /* The end of a slice written with end_later (NULL: the slice was whole). */
  void (*device_end)(struct pt_buf *out, uint32_t track_index, uint32_t lane, uint64_t end);
  /* Optional: the compact records (xpt_rec.h) at p (n bytes of whole
   * ones) of thread t, as far as each takes the common way (a slice's end;
   * the begin of a trace point this sequence wrote before, unannotated):
   * times converted and kept from going back on the thread, packets
   * written, slices counted (pt_slices_record).  Stops before any other
   * record, or once out holds PT_OUT_FLUSH bytes; returns the records
   * taken.  What a run's fast state holds is forgotten by pt_encoders_reset. */
  size_t (*compact)(struct pt_buf *out, struct pt_thread *t, const uint8_t *p, size_t n);
  /* Bytes closing the file (JSON "]}"); rewritten after later flushes. */
  const char *trailer;
};
PT_HIDDEN extern const struct pt_encoder pt_proto_encoder;
PT_HIDDEN extern const struct pt_encoder pt_json_encoder;

/* Identity of the recorded process, used by the encoders. */
struct pt_process {
  pid_t pid;
  uint64_t start_ns;
  bool forked; /* a forked child: sequence ids are made from the pid */
  char program[64];
  const char *stream_names; /* 256 names of XPT_REC_NAME_LEN bytes */
  const char *tool_names;
};
/* XPTRACE_ANNOTATE=all: every slice carries every annotation, instance
 * included; default: properties on a trace point's first slice only. */
PT_HIDDEN extern bool pt_annotate_all;
PT_HIDDEN extern struct pt_process pt_proc;

/* buffer helpers (pt_buf.c) */
PT_HIDDEN bool pt_buf_reserve(struct pt_buf *b, size_t extra);
PT_HIDDEN void pt_buf_bytes(struct pt_buf *b, const void *p, size_t n);
PT_HIDDEN void pt_buf_str(struct pt_buf *b, const char *s);
PT_HIDDEN void pt_buf_printf(struct pt_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
PT_HIDDEN void pt_buf_json_str(struct pt_buf *b, const char *s);

/* protobuf primitives */
PT_HIDDEN void pb_varint(struct pt_buf *b, uint64_t v);
PT_HIDDEN void pb_uint(struct pt_buf *b, uint32_t field, uint64_t v);
PT_HIDDEN void pb_sint(struct pt_buf *b, uint32_t field, int64_t v); /* int64 (not zigzag) */
PT_HIDDEN void pb_fixed64(struct pt_buf *b, uint32_t field, uint64_t v);
PT_HIDDEN void pb_double(struct pt_buf *b, uint32_t field, double v);
PT_HIDDEN void pb_bytes(struct pt_buf *b, uint32_t field, const void *p, size_t n);
PT_HIDDEN void pb_string(struct pt_buf *b, uint32_t field, const char *s);
/* Open a nested message: returns a mark for pb_close. */
PT_HIDDEN size_t pb_open(struct pt_buf *b, uint32_t field);
PT_HIDDEN void pb_close(struct pt_buf *b, size_t mark);

#endif /* PT_INTERNAL_H */
