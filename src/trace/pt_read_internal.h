/* Inside the Perfetto trace reader (pt_read.h), shared by its files:
 * pt_read.c (the reader: buffer, packets, callstacks), pt_read_wire.c
 * (protobuf primitives, the u64 map), pt_read_decode.c (what a packet
 * holds: interned data, clocks, events, tracks, samples). */
#ifndef PT_READ_INTERNAL_H
#define PT_READ_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pt_read.h"

#define PT_READ_HIDDEN __attribute__((visibility("hidden")))

enum {
  /* TracePacket */
  F_TIMESTAMP = 8,
  F_CLOCK_ID = 58,
  F_SEQ = 10,
  F_FLAGS = 13,
  F_INTERNED = 12,
  F_DEFAULTS = 59,
  F_CLOCK_SNAPSHOT = 6,
  F_TRACK_EVENT = 11,
  F_TRACK_DESCRIPTOR = 60,
  F_PERF_SAMPLE = 66,
  SEQ_CLEARED = 1,
  /* InternedData tables */
  IN_CATEGORY = 1,
  IN_EVENT_NAME = 2,
  IN_ANNOT_NAME = 3,
  IN_FUNCTION = 5,
  IN_FRAME = 6,
  IN_CALLSTACK = 7,
  IN_BUILD_ID = 16,
  IN_MAPPING_PATH = 17,
  IN_MAPPING = 19,
};

#define PT_READ_CHUNK (256u << 10)
#define PT_READ_MAX_PACKET (64u << 20)
#define PT_MAX_FRAMES 4096

/* ---- a u64-keyed hash map of pointers (pt_read_wire.c) ---- */
struct pt_map {
  uint64_t *keys;
  void **vals;
  size_t cap, n;
};
/* The value slot of key (added when `add`); NULL when absent or out of memory. */
PT_READ_HIDDEN void **rd_map_slot(struct pt_map *m, uint64_t key, bool add);
PT_READ_HIDDEN void *rd_map_get(const struct pt_map *m, uint64_t key);
/* Frees the table, and each value with fn when not NULL. */
PT_READ_HIDDEN void rd_map_free(struct pt_map *m, void (*fn)(void *));
/* A varint of [*pos, end): 0, or -1 truncated or too long. */
PT_READ_HIDDEN int rd_varint(const uint8_t **pos, const uint8_t *end, uint64_t *v);

/* ---- per-sequence state ---- */
/* An interned entry: a string, a frame (a = function iid, b = mapping
 * iid, c = rel_pc), a callstack (list of frame iids) or a mapping
 * (list of path iids, a = build id iid). */
struct ient {
  char *str;
  uint64_t a, b, c;
  uint64_t *list;
  size_t nlist;
};

struct seq_clock {
  bool known, incremental;
  uint64_t last;       /* the clock's value (incremental: last absolute) */
  uint32_t anchor;     /* clock it was tied to by its snapshot */
  int64_t anchor_diff; /* anchor - value at the snapshot */
};

struct seq {
  struct pt_map interned; /* key: table << 56 ^ iid */
  uint32_t default_clock; /* 0: none */
  uint64_t default_track;
  uint64_t sample_hz; /* perf_sample_defaults.timebase.frequency (0: none) */
  /* Sequence-scoped clocks (ids 64..127), [0, nclocks) of them as the
   * highest id used asks: usually one (64).  A fixed 64 cost 2 KiB per
   * sequence: a trace of 70,000 threads took 72 MB to merge. */
  struct seq_clock *clocks;
  uint32_t nclocks;
};

struct track_ent {
  struct pt_track_info info;
  char *name;
};

struct pt_reader {
  int fd; /* -1: a memory reader */
  unsigned flags;
  uint8_t *buf;
  size_t cap, pos, fill; /* unconsumed bytes are buf[pos, fill) */
  bool own_buf, eof;
  uint64_t file_off; /* file offset of buf[0] */
  uint64_t packets;
  char error[256];
  struct pt_map seqs;
  struct pt_map tracks;
  /* global clocks: offset to the primary clock, from snapshots */
  uint32_t primary;
  bool global_known[64];
  int64_t global_to_primary[64];
  /* per-packet scratch */
  char *scratch;
  size_t scratch_cap, scratch_len;
  struct pt_annot *annots;
  size_t annots_cap;
  uint64_t *flows;
  size_t flows_cap, n_flows_total;
  struct pt_read_clock clocks[32];
  const char *labels[16];
};

/* The first error, kept (later ones are its consequences). */
PT_READ_HIDDEN void rd_fail(struct pt_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- decoding (pt_read_decode.c): 0, -1 out of memory, -2 malformed
 * unless said ---- */
/* The state of sequence id (made when new), NULL out of memory. */
PT_READ_HIDDEN struct seq *rd_seq(struct pt_reader *r, uint32_t id);
PT_READ_HIDDEN struct ient *rd_intern_get(struct seq *s, unsigned table, uint64_t iid);
/* An interned string, "" when unknown. */
PT_READ_HIDDEN const char *rd_intern_str(struct seq *s, unsigned table, uint64_t iid);
PT_READ_HIDDEN int rd_interned(struct pt_reader *r, struct seq *s, const uint8_t *p,
                               const uint8_t *end);
PT_READ_HIDDEN int rd_clock_snapshot(struct pt_reader *r, struct seq *s, const uint8_t *p,
                                     const uint8_t *end, struct pt_packet *pkt);
PT_READ_HIDDEN int rd_defaults(struct seq *s, const uint8_t *p, const uint8_t *end);
PT_READ_HIDDEN void rd_resolve_ts(struct pt_reader *r, struct seq *s, uint64_t raw,
                                  uint32_t clock, struct pt_packet *pkt);
PT_READ_HIDDEN int rd_event(struct pt_reader *r, struct seq *s, const uint8_t *p,
                            const uint8_t *end, struct pt_packet *pkt);
PT_READ_HIDDEN int rd_track(struct pt_reader *r, const uint8_t *p, const uint8_t *end,
                            struct pt_packet *pkt);
PT_READ_HIDDEN int rd_sample(const uint8_t *p, const uint8_t *end, struct pt_packet *pkt);

#endif /* PT_READ_INTERNAL_H */
