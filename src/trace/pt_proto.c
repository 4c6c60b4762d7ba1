/* Perfetto protobuf encoder.  Field numbers are those of the Perfetto
 * trace format (protos/perfetto/trace/...); tests/perfetto/perfetto_min.proto
 * lists every field written here. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pt_common.h"
#include "xpt_collector.h"

enum {
  TRACE_PACKET = 1,
  /* TracePacket */
  TP_CLOCK_SNAPSHOT = 6,
  TP_TIMESTAMP = 8,
  TP_TRUSTED_SEQ = 10,
  TP_TRACK_EVENT = 11,
  TP_INTERNED = 12,
  TP_SEQ_FLAGS = 13,
  TP_TS_CLOCK = 58,
  TP_DEFAULTS = 59,
  TP_TRACK_DESCRIPTOR = 60,
  SEQ_CLEARED = 1,
  /* TracePacketDefaults / TrackEventDefaults */
  DEF_TS_CLOCK = 58,
  DEF_TRACK_EVENT = 11,
  TED_TRACK_UUID = 11,
  /* ClockSnapshot */
  CS_CLOCKS = 1,
  CS_PRIMARY = 2,
  CLK_ID = 1,
  CLK_TS = 2,
  CLK_INCREMENTAL = 3,
  CLOCK_MONOTONIC_ID = 3,
  CLOCK_BOOTTIME_ID = 6,
  CLOCK_SEQ_INCREMENTAL = 64,
  /* TrackDescriptor */
  TD_UUID = 1,
  TD_NAME = 2,
  TD_PROCESS = 3,
  TD_THREAD = 4,
  TD_PARENT = 5,
  PD_PID = 1,
  PD_NAME = 6,
  PD_LABELS = 8,
  THD_PID = 1,
  THD_TID = 2,
  THD_NAME = 5,
  /* TrackEvent */
  TE_CATEGORY_IIDS = 3,
  TE_ANNOTATIONS = 4,
  TE_TYPE = 9,
  TE_NAME_IID = 10,
  TE_TRACK_UUID = 11,
  TE_CATEGORIES = 22,
  TE_NAME = 23,
  TE_FLOW_IDS = 47,
  TE_TERMINATING_FLOW_IDS = 48,
  TYPE_SLICE_BEGIN = 1,
  TYPE_SLICE_END = 2,
  TYPE_INSTANT = 3,
  /* DebugAnnotation */
  DA_NAME_IID = 1,
  DA_BOOL = 2,
  DA_UINT = 3,
  DA_INT = 4,
  DA_DOUBLE = 5,
  DA_STRING = 6,
  DA_NAME = 10,
  /* InternedData: each entry is {iid = 1, name = 2} */
  ID_CATEGORIES = 1,
  ID_EVENT_NAMES = 2,
  ID_ANNOTATION_NAMES = 3,
  INTERNED_IID = 1,
  INTERNED_NAME = 2,
};

enum { BIT_NAME = 1, BIT_CATEGORY = 2, BIT_ANNOTATION = 4 };

/* Sequence ids cost a varint on every packet: the first process uses
 * 1 (writer) and 2..127 (threads), one byte each.  A forked child, and
 * threads past the 126th, use ids made from the pid (distinct from its
 * parent's, for a merge tool). */
static uint32_t pt_pid_seq(uint32_t index) {
  return ((((uint32_t)pt_proc.pid & 0x7fff) + 1) << 16) | (index & 0xffff);
}
static uint32_t pt_writer_seq(void) { return pt_proc.forked ? pt_pid_seq(0) : 1; }
static uint32_t pt_thread_seq(const struct pt_thread *t) {
  return !pt_proc.forked && t->index < 127 ? t->index + 1 : pt_pid_seq(t->index);
}

/* The sequence the common way of compact records knows (see proto_compact). */
static uint32_t pt_fast_gen = 1;

static uint64_t pt_clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pb_clock(struct pt_buf *b, uint32_t id, uint64_t ts, bool incremental) {
  size_t m = pb_open(b, CS_CLOCKS);
  pb_uint(b, CLK_ID, id);
  pb_uint(b, CLK_TS, ts);
  if (incremental)
    pb_uint(b, CLK_INCREMENTAL, 1);
  pb_close(b, m);
}

/* The writer's own sequence: clocks, the process track. */
static void proto_begin_file(struct pt_buf *b) {
  uint64_t mono = pt_clock_ns(CLOCK_MONOTONIC), boot = pt_clock_ns(CLOCK_BOOTTIME);
  size_t p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TIMESTAMP, mono);
  pb_uint(b, TP_TS_CLOCK, CLOCK_MONOTONIC_ID);
  pb_uint(b, TP_TRUSTED_SEQ, pt_writer_seq());
  pb_uint(b, TP_SEQ_FLAGS, SEQ_CLEARED);
  size_t cs = pb_open(b, TP_CLOCK_SNAPSHOT);
  pb_clock(b, CLOCK_BOOTTIME_ID, boot, false);
  pb_clock(b, CLOCK_MONOTONIC_ID, mono, false);
  pb_uint(b, CS_PRIMARY, CLOCK_MONOTONIC_ID);
  pb_close(b, cs);
  pb_close(b, p);

  p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TRUSTED_SEQ, pt_writer_seq());
  size_t td = pb_open(b, TP_TRACK_DESCRIPTOR);
  pb_uint(b, TD_UUID, pt_process_uuid());
  size_t pd = pb_open(b, TD_PROCESS);
  pb_uint(b, PD_PID, (uint64_t)pt_proc.pid);
  pb_string(b, PD_NAME, pt_proc.program);
  /* the host (the finisher runs where the process ran): `xptrace merge`
   * names processes of other hosts after it */
  char host[64 + 5] = "host=";
  if (gethostname(host + 5, sizeof host - 6) == 0 && host[5]) {
    host[sizeof host - 1] = '\0';
    pb_string(b, PD_LABELS, host);
  }
  pb_close(b, pd);
  pb_close(b, td);
  pb_close(b, p);

  /* The main thread, named after the program even when it records
   * nothing itself (Perfetto left it unnamed); the same track as its own
   * sequence's when it does. */
  p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TRUSTED_SEQ, pt_writer_seq());
  td = pb_open(b, TP_TRACK_DESCRIPTOR);
  struct pt_thread main_thread = {.pid = pt_proc.pid, .tid = pt_proc.pid};
  pb_uint(b, TD_UUID, pt_thread_uuid(&main_thread));
  pb_uint(b, TD_PARENT, pt_process_uuid());
  size_t th = pb_open(b, TD_THREAD);
  pb_uint(b, THD_PID, (uint64_t)pt_proc.pid);
  pb_uint(b, THD_TID, (uint64_t)pt_proc.pid);
  pb_string(b, THD_NAME, pt_thread_name(&main_thread));
  pb_close(b, th);
  pb_close(b, td);
  pb_close(b, p);
}

/* First packets of a thread's sequence: defaults (incremental clock,
 * the thread's track), the clock snapshot that anchors it, the track. */
static void proto_seq_start(struct pt_buf *b, struct pt_thread *t, uint64_t t0) {
  pt_seq_reset(&t->seq);
  t->seq.started = true;
  pt_fast_gen++; /* what the common way knew was the last sequence's */
  t->seq.seq_id = pt_thread_seq(t);
  t->seq.last_ts = t0;
  size_t p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TIMESTAMP, t0);
  pb_uint(b, TP_TS_CLOCK, CLOCK_MONOTONIC_ID);
  pb_uint(b, TP_TRUSTED_SEQ, t->seq.seq_id);
  pb_uint(b, TP_SEQ_FLAGS, SEQ_CLEARED);
  size_t d = pb_open(b, TP_DEFAULTS);
  pb_uint(b, DEF_TS_CLOCK, CLOCK_SEQ_INCREMENTAL);
  size_t ted = pb_open(b, DEF_TRACK_EVENT);
  pb_uint(b, TED_TRACK_UUID, pt_thread_uuid(t));
  pb_close(b, ted);
  pb_close(b, d);
  size_t cs = pb_open(b, TP_CLOCK_SNAPSHOT);
  pb_clock(b, CLOCK_SEQ_INCREMENTAL, t0, true);
  pb_clock(b, CLOCK_MONOTONIC_ID, t0, false);
  pb_close(b, cs);
  pb_close(b, p);

  p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TRUSTED_SEQ, t->seq.seq_id);
  size_t td = pb_open(b, TP_TRACK_DESCRIPTOR);
  pb_uint(b, TD_UUID, pt_thread_uuid(t));
  pb_uint(b, TD_PARENT, pt_process_uuid());
  size_t th = pb_open(b, TD_THREAD);
  pb_uint(b, THD_PID, (uint64_t)t->pid);
  pb_uint(b, THD_TID, (uint64_t)t->tid);
  pb_string(b, THD_NAME, pt_thread_name(t));
  pb_close(b, th);
  pb_close(b, td);
  pb_close(b, p);
}

/* Whether string id has been interned as `bit` on this sequence; marks it. */
static bool pt_seq_interned(struct pt_seq *s, uint32_t id, uint8_t bit) {
  if (id >= s->interned_cap) {
    size_t cap = s->interned_cap ? s->interned_cap : 256;
    while (cap <= id)
      cap *= 2;
    uint8_t *p = realloc(s->interned, cap);
    if (!p)
      return true; /* cannot track: the caller writes the name inline */
    memset(p + s->interned_cap, 0, cap - s->interned_cap);
    s->interned = p;
    s->interned_cap = cap;
  }
  bool had = s->interned[id] & bit;
  s->interned[id] |= bit;
  return had;
}

static void pb_interned(struct pt_buf *b, size_t *mark, uint32_t field, uint32_t id,
                        const char *name) {
  if (*mark == SIZE_MAX)
    *mark = pb_open(b, TP_INTERNED);
  size_t e = pb_open(b, field);
  pb_uint(b, INTERNED_IID, id);
  pb_string(b, INTERNED_NAME, name);
  pb_close(b, e);
}

static void pb_annotation_value(struct pt_buf *b, const struct pt_arg *a) {
  switch (a->kind) {
  case PT_ARG_UINT:
    pb_uint(b, DA_UINT, a->u);
    break;
  case PT_ARG_INT:
    pb_sint(b, DA_INT, a->i);
    break;
  case PT_ARG_DOUBLE:
    pb_double(b, DA_DOUBLE, a->d);
    break;
  case PT_ARG_BOOL:
    pb_uint(b, DA_BOOL, a->u);
    break;
  case PT_ARG_STR:
    pb_string(b, DA_STRING, a->s);
    break;
  }
}

/* ---- the packets of thread records ---------------------------------- */
/* Packets carry no sequence_flags after the first: the trace processor
 * reads interned data and defaults of a sequence whatever the flags; the
 * flag SEQ_NEEDS_INCREMENTAL_STATE only makes it skip packets written
 * while the state is invalid, which never happens here (every sequence
 * starts with SEQ_INCREMENTAL_STATE_CLEARED). */

static inline uint8_t *w_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* A whole small packet: [packet [ts] [seq] [track_event [type] [name] [cat]]],
 * both lengths one byte (the caller checked the sizes). */
static void proto_small_packet(struct pt_buf *b, uint64_t delta, uint32_t seq, uint32_t type,
                               uint32_t name_id, uint32_t cat_id) {
  if (!pt_buf_reserve(b, 48))
    return;
  uint8_t *start = b->data + b->len, *p = start + 2;
  *p++ = TP_TIMESTAMP << 3;
  p = w_varint(p, delta);
  *p++ = TP_TRUSTED_SEQ << 3;
  p = w_varint(p, seq);
  *p++ = TP_TRACK_EVENT << 3 | 2;
  uint8_t *te = p++;
  *p++ = TE_TYPE << 3;
  *p++ = (uint8_t)type;
  if (name_id) {
    *p++ = TE_NAME_IID << 3;
    p = w_varint(p, name_id);
    *p++ = TE_CATEGORY_IIDS << 3;
    p = w_varint(p, cat_id);
  }
  *te = (uint8_t)(p - te - 1);
  start[0] = TRACE_PACKET << 3 | 2;
  start[1] = (uint8_t)(p - start - 2);
  b->len += (size_t)(p - start);
}

/* Flow starts waiting for the thread's next slice begin; the writer
 * encodes one thread at a time.  A flow's end is an instant of its own at
 * the moment the message arrived (see proto_thread_record). */
enum { PT_FLOWS_MAX = 32 };
static struct pt_flows {
  pid_t pid, tid;
  uint32_t n;
  uint64_t id[PT_FLOWS_MAX];
} pt_flows;

static void pt_flows_of(const struct pt_thread *t) {
  if (pt_flows.pid != t->pid || pt_flows.tid != t->tid)
    pt_flows = (struct pt_flows){.pid = t->pid, .tid = t->tid};
}

static void pb_flows_out(struct pt_buf *b) {
  for (uint32_t i = 0; i < pt_flows.n; i++)
    pb_fixed64(b, TE_FLOW_IDS, pt_flows.id[i]);
  pt_flows.n = 0;
}

/* ---- the common way of compact records (pt_encoder.compact) ---------- */
/* Function tracing writes two compact records per call: a begin of a
 * trace point, an end.  Once a sequence has written a trace point's begin
 * as a small packet (its name and category interned, its annotations
 * written), every later begin of it is the same bytes but the time: the
 * packet's tail after the timestamp is kept here, by the record's second
 * word (uid, type, stream), and copied.  An end's tail is the sequence's.
 * Entries belong to the sequence started last (pt_fast_gen). */
enum { PT_FAST_SLOTS = 1024, PT_TAIL_MAX = 24, PT_PACKET_MAX = 2 + 1 + 10 + PT_TAIL_MAX };
struct pt_fast_entry {
  uint64_t key; /* the compact record's word 1 */
  uint32_t gen;
  uint8_t len;
  uint8_t tail[PT_TAIL_MAX];
  const xpti_trace_event_data_t *event;
};
static struct pt_fast_entry pt_fast[PT_FAST_SLOTS];
static struct {
  uint32_t gen;
  uint8_t len;
  uint8_t tail[PT_TAIL_MAX];
} pt_fast_end;

static inline size_t pt_fast_slot(uint64_t key) {
  return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 54) & (PT_FAST_SLOTS - 1);
}

/* The tail of a small packet after its timestamp (proto_small_packet). */
static uint8_t pt_small_tail(uint8_t *p, uint32_t seq, uint32_t type, uint32_t name_id,
                             uint32_t cat_id) {
  uint8_t *q = p;
  *q++ = TP_TRUSTED_SEQ << 3;
  q = w_varint(q, seq);
  *q++ = TP_TRACK_EVENT << 3 | 2;
  uint8_t *te = q++;
  *q++ = TE_TYPE << 3;
  *q++ = (uint8_t)type;
  if (name_id) {
    *q++ = TE_NAME_IID << 3;
    q = w_varint(q, name_id);
    *q++ = TE_CATEGORY_IIDS << 3;
    q = w_varint(q, cat_id);
  }
  *te = (uint8_t)(q - te - 1);
  return (uint8_t)(q - p);
}

/* A begin of r->event was just written as a small packet on t's sequence:
 * later ones of the same compact word take the common way. */
static void pt_fast_learn(const struct pt_thread *t, const struct pt_rec *r, uint32_t name_id,
                          uint32_t cat_id) {
  uint64_t uid = r->event ? r->event->unique_id : 0;
  if (!uid || uid > XPT_REC_COMPACT_UID_MAX || r->instance || r->name_len)
    return;
  uint64_t key = uid | (uint64_t)r->type << 40 | (uint64_t)r->stream << 56;
  struct pt_fast_entry *e = &pt_fast[pt_fast_slot(key)];
  e->key = key;
  e->gen = pt_fast_gen;
  e->event = r->event;
  e->len = pt_small_tail(e->tail, t->seq.seq_id, TYPE_SLICE_BEGIN, name_id, cat_id);
}

static size_t proto_compact(struct pt_buf *b, struct pt_thread *t, const uint8_t *p, size_t n) {
  struct pt_seq *seq = &t->seq;
  if (!seq->started || seq->last_ts > t->last_ns || b->len >= PT_OUT_FLUSH ||
      !pt_buf_reserve(b, PT_OUT_FLUSH - b->len + PT_PACKET_MAX))
    return 0;
  pt_flows_of(t);
  if (pt_fast_end.gen != pt_fast_gen) {
    pt_fast_end.gen = pt_fast_gen;
    pt_fast_end.len = pt_small_tail(pt_fast_end.tail, seq->seq_id, TYPE_SLICE_END, 0, 0);
  }
  /* Locals only: the byte stores below may alias any global. */
  const bool slices = pt_slices_on, flows = pt_flows.n != 0;
  const uint32_t gen = pt_fast_gen;
  const uint8_t *const kinds = pt_kind_table;
  const struct pt_fast_entry *const fast = pt_fast;
  const uint8_t *const end_tail = pt_fast_end.tail;
  const uint8_t end_len = pt_fast_end.len;
  const struct pt_rclock clock = pt_rclock;
  uint64_t last_ns = t->last_ns, last_ts = seq->last_ts;
  uint8_t *q = b->data + b->len, *const full = b->data + PT_OUT_FLUSH;
  const uint8_t *r = p, *const rend = p + n / XPT_REC_COMPACT_SIZE * XPT_REC_COMPACT_SIZE;
  while (r < rend && q < full) {
    /* As many records as fit below `full` + PT_PACKET_MAX whatever their
     * packets' sizes: no bound to check inside. */
    size_t room = (size_t)(full - q) / PT_PACKET_MAX + 1;
    const uint8_t *stop = (size_t)(rend - r) / XPT_REC_COMPACT_SIZE > room
                              ? r + room * XPT_REC_COMPACT_SIZE
                              : rend;
    for (; r < stop; r += XPT_REC_COMPACT_SIZE) {
      uint64_t w0, w1;
      memcpy(&w0, r, 8);
      memcpy(&w1, r + 8, 8);
      if (!(w0 & XPT_REC_COMPACT_BIT))
        goto out;
      uint16_t type = (uint16_t)(w1 >> 40);
      uint8_t k = kinds[type];
      if (__builtin_expect(!k, 0))
        k = pt_kind_fill(type);
      const uint8_t *tail;
      uint8_t len;
      const xpti_trace_event_data_t *event = NULL;
      if ((k & 0x0f) == PT_KIND_END) { /* no flow mark */
        tail = end_tail;
        len = end_len;
      } else {
        const struct pt_fast_entry *e = &fast[pt_fast_slot(w1)];
        if ((k & 0x0f) != PT_KIND_BEGIN || flows || e->key != w1 || e->gen != gen)
          goto out;
        tail = e->tail;
        len = e->len;
        event = e->event;
      }
      int64_t ns = (int64_t)(w0 & ~XPT_REC_COMPACT_BIT);
      if (clock.tsc)
        ns = (int64_t)clock.base_ns +
             (int64_t)((double)(int64_t)((uint64_t)ns - clock.base) * clock.ns_per_tick);
      ns += clock.skew_ns;
      uint64_t ts = ns > 0 ? (uint64_t)ns : 0; /* pt_rclock_ns */
      ts = ts < last_ns ? last_ns : ts;
      last_ns = ts;
      uint64_t delta = ts - last_ts; /* last_ts <= last_ns <= ts */
      last_ts = ts;
      uint8_t *start = q;
      q += 2;
      *q++ = TP_TIMESTAMP << 3;
      q = w_varint(q, delta);
      memcpy(q, tail, 16);
      if (__builtin_expect(len > 16, 0))
        memcpy(q + 16, tail + 16, PT_TAIL_MAX - 16);
      q += len;
      start[0] = TRACE_PACKET << 3 | 2;
      start[1] = (uint8_t)(q - start - 2);
      if (slices) {
        struct pt_rec rec = {.ts = ts, .event = event, .type = type, .stream = (uint8_t)(w1 >> 56)};
        pt_slices_record(&rec, ts);
      }
    }
  }
out:
  b->len = (size_t)(q - b->data);
  t->last_ns = last_ns;
  seq->last_ts = last_ts;
  return (size_t)(r - p) / XPT_REC_COMPACT_SIZE;
}

static void proto_thread_record(struct pt_buf *b, struct pt_thread *t, const struct pt_rec *r,
                                uint64_t ts) {
  int flow = pt_flow_fast(r->type);
  pt_flows_of(t);
  /* A flow start binds to the slice the thread begins next (a send).  A
   * flow end is drawn as an instant inside the receiving slice, at the
   * time it arrived: Perfetto draws an arrow from the earlier-starting of
   * its two slices, and a blocking receive starts before its send. */
  if (flow == 1 || (flow && !r->instance)) {
    if (r->instance && pt_flows.n < PT_FLOWS_MAX)
      pt_flows.id[pt_flows.n++] = r->instance;
    return;
  }
  if (!t->seq.started)
    proto_seq_start(b, t, ts);
  struct pt_seq *seq = &t->seq;
  enum pt_kind kind = pt_kind_fast(r->type);
  uint64_t delta = ts >= seq->last_ts ? ts - seq->last_ts : 0;
  seq->last_ts += delta;
  if (kind == PT_KIND_END) {
    proto_small_packet(b, delta, seq->seq_id, TYPE_SLICE_END, 0, 0);
    return;
  }
  bool flows_out = kind == PT_KIND_BEGIN && pt_flows.n;
  uint32_t type = kind == PT_KIND_BEGIN ? TYPE_SLICE_BEGIN : TYPE_INSTANT;

  /* The name: cached per trace point, else looked up. */
  char namebuf[PT_NAME_MAX + 1];
  const char *name = NULL;
  uint32_t name_id = 0;
  bool new_name = false, fresh = false;
  struct pt_seen *seen = r->event ? pt_seq_seen(seq, r->event, &fresh) : NULL;
  const char *payload_name = NULL;
  if (r->event && r->event->reserved.payload)
    payload_name = r->event->reserved.payload->name;
  if (seen && !fresh && seen->name == payload_name && seen->name_id) {
    name_id = seen->name_id; /* interned on this sequence when first seen */
  } else {
    name = pt_rec_name(r, namebuf, sizeof namebuf);
    name_id = pt_str_id(name, strlen(name));
    new_name = name_id && !pt_seq_interned(seq, name_id, BIT_NAME);
    if (seen) {
      seen->name = payload_name;
      seen->name_id = name_id;
    }
  }
  uint32_t cat_id = seq->cat_id[r->stream];
  const char *cat = NULL;
  bool new_cat = false;
  if (!cat_id) {
    cat = pt_stream_name(r->stream);
    cat_id = pt_str_id(cat, strlen(cat));
    new_cat = cat_id != 0;
    seq->cat_id[r->stream] = cat_id;
  }
  unsigned what = pt_args_wanted(seen, fresh, r->event);

  if (name_id && cat_id && !new_name && !new_cat && !what && !flows_out && !flow) {
    proto_small_packet(b, delta, seq->seq_id, type, name_id, cat_id);
    if (type == TYPE_SLICE_BEGIN && seen && !pt_annotate_all)
      pt_fast_learn(t, r, name_id, cat_id);
    return;
  }

  /* The general case: new interned strings, annotations. */
  if (!name)
    name = pt_rec_name(r, namebuf, sizeof namebuf);
  if (!cat)
    cat = pt_stream_name(r->stream);
  static struct pt_args args; /* the writer is serialised */
  uint32_t arg_ids[PT_ARGS_MAX];
  pt_collect_args(&args, r->event, r->instance, what);
  size_t p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TIMESTAMP, delta);
  pb_uint(b, TP_TRUSTED_SEQ, seq->seq_id);
  size_t interned = SIZE_MAX;
  if (new_name)
    pb_interned(b, &interned, ID_EVENT_NAMES, name_id, name);
  if (new_cat)
    pb_interned(b, &interned, ID_CATEGORIES, cat_id, cat);
  for (size_t i = 0; i < args.n; i++) {
    arg_ids[i] = pt_str_id(args.v[i].name, strlen(args.v[i].name));
    if (arg_ids[i] && !pt_seq_interned(seq, arg_ids[i], BIT_ANNOTATION))
      pb_interned(b, &interned, ID_ANNOTATION_NAMES, arg_ids[i], args.v[i].name);
  }
  if (interned != SIZE_MAX)
    pb_close(b, interned);
  size_t te = pb_open(b, TP_TRACK_EVENT);
  pb_uint(b, TE_TYPE, type);
  if (name_id)
    pb_uint(b, TE_NAME_IID, name_id);
  else
    pb_string(b, TE_NAME, name);
  if (cat_id)
    pb_uint(b, TE_CATEGORY_IIDS, cat_id);
  else
    pb_string(b, TE_CATEGORIES, cat);
  for (size_t i = 0; i < args.n; i++) {
    size_t da = pb_open(b, TE_ANNOTATIONS);
    if (arg_ids[i])
      pb_uint(b, DA_NAME_IID, arg_ids[i]);
    else
      pb_string(b, DA_NAME, args.v[i].name);
    pb_annotation_value(b, &args.v[i]);
    pb_close(b, da);
  }
  if (flows_out)
    pb_flows_out(b);
  if (flow)
    pb_fixed64(b, TE_TERMINATING_FLOW_IDS, r->instance);
  pb_close(b, te);
  pb_close(b, p);
}

/* Packets of the writer's sequence carry absolute MONOTONIC times and
 * plain (not interned) strings. */
static size_t proto_writer_instant(struct pt_buf *b, uint64_t ts, uint64_t track,
                                   const char *name, const char *cat, size_t *te) {
  size_t p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TIMESTAMP, ts);
  pb_uint(b, TP_TS_CLOCK, CLOCK_MONOTONIC_ID);
  pb_uint(b, TP_TRUSTED_SEQ, pt_writer_seq());
  *te = pb_open(b, TP_TRACK_EVENT);
  pb_uint(b, TE_TYPE, TYPE_INSTANT);
  pb_uint(b, TE_TRACK_UUID, track);
  pb_string(b, TE_NAME, name);
  pb_string(b, TE_CATEGORIES, cat);
  return p;
}

static void pb_plain_args(struct pt_buf *b, const struct pt_args *a) {
  for (size_t i = 0; i < a->n; i++) {
    size_t da = pb_open(b, TE_ANNOTATIONS);
    pb_string(b, DA_NAME, a->v[i].name);
    pb_annotation_value(b, &a->v[i]);
    pb_close(b, da);
  }
}

static uint64_t pt_edges_emitted;
static bool pt_graph_track_done;
static pid_t pt_graph_track_pid;

PT_HIDDEN void pt_json_reset(void);
void pt_encoders_reset(void) {
  pt_fast_gen++;
  pt_edges_emitted = 0;
  pt_graph_track_done = false;
  pt_json_reset();
}

static void proto_graph(struct pt_buf *b, struct pt_graph_rec *recs, size_t n) {
  struct pt_graph_links l;
  if (!pt_graph_link(recs, n, &l))
    return;
  if (!pt_graph_track_done || pt_graph_track_pid != pt_proc.pid) {
    pt_graph_track_done = true;
    pt_graph_track_pid = pt_proc.pid;
    pt_edges_emitted = 0;
    size_t p = pb_open(b, TRACE_PACKET);
    pb_uint(b, TP_TRUSTED_SEQ, pt_writer_seq());
    size_t td = pb_open(b, TP_TRACK_DESCRIPTOR);
    pb_uint(b, TD_UUID, pt_graph_uuid());
    pb_uint(b, TD_PARENT, pt_process_uuid());
    pb_string(b, TD_NAME, "graph");
    pb_close(b, td);
    pb_close(b, p);
  }
  static struct pt_args args;
  for (size_t i = 0; i < n; i++) {
    const struct pt_graph_rec *g = &recs[i];
    struct pt_rec r = {.ts = g->ts, .event = g->event, .instance = g->instance, .type = g->type,
                       .stream = g->stream};
    /* A linked edge: an instant of its target node at the edge's time,
     * ending the flow begun on its source node (see pt_graph_link). */
    bool edge = g->type == XPTI_TRACE_EDGE_CREATE && l.linked[i];
    const struct pt_graph_rec *target =
        edge ? &recs[pt_graph_node(recs, &l, g->event->target_id)] : NULL;
    if (target) {
      r.event = target->event;
      r.type = target->type;
    }
    char namebuf[PT_NAME_MAX + 1];
    const char *name = pt_rec_name(&r, namebuf, sizeof namebuf);
    size_t te;
    size_t p = proto_writer_instant(b, g->ts, pt_graph_uuid(), name, pt_stream_name(g->stream), &te);
    if (target)
      pt_edge_args(&args, g->event, g->instance, target->event);
    else
      pt_collect_args(&args, g->event, g->instance,
                      PT_ARGS_PROPS | (pt_annotate_all ? PT_ARGS_INSTANCE : 0));
    pb_plain_args(b, &args);
    for (size_t e = l.out_head[i]; e != SIZE_MAX; e = l.out_next[e])
      pb_fixed64(b, TE_FLOW_IDS, pt_flow_id(e, pt_edges_emitted));
    if (edge)
      pb_fixed64(b, TE_TERMINATING_FLOW_IDS, pt_flow_id(i, pt_edges_emitted));
    pb_close(b, te);
    pb_close(b, p);
  }
  pt_edges_emitted += n;
  pt_graph_unlink(&l);
}

static void proto_dropped(struct pt_buf *b, uint64_t count, uint64_t ts) {
  size_t te;
  size_t p = proto_writer_instant(b, ts, pt_process_uuid(), "xptrace: dropped events", "xptrace", &te);
  size_t da = pb_open(b, TE_ANNOTATIONS);
  pb_string(b, DA_NAME, "dropped");
  pb_uint(b, DA_UINT, count);
  pb_close(b, da);
  pb_close(b, te);
  pb_close(b, p);
}

/* Device lanes and slices go on the writer's sequence, absolute times. */
static void proto_device_lane(struct pt_buf *b, uint32_t track_index, uint32_t lane,
                              const char *name) {
  size_t p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TRUSTED_SEQ, pt_writer_seq());
  size_t td = pb_open(b, TP_TRACK_DESCRIPTOR);
  pb_uint(b, TD_UUID, pt_lane_uuid(track_index, lane));
  pb_uint(b, TD_PARENT, pt_process_uuid());
  pb_string(b, TD_NAME, name);
  pb_close(b, td);
  pb_close(b, p);
}

static void proto_device_end(struct pt_buf *b, uint32_t track_index, uint32_t lane,
                             uint64_t end) {
  size_t p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TIMESTAMP, end);
  pb_uint(b, TP_TS_CLOCK, CLOCK_MONOTONIC_ID);
  pb_uint(b, TP_TRUSTED_SEQ, pt_writer_seq());
  size_t te = pb_open(b, TP_TRACK_EVENT);
  pb_uint(b, TE_TYPE, TYPE_SLICE_END);
  pb_uint(b, TE_TRACK_UUID, pt_lane_uuid(track_index, lane));
  pb_close(b, te);
  pb_close(b, p);
}

static void proto_device_slice(struct pt_buf *b, const struct pt_dev_out *s) {
  uint64_t track = pt_lane_uuid(s->track_index, s->lane);
  static struct pt_args args; /* the writer is serialised */
  pt_collect_args(&args, s->event, s->instance, s->args);
  size_t p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TIMESTAMP, s->begin);
  pb_uint(b, TP_TS_CLOCK, CLOCK_MONOTONIC_ID);
  pb_uint(b, TP_TRUSTED_SEQ, pt_writer_seq());
  size_t te = pb_open(b, TP_TRACK_EVENT);
  pb_uint(b, TE_TYPE, TYPE_SLICE_BEGIN);
  pb_uint(b, TE_TRACK_UUID, track);
  pb_string(b, TE_NAME, s->name);
  pb_string(b, TE_CATEGORIES, s->cat);
  pb_plain_args(b, &args);
  for (size_t i = 0; i < s->n_out; i++)
    pb_fixed64(b, TE_FLOW_IDS, s->flows_out[i]);
  for (size_t i = 0; i < s->n_in; i++)
    pb_fixed64(b, TE_TERMINATING_FLOW_IDS, s->flows_in[i]);
  pb_close(b, te);
  pb_close(b, p);
  if (!s->end_later)
    proto_device_end(b, s->track_index, s->lane, s->end);
}

const struct pt_encoder pt_proto_encoder = {
    .begin_file = proto_begin_file,
    .thread_record = proto_thread_record,
    .graph = proto_graph,
    .dropped = proto_dropped,
    .device_lane = proto_device_lane,
    .device_slice = proto_device_slice,
    .device_end = proto_device_end,
    .compact = proto_compact,
    .trailer = NULL,
};
