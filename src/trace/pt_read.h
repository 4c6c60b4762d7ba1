/* A streaming reader of Perfetto protobuf traces (ours: the collector's
 * traces, the sampler's, merged ones; and any other, whose packets it
 * skips field by field).  Memory is one read buffer (it grows only to
 * the largest packet) plus the per-sequence state: interned strings,
 * frames, callstacks, mappings, clocks, defaults, and the tracks seen.
 * Never the whole file.
 *
 * Use:
 *   char err[256];
 *   struct pt_reader *r = pt_reader_open(path, 0, err, sizeof err);
 *   struct pt_packet p;
 *   int rc;
 *   while ((rc = pt_reader_next(r, &p)) > 0) { ... p.kind, p.ts, p.event.name ... }
 *   if (rc < 0) fprintf(stderr, "xptrace: %s\n", pt_reader_error(r));
 *   pt_reader_close(r);
 *
 * Everything a packet points to (strings, arrays, the packet's bytes)
 * lives until the next pt_reader_next() (interned strings, frames: until
 * their sequence is cleared (SEQ_INCREMENTAL_STATE_CLEARED) or close).
 * Strings are NUL-terminated.  Not thread-safe: one reader per thread. */
#ifndef PT_READ_H
#define PT_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef PT_READ_API
#define PT_READ_API __attribute__((visibility("hidden")))
#endif

/* Clock ids (Perfetto's builtin clocks); 64..127 are sequence-scoped. */
enum { PT_CLOCK_REALTIME = 1, PT_CLOCK_MONOTONIC = 3, PT_CLOCK_BOOTTIME = 6 };

/* The category of the off-CPU slices `xptrace sample --off-cpu` writes on
 * thread tracks: time the thread was blocked, not a traced call (readers
 * that total trace-point time leave them out). */
#define PT_OFFCPU_CATEGORY "xptrace.offcpu"

/* What a packet is (the data field it carries). */
enum pt_packet_kind {
  PT_PKT_OTHER = 0, /* nothing decoded: only seq_id, ts, flags, raw bytes */
  PT_PKT_CLOCK,     /* ClockSnapshot (6) */
  PT_PKT_TRACK,     /* TrackDescriptor (60) */
  PT_PKT_EVENT,     /* TrackEvent (11) */
  PT_PKT_SAMPLE,    /* PerfSample (66) */
};

/* TrackEvent types. */
enum { PT_EV_SLICE_BEGIN = 1, PT_EV_SLICE_END = 2, PT_EV_INSTANT = 3, PT_EV_COUNTER = 4 };

enum pt_annot_kind { PT_AN_BOOL, PT_AN_UINT, PT_AN_INT, PT_AN_DOUBLE, PT_AN_STRING, PT_AN_OTHER };
struct pt_annot {
  const char *name; /* interned names resolved; "" if unknown */
  enum pt_annot_kind kind;
  uint64_t u; /* bool and uint */
  int64_t i;
  double d;
  const char *s;
};

struct pt_read_clock {
  uint32_t id;
  uint64_t ts;
  bool incremental;
};

struct pt_packet {
  /* Every packet. */
  enum pt_packet_kind kind;
  uint32_t seq_id;    /* trusted_packet_sequence_id (0: none) */
  uint32_t seq_flags; /* sequence_flags as written */
  bool has_ts;
  uint64_t ts;       /* resolved: absolute ns on clock_id */
  uint32_t clock_id; /* PT_CLOCK_MONOTONIC for our traces; a sequence-scoped
                        clock is converted to the clock its snapshot ties it to */
  uint32_t ts_clock;   /* the clock the timestamp was written on */
  bool ts_incremental; /* written as a delta (an incremental clock) */
  uint64_t offset;     /* of the packet in the file */
  const uint8_t *data; /* the packet's bytes (the TracePacket message) */
  size_t len;

  /* kind == PT_PKT_TRACK */
  struct {
    uint64_t uuid, parent_uuid;
    const char *name; /* TrackDescriptor.name, else the thread or process name, else "" */
    bool is_process, is_thread, is_counter;
    int32_t pid, tid; /* process: pid; thread: pid and tid */
    const char *process_name, *thread_name; /* "" when absent */
    /* CounterDescriptor: unit (1 ns, 2 count, 3 bytes; 0 unset), unit_name
       ("" when absent), is_incremental */
    int counter_unit;
    const char *counter_unit_name;
    bool counter_incremental;
    const char *const *labels; /* ProcessDescriptor.process_labels */
    size_t n_labels;
  } track;

  /* kind == PT_PKT_EVENT */
  struct {
    int type;       /* PT_EV_* (0 unspecified) */
    uint64_t track; /* track_uuid, else the sequence's default (0: none) */
    const char *name;     /* "" for a slice end */
    const char *category; /* first category, "" if none */
    const struct pt_annot *annots;
    size_t n_annots;
    const uint64_t *flow_ids, *terminating_flow_ids;
    size_t n_flows, n_terminating;
    bool has_counter, counter_is_double;
    int64_t counter_int;
    double counter_double;
  } event;

  /* kind == PT_PKT_SAMPLE */
  struct {
    uint32_t cpu;
    int32_t pid, tid;
    uint64_t callstack_iid; /* resolve with pt_reader_callstack(seq_id) */
    uint64_t hz; /* the sequence's sampling rate (perf_sample_defaults), 0: not said */
  } sample;

  /* kind == PT_PKT_CLOCK */
  struct {
    const struct pt_read_clock *clocks;
    size_t n;
    uint32_t primary; /* 0: not set */
  } clock;
};

/* A frame of an interned callstack, innermost first. */
struct pt_frame {
  const char *function; /* "" when the frame has no name */
  const char *mapping;  /* the mapping's path ("" unknown) */
  const char *build_id; /* hex, "" unknown */
  uint64_t rel_pc;
};

struct pt_track_info {
  uint64_t uuid, parent_uuid;
  int32_t pid, tid; /* tid 0: not a thread track */
  bool is_process, is_counter;
  const char *name;
};

struct pt_reader;

/* Flags of pt_reader_open. */
enum {
  PT_READ_RAW = 1, /* decode only seq_id, flags, ts: for copying packets */
};

/* NULL on failure with one line (no prefix) in err. */
PT_READ_API struct pt_reader *pt_reader_open(const char *path, unsigned flags, char *err,
                                             size_t errlen);
/* A reader of a buffer the caller keeps alive until close (fuzzing, tests). */
PT_READ_API struct pt_reader *pt_reader_open_mem(const void *data, size_t len, unsigned flags);
/* 1: *p filled; 0: end of file; -1: the file is corrupt or truncated, or
 * a read failed (pt_reader_error says what and where; the packets
 * before stay good). */
PT_READ_API int pt_reader_next(struct pt_reader *r, struct pt_packet *p);
PT_READ_API const char *pt_reader_error(const struct pt_reader *r);
/* Frames of callstack `iid` interned on sequence `seq_id`, innermost
 * first; returns the depth (may exceed max: only max are filled), 0 when
 * unknown. */
PT_READ_API size_t pt_reader_callstack(struct pt_reader *r, uint32_t seq_id, uint64_t iid,
                                       struct pt_frame *out, size_t max);
/* A track seen so far by its uuid (NULL: not seen). */
PT_READ_API const struct pt_track_info *pt_reader_track(struct pt_reader *r, uint64_t uuid);
/* Bytes read so far, packets returned. */
PT_READ_API uint64_t pt_reader_offset(const struct pt_reader *r);
PT_READ_API uint64_t pt_reader_packets(const struct pt_reader *r);
PT_READ_API void pt_reader_close(struct pt_reader *r);

/* ---- protobuf wire primitives (also used by merge) ---- */
struct pt_pb_field {
  uint32_t num;
  uint8_t wire;   /* 0 varint, 1 fixed64, 2 bytes, 5 fixed32 */
  uint64_t v;     /* varint / fixed value */
  const uint8_t *p; /* wire 2: the bytes */
  size_t len;
  const uint8_t *start; /* the whole field, key included */
  const uint8_t *end;
};
/* Next field of [*pos, end): 1 read (pos advanced), 0 at end, -1 malformed. */
PT_READ_API int pt_pb_next(const uint8_t **pos, const uint8_t *end, struct pt_pb_field *f);
/* The same, inline for the common case (one-byte key, one-byte varint
 * or length): the hot loop of reading and merging. */
static inline int pt_pb_next_fast(const uint8_t **pos, const uint8_t *end,
                                  struct pt_pb_field *f) {
  const uint8_t *p = *pos;
  if (p + 2 < end && p[0] < 0x80 && p[0] >= 8 && p[1] < 0x80) {
    uint8_t wire = p[0] & 7;
    if (wire == 0 || (wire == 2 && (size_t)(end - p - 2) >= p[1])) {
      f->start = p;
      f->num = p[0] >> 3;
      f->wire = wire;
      if (wire == 0) {
        f->v = p[1];
        f->p = NULL;
        f->len = 0;
        f->end = p + 2;
      } else {
        f->v = 0;
        f->p = p + 2;
        f->len = p[1];
        f->end = p + 2 + p[1];
      }
      *pos = f->end;
      return 1;
    }
  }
  return pt_pb_next(pos, end, f);
}

#endif /* PT_READ_H */
