/* The recording: what a traced process leaves in its output folder while
 * it runs, read by whoever finishes the run (the process itself at exit,
 * else `xptrace` after the program ends, else `xptrace finish`).
 *
 * One file, events.xprec, shared-mapped by the recorder: a header, then
 * a fixed number of chunks (the buffer budget).  Each chunk holds whole
 * records; its `committed` word says how many bytes of it are complete.
 * Policy flush: a thread of the recorder copies every sealed chunk to the
 * end of events.xprec-spill (one entry per chunk image) and frees it for
 * reuse; policy ring: chunks are taken back from their owners, oldest
 * first.  The process may die at any instant (signal, _exit, SIGKILL,
 * crash): the two files then hold every record committed before, and
 * nothing has to be done at signal time.  A chunk both spilled and still
 * sealed in the ring (death between the two steps) is read once: its
 * generation number tells.
 *
 * Records carry values only (ids, times, copies of names), never a
 * pointer into the process: trace point names, files and metadata travel
 * as description records in dictionary chunks, which are never reused.
 * Records of a thread come in segments, each opened by a thread record
 * (pid, tid, segment number, name); a chunk can hold segments of several
 * threads one after the other (a thread that ends passes its chunk on). */
#ifndef XPT_REC_H
#define XPT_REC_H

#include <stdatomic.h>
#include <stdint.h>

#define XPT_REC_FILE "events.xprec"
#define XPT_REC_SPILL_SUFFIX "-spill"
#define XPT_REC_SPILL_MAGIC 0x4c4c495053505821ull /* "!XPSPILL" */
#define XPT_REC_MAGIC 0x3143455254505821ull /* "!XPTREC1" */
#define XPT_REC_VERSION 2u
#define XPT_REC_CHUNK_MAGIC 0x4b4e4843u /* "CHNK" */
#define XPT_REC_HEADER_SIZE 32768u
#define XPT_REC_NAME_LEN 48u /* stream and tool names, terminated */
#define XPT_REC_STREAMS_OFF 4096u
#define XPT_REC_TOOLS_OFF (XPT_REC_STREAMS_OFF + 256u * XPT_REC_NAME_LEN)

enum xpt_rec_state { XPT_REC_RECORDING = 1, XPT_REC_FINISHING = 2, XPT_REC_DONE = 3 };
enum xpt_rec_policy { XPT_REC_FLUSH = 0, XPT_REC_RING = 1 };
enum xpt_rec_clock { XPT_REC_CLOCK_MONOTONIC = 0, XPT_REC_CLOCK_TSC = 1 };
enum xpt_rec_format { XPT_REC_FORMAT_PROTO = 0, XPT_REC_FORMAT_JSON = 1 };

struct xpt_rec_header {
  uint64_t magic;
  uint32_t version, header_size;
  uint32_t chunk_size; /* bytes, header included; a multiple of the page size */
  uint32_t policy;
  uint32_t clock;
  uint32_t format;
  uint32_t annotate_all;
  int32_t pid, ppid;
  uint32_t forked; /* a forked child of a traced process */
  uint64_t max_chunks;             /* the chunks of the file */
  uint64_t start_ns;               /* CLOCK_MONOTONIC at set-up */
  uint64_t tsc_base, tsc_base_ns;  /* a (TSC, MONOTONIC ns) pair at set-up */
  _Atomic uint64_t chunks_used;    /* ring: chunks handed out; flush: chunks
                                      reserved (none past them was written: a
                                      reader stops there, as a hole read
                                      through a tmpfs mapping is a SIGBUS on a
                                      full one); 0: the whole file */
  _Atomic uint64_t dropped;        /* records that could not be written */
  _Atomic uint64_t gen;            /* chunk (re)use counter */
  _Atomic uint32_t state;
  _Atomic uint32_t disk_full;      /* spill failed: 1 write error (full disk),
                                      2 the program closed its descriptor,
                                      3 XPTRACE_MAX_SIZE reached */
  _Atomic uint64_t spilled;        /* bytes of whole entries in the spill file */
  char program[64];
  _Atomic uint8_t stream_named[256]; /* 1 once the stream's name is written */
  _Atomic uint8_t tool_named[256];
};
_Static_assert(sizeof(struct xpt_rec_header) <= XPT_REC_STREAMS_OFF, "header fits");
_Static_assert(XPT_REC_TOOLS_OFF + 256u * XPT_REC_NAME_LEN <= XPT_REC_HEADER_SIZE, "tables fit");

enum xpt_rec_chunk_kind { XPT_REC_CHUNK_EVENTS = 1, XPT_REC_CHUNK_DICT = 2 };

enum xpt_rec_chunk_state { XPT_REC_FREE = 0, XPT_REC_ACTIVE = 1, XPT_REC_SEALED = 2 };

struct xpt_rec_chunk {
  uint32_t magic;
  uint32_t kind;
  _Atomic uint32_t committed; /* bytes of complete records after the header */
  _Atomic uint32_t state;     /* FREE: its contents are stale (spilled) */
  _Atomic uint64_t gen; /* when it was last (re)started */
  uint64_t reserved2;
};
_Static_assert(sizeof(struct xpt_rec_chunk) == 32, "chunk header");

/* A spill entry: this, then `bytes` bytes of a chunk image (its header
 * and committed records). */
struct xpt_rec_spill {
  uint64_t magic;
  uint64_t gen;
  uint32_t bytes;
  uint32_t index;
};

/* One record: 32 bytes then `len` inline bytes, padded to 8.  In the file
 * `uid` is the trace point's universal id; a reader may replace it in
 * its private copy (the encoders keep a pointer in its place). */
struct xpt_rec_raw {
  uint64_t ts; /* TSC ticks or MONOTONIC ns (header.clock) */
  uint64_t uid;
  uint64_t instance;
  uint16_t type;
  uint8_t stream;
  uint8_t kind; /* enum xpt_rec_kind */
  uint32_t len;
};
_Static_assert(sizeof(struct xpt_rec_raw) == 32, "record layout");

enum xpt_rec_kind {
  XPT_REC_EVENT = 0,  /* inline: a name when the event was NULL or had no uid */
  XPT_REC_TIMED = 1,  /* inline: struct xpt_rec_timed, track name, name */
  XPT_REC_EDGE = 2,   /* inline: struct xpt_rec_edge */
  XPT_REC_DESC = 3,   /* a trace point's description: struct xpt_rec_desc ... */
  XPT_REC_THREAD = 4, /* segment start: uid = pid << 32 | tid, instance = segment
                         number, inline: the thread's name */
};

static inline uint32_t xpt_rec_size(uint32_t len) {
  return (uint32_t)sizeof(struct xpt_rec_raw) + ((len + 7u) & ~7u);
}

/* The compact form of the commonest record (function tracing writes two
 * per call): an event with instance 0, no inline bytes and a uid below
 * 2^40, in 16 bytes.  Word 0 is the timestamp with bit 63 set (no clock
 * value reaches it); word 1 is uid | type << 40 | stream << 56. */
#define XPT_REC_COMPACT_BIT (1ull << 63)
#define XPT_REC_COMPACT_UID_MAX ((1ull << 40) - 1)
#define XPT_REC_COMPACT_SIZE 16u
#define XPT_REC_MIN_SIZE XPT_REC_COMPACT_SIZE

/* Reads the record at p (avail bytes left, at least XPT_REC_MIN_SIZE)
 * into its full form; returns its size in the chunk, or 0 when its fixed
 * part does not fit (the caller also checks the size against avail). */
static inline uint32_t xpt_rec_read(const uint8_t *p, uint32_t avail, struct xpt_rec_raw *r) {
  uint64_t w0, w1;
  __builtin_memcpy(&w0, p, 8);
  if (w0 & XPT_REC_COMPACT_BIT) {
    __builtin_memcpy(&w1, p + 8, 8);
    *r = (struct xpt_rec_raw){w0 & ~XPT_REC_COMPACT_BIT, w1 & XPT_REC_COMPACT_UID_MAX, 0,
                              (uint16_t)(w1 >> 40), (uint8_t)(w1 >> 56), XPT_REC_EVENT, 0};
    return XPT_REC_COMPACT_SIZE;
  }
  if (avail < sizeof *r)
    return 0;
  __builtin_memcpy(r, p, sizeof *r);
  return xpt_rec_size(r->len);
}

struct xpt_rec_timed {
  uint64_t begin_ns, end_ns, track_id;
  uint16_t track_name_len, name_len;
  uint32_t unused;
};
struct xpt_rec_edge {
  uint64_t source_instance, target_instance;
};

/* A description: this, then name, source file, then meta_count entries
 * of struct xpt_rec_meta each followed by its key and value bytes. */
struct xpt_rec_desc {
  uint64_t source_id, target_id;
  uint64_t payload_flags, event_flags;
  uint32_t line, column;
  uint16_t event_type, activity_type;
  uint16_t name_len, file_len;
  uint32_t meta_count;
  uint32_t meta_len;
};
struct xpt_rec_meta {
  uint16_t key_len;
  uint8_t value_type;
  uint8_t unused;
  uint32_t value_len;
};
/* Bounds that keep every description well inside one chunk. */
#define XPT_REC_DESC_STR_MAX 1024u
#define XPT_REC_DESC_META_MAX 4096u
#define XPT_REC_CHUNK_MIN 8192u

#endif /* XPT_REC_H */
