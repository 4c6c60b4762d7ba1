/* The merge of many processes' traces (pt_merge.h).  Each input packet
 * is copied field by field; only what names something across files is
 * rewritten:
 * - trusted_packet_sequence_id: a new id per (input, sequence), from 2
 *   (1 is the merge's own sequence);
 * - track uuids: mixed with the group's salt (a bijection: the uuids of a
 *   process stay distinct, and collide with another process's with odds
 *   of 2^-64), so two processes with the same pid never share a track;
 * - flow ids: mixed with the argument's salt (flows between processes of
 *   one run still join; flows of different runs never do), except those
 *   with bit 63 set, unique across runs by their producer (MPI messages);
 * - pids (and the tids of that process): kept, unless another process
 *   already has that pid (another host, a reused pid): then moved up by
 *   multiples of 2^22 (above any Linux pid); a joining input's process
 *   takes the pid its argument's own trace of that process got;
 * - the processes' global clock snapshots are left out: the merge writes
 *   one of its own first (MONOTONIC primary), since Perfetto wants the
 *   snapshots of one clock set in time order;
 * - timestamps, when the group has a time mapping (clock correction).
 * Field numbers are Perfetto's, as in pt_proto.c and pt_read.c. */
#include "pt_merge.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pt_internal.h"
#include "pt_read.h"

#define MERGE_FLUSH (1u << 20)
#define PID_STEP (1 << 22)

struct seq_out {
  uint32_t old_id, new_id; /* new_id 0: free slot */
  uint64_t last_out;       /* incremental clock: last time written (after mapping) */
};

struct pid_map {
  int32_t old_pid, new_pid;
};

/* A process track's pid in the output, by argument: what a joining
 * input's processes take. */
struct pid_claim {
  unsigned arg;
  int32_t old_pid, new_pid;
  uint64_t salt; /* of the group that described it: its track uuids */
};

struct merge {
  const struct pt_merge_opts *o;
  struct pt_merge_stats *st;
  int fd;
  bool write_failed;
  struct pt_buf out;
  uint32_t next_seq;
  /* every output pid in use (open addressing, 0 = free) */
  int32_t *pids_used;
  size_t pids_cap, pids_n;
  struct pid_claim *claims;
  size_t claims_n, claims_cap;
  char host[256];
  /* the current input */
  struct seq_out *seqs;
  size_t seqs_cap, seqs_n;
  /* the current input: its argument, and whether it joins (pt_merge.h) */
  unsigned arg;
  bool joins;
  /* the current group */
  const char *group;
  uint64_t group_salt, flow_salt;
  struct pid_map *gpids;
  size_t gpids_n, gpids_cap;
  pt_time_fn fn;
  const void *fn_ctx;
};

static void warn(struct merge *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct merge *m, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (m->o && m->o->warn)
    m->o->warn(m->o->ctx, line);
}

/* splitmix64's finaliser: a bijection of 64-bit values. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
static uint64_t hash_str(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
  return mix64(h);
}
static uint64_t map_uuid(const struct merge *m, uint64_t u) {
  if (!u)
    return 0;
  /* A joining input's tracks of a process another input of its argument
   * described (our uuids: pid << 32 | tid) are that input's tracks: one
   * process track per pid, not one per file (the samples trace of
   * `xptrace run --sample` made a second process of the same pid). */
  for (size_t i = 0; m->joins && i < m->claims_n; i++)
    if (m->claims[i].arg == m->arg && (uint64_t)(uint32_t)m->claims[i].old_pid == u >> 32)
      return mix64(u ^ m->claims[i].salt);
  return mix64(u ^ m->group_salt);
}
/* Ids with bit 63 set are unique across processes and runs already
 * (xptrace_protocol.h: the MPI layer's messages) and join processes of
 * different arguments: kept. */
static uint64_t map_flow(const struct merge *m, uint64_t f) {
  return f >> 63 ? f : mix64(f ^ m->flow_salt);
}

/* ---- output ------------------------------------------------------------- */
static void out_flush(struct merge *m, bool all) {
  if (m->out.len < (all ? 1 : MERGE_FLUSH) || m->write_failed)
    return;
  size_t done = 0;
  while (done < m->out.len) {
    ssize_t n = write(m->fd, m->out.data + done, m->out.len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      warn(m, "cannot write the merged trace: %s", n < 0 ? strerror(errno) : "short write");
      m->write_failed = true;
      break;
    }
    done += (size_t)n;
  }
  m->st->bytes_out += done;
  m->out.len = 0;
}

static void copy_field(struct pt_buf *b, const struct pt_pb_field *f) {
  pt_buf_bytes(b, f->start, (size_t)(f->end - f->start));
}

/* ---- pids --------------------------------------------------------------- */
static bool pid_used(struct merge *m, int32_t pid, bool add) {
  if (add && (m->pids_n + 1) * 2 >= m->pids_cap) {
    size_t cap = m->pids_cap ? m->pids_cap * 2 : 256;
    int32_t *t = calloc(cap, sizeof *t);
    if (!t)
      return false;
    for (size_t i = 0; i < m->pids_cap; i++) {
      if (!m->pids_used[i])
        continue;
      size_t j = mix64((uint64_t)m->pids_used[i]) & (cap - 1);
      while (t[j])
        j = (j + 1) & (cap - 1);
      t[j] = m->pids_used[i];
    }
    free(m->pids_used);
    m->pids_used = t;
    m->pids_cap = cap;
  }
  if (!m->pids_cap)
    return false;
  size_t j = mix64((uint64_t)pid) & (m->pids_cap - 1);
  while (m->pids_used[j]) {
    if (m->pids_used[j] == pid)
      return true;
    j = (j + 1) & (m->pids_cap - 1);
  }
  if (add) {
    m->pids_used[j] = pid;
    m->pids_n++;
  }
  return false;
}

/* The output pid of a process of the current group.  A process track
 * (`claim`) takes its pid, or a new one when another group has it; a
 * thread or a sample of a pid the group never described keeps it (a
 * samples trace written apart from its process's trace). */
static int32_t map_pid_claim(struct merge *m, int32_t pid, bool claim) {
  if (pid <= 0)
    return pid;
  for (size_t i = 0; i < m->gpids_n; i++)
    if (m->gpids[i].old_pid == pid)
      return m->gpids[i].new_pid;
  if (!claim)
    return pid;
  int32_t out = pid;
  bool joined = false;
  for (size_t i = 0; m->joins && i < m->claims_n && !joined; i++)
    if (m->claims[i].arg == m->arg && m->claims[i].old_pid == pid)
      out = m->claims[i].new_pid, joined = true;
  if (!joined) {
    while (pid_used(m, out, false) && out <= INT32_MAX - PID_STEP)
      out += PID_STEP;
    pid_used(m, out, true);
    if (m->claims_n == m->claims_cap) {
      size_t cap = m->claims_cap ? m->claims_cap * 2 : 16;
      struct pid_claim *c = realloc(m->claims, cap * sizeof *c);
      if (c)
        m->claims = c, m->claims_cap = cap;
    }
    if (m->claims_n < m->claims_cap)
      m->claims[m->claims_n++] = (struct pid_claim){m->arg, pid, out, m->group_salt};
  }
  if (m->gpids_n == m->gpids_cap) {
    size_t cap = m->gpids_cap ? m->gpids_cap * 2 : 8;
    struct pid_map *p = realloc(m->gpids, cap * sizeof *p);
    if (!p)
      return out;
    m->gpids = p;
    m->gpids_cap = cap;
  }
  m->gpids[m->gpids_n++] = (struct pid_map){pid, out};
  if (joined)
    return out; /* the process another input of the argument described */
  m->st->processes++;
  if (out != pid) {
    m->st->pids_moved++;
    warn(m, "%s: pid %d is another process's too: shown as %d", m->group, (int)pid, (int)out);
  }
  return out;
}
static int32_t map_pid(struct merge *m, int32_t pid) { return map_pid_claim(m, pid, false); }
/* A thread moves with its process. */
static int32_t map_tid(struct merge *m, int32_t pid, int32_t tid) {
  if (pid <= 0 || tid <= 0)
    return tid;
  int64_t moved = (int64_t)map_pid(m, pid) - pid;
  return (int32_t)(tid + moved);
}

/* ---- sequences ---------------------------------------------------------- */
static struct seq_out *seq_of(struct merge *m, uint32_t old_id) {
  for (size_t i = 0; i < m->seqs_n; i++)
    if (m->seqs[i].old_id == old_id)
      return &m->seqs[i];
  if (m->seqs_n == m->seqs_cap) {
    size_t cap = m->seqs_cap ? m->seqs_cap * 2 : 64;
    struct seq_out *p = realloc(m->seqs, cap * sizeof *p);
    if (!p)
      return NULL;
    m->seqs = p;
    m->seqs_cap = cap;
  }
  struct seq_out *s = &m->seqs[m->seqs_n++];
  *s = (struct seq_out){old_id, m->next_seq++, 0};
  return s;
}

/* ---- rewriting ---------------------------------------------------------- */
/* A nested message, its fields rewritten by `fn` (which copies what it
 * leaves alone); false when malformed. */
typedef bool (*field_fn)(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f,
                         void *ctx);
static bool rewrite_msg(struct merge *m, struct pt_buf *b, const struct pt_pb_field *outer,
                        field_fn fn, void *ctx) {
  size_t mark = pb_open(b, outer->num);
  const uint8_t *p = outer->p;
  struct pt_pb_field f;
  int rc;
  while ((rc = pt_pb_next_fast(&p, outer->p + outer->len, &f)) > 0)
    if (!fn(m, b, &f, ctx))
      return false;
  pb_close(b, mark);
  return rc == 0;
}

/* repeated uint64 of uuids, one or packed */
static void uuid_list(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f) {
  if (f->wire == 0) {
    pb_uint(b, f->num, map_uuid(m, f->v));
    return;
  }
  if (f->wire != 2) {
    copy_field(b, f);
    return;
  }
  size_t mark = pb_open(b, f->num);
  const uint8_t *p = f->p, *end = f->p + f->len;
  while (p < end) {
    uint64_t v = 0;
    unsigned shift = 0;
    while (p < end && shift < 64) {
      uint8_t c = *p++;
      v |= (uint64_t)(c & 0x7f) << shift;
      shift += 7;
      if (!(c & 0x80))
        break;
    }
    pb_varint(b, map_uuid(m, v));
  }
  pb_close(b, mark);
}

static bool event_field(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f, void *ctx) {
  (void)ctx;
  if (f->num == 11 && f->wire == 0)
    pb_uint(b, 11, map_uuid(m, f->v));
  else if (f->num == 31)
    uuid_list(m, b, f);
  else if ((f->num == 47 || f->num == 48) && f->wire == 1)
    pb_fixed64(b, f->num, map_flow(m, f->v));
  else if (f->num == 36 && f->wire == 0) /* flow_ids_old */
    pb_uint(b, 36, map_flow(m, f->v));
  else
    copy_field(b, f);
  return true;
}

/* Whether a TrackEvent names a track or a flow (else it is copied whole). */
static bool event_needs_rewrite(const struct pt_pb_field *outer) {
  const uint8_t *p = outer->p;
  struct pt_pb_field f;
  int rc;
  while ((rc = pt_pb_next_fast(&p, outer->p + outer->len, &f)) > 0)
    if (f.num == 11 || f.num == 31 || f.num == 36 || f.num == 47 || f.num == 48)
      return true;
  return rc < 0; /* malformed: rewrite_msg says so */
}

static bool defaults_field(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f,
                           void *ctx) {
  if (f->num == 11 && f->wire == 2)
    return rewrite_msg(m, b, f, event_field, ctx); /* TrackEventDefaults: 11, 31 as TrackEvent */
  copy_field(b, f);
  return true;
}

/* ProcessDescriptor / ThreadDescriptor / PerfSample: pid and tid fields. */
struct ids_ctx {
  int32_t pid;
  uint32_t pid_field, tid_field;
  bool claim; /* a process descriptor: takes its pid */
  const char *rank, *host; /* process labels seen (ProcessDescriptor) */
};
static bool ids_field(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f, void *ctx) {
  struct ids_ctx *c = ctx;
  if (f->wire == 0 && f->num == c->pid_field)
    pb_uint(b, f->num, (uint64_t)(uint32_t)map_pid_claim(m, (int32_t)f->v, c->claim));
  else if (f->wire == 0 && f->num == c->tid_field)
    pb_uint(b, f->num, (uint64_t)(uint32_t)map_tid(m, c->pid, (int32_t)f->v));
  else
    copy_field(b, f);
  return true;
}
/* The pid of a message, read before it is rewritten (tids need it). */
static int32_t find_pid(const struct pt_pb_field *outer, uint32_t pid_field) {
  const uint8_t *p = outer->p;
  struct pt_pb_field f;
  while (pt_pb_next_fast(&p, outer->p + outer->len, &f) > 0)
    if (f.num == pid_field && f.wire == 0)
      return (int32_t)f.v;
  return 0;
}

/* A process's name in the merged trace: "rank R: program" for an MPI
 * rank, " @host" added when it ran on another host than the merge. */
static bool process_field(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f,
                          void *ctx) {
  struct ids_ctx *c = ctx;
  if (f->num == 6 && f->wire == 2) {
    char name[512];
    int n = snprintf(name, sizeof name, "%s%s%s%.*s%s%s", c->rank ? "rank " : "",
                     c->rank ? c->rank : "", c->rank ? ": " : "", (int)f->len, (const char *)f->p,
                     c->host ? " @" : "", c->host ? c->host : "");
    (void)n;
    pb_string(b, 6, name);
    return true;
  }
  return ids_field(m, b, f, ctx);
}
static void process_labels(struct merge *m, const struct pt_pb_field *outer, struct ids_ctx *c,
                           char *rank, size_t rank_len, char *host, size_t host_len) {
  const uint8_t *p = outer->p;
  struct pt_pb_field f;
  while (pt_pb_next_fast(&p, outer->p + outer->len, &f) > 0) {
    if (f.num != 8 || f.wire != 2)
      continue;
    if (f.len > 5 && !memcmp(f.p, "rank=", 5)) {
      snprintf(rank, rank_len, "%.*s", (int)(f.len - 5), (const char *)f.p + 5);
      c->rank = rank;
    } else if (f.len > 5 && !memcmp(f.p, "host=", 5)) {
      snprintf(host, host_len, "%.*s", (int)(f.len - 5), (const char *)f.p + 5);
      if (strcmp(host, m->host) != 0)
        c->host = host;
    }
  }
}

static bool track_field(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f, void *ctx) {
  (void)ctx;
  if ((f->num == 1 || f->num == 5) && f->wire == 0) {
    pb_uint(b, f->num, map_uuid(m, f->v));
  } else if (f->num == 3 && f->wire == 2) {
    char rank[64], host[256];
    struct ids_ctx c = {find_pid(f, 1), 1, 0, true, NULL, NULL};
    process_labels(m, f, &c, rank, sizeof rank, host, sizeof host);
    return rewrite_msg(m, b, f, process_field, &c);
  } else if (f->num == 4 && f->wire == 2) {
    struct ids_ctx c = {find_pid(f, 1), 1, 2, false, NULL, NULL};
    return rewrite_msg(m, b, f, ids_field, &c);
  } else {
    copy_field(b, f);
  }
  return true;
}

/* The anchor of a snapshot: MONOTONIC, else its first global clock. */
static bool snapshot_anchor(const struct pt_packet *pk, uint64_t *anchor, bool *has_seq_clock) {
  bool found = false;
  *has_seq_clock = false;
  for (size_t i = 0; i < pk->clock.n; i++) {
    const struct pt_read_clock *c = &pk->clock.clocks[i];
    if (c->id >= 64 && c->id < 128)
      *has_seq_clock = true;
    else if (c->id == PT_CLOCK_MONOTONIC || (!found && c->id < 64)) {
      if (!found || c->id == PT_CLOCK_MONOTONIC)
        *anchor = c->ts;
      found = true;
    }
  }
  return found;
}

struct snap_ctx {
  int64_t shift;
};
static bool clock_field(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f, void *ctx) {
  (void)m;
  struct snap_ctx *c = ctx;
  if (f->num == 2 && f->wire == 0)
    pb_uint(b, 2, f->v + (uint64_t)c->shift);
  else
    copy_field(b, f);
  return true;
}
static bool snapshot_field(struct merge *m, struct pt_buf *b, const struct pt_pb_field *f,
                           void *ctx) {
  if (f->num == 2 && f->wire == 0)
    return true; /* primary_trace_clock: the merge's own snapshot sets it */
  if (f->num == 1 && f->wire == 2)
    return rewrite_msg(m, b, f, clock_field, ctx);
  copy_field(b, f);
  return true;
}

/* One input packet to the output. */
static bool merge_packet(struct merge *m, const struct pt_packet *pk) {
  struct pt_buf *b = &m->out;
  struct seq_out *s = pk->seq_id ? seq_of(m, pk->seq_id) : NULL;
  if (pk->seq_id && !s)
    return false;
  /* Time mapping: the shift of this packet's time, and of its snapshot. */
  bool has_anchor = false, has_seq_clock = false;
  uint64_t anchor = 0;
  if (pk->kind == PT_PKT_CLOCK)
    has_anchor = snapshot_anchor(pk, &anchor, &has_seq_clock);
  struct snap_ctx snap = {0};
  if (m->fn && has_anchor)
    snap.shift = (int64_t)(m->fn(m->fn_ctx, anchor) - anchor);
  if (s && has_anchor && has_seq_clock)
    s->last_out = anchor + (uint64_t)snap.shift;

  size_t mark = pb_open(b, 1);
  const uint8_t *p = pk->data;
  struct pt_pb_field f;
  int rc;
  bool ok = true;
  while (ok && (rc = pt_pb_next_fast(&p, pk->data + pk->len, &f)) > 0) {
    switch (f.num) {
    case 10:
      if (s)
        pb_uint(b, 10, s->new_id);
      break;
    case 8:
      if (!m->fn || !pk->has_ts || f.wire != 0) {
        copy_field(b, &f);
      } else if (pk->ts_incremental && s) {
        uint64_t t = m->fn(m->fn_ctx, pk->ts);
        uint64_t d = t > s->last_out ? t - s->last_out : 0;
        s->last_out += d;
        pb_uint(b, 8, d);
      } else {
        pb_uint(b, 8, f.v + (m->fn(m->fn_ctx, pk->ts) - pk->ts));
      }
      break;
    case 6:
      if (f.wire == 2 && has_seq_clock)
        ok = rewrite_msg(m, b, &f, snapshot_field, &snap);
      else if (f.wire != 2)
        copy_field(b, &f);
      /* else: a global snapshot, left out */
      break;
    case 59:
      ok = f.wire != 2 || rewrite_msg(m, b, &f, defaults_field, NULL);
      if (f.wire != 2)
        copy_field(b, &f);
      break;
    case 11:
      if (f.wire == 2 && event_needs_rewrite(&f))
        ok = rewrite_msg(m, b, &f, event_field, NULL);
      else
        copy_field(b, &f); /* most events: type, interned name and category */
      break;
    case 60:
      ok = f.wire != 2 || rewrite_msg(m, b, &f, track_field, NULL);
      if (f.wire != 2)
        copy_field(b, &f);
      break;
    case 66:
      if (f.wire == 2) {
        struct ids_ctx c = {find_pid(&f, 2), 2, 3, false, NULL, NULL};
        ok = rewrite_msg(m, b, &f, ids_field, &c);
      } else {
        copy_field(b, &f);
      }
      break;
    default:
      copy_field(b, &f);
      break;
    }
  }
  pb_close(b, mark);
  if (!ok || rc < 0) {
    b->len = mark - 1; /* drop the half-written packet (tag 0x0a is one byte) */
    return false;
  }
  m->st->packets++;
  out_flush(m, false);
  return !b->failed;
}

/* The merge's own first packet: the clocks of this host, MONOTONIC the
 * trace's clock. */
static void merge_header(struct merge *m) {
  struct timespec mono, boot;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_BOOTTIME, &boot);
  uint64_t mono_ns = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
  uint64_t boot_ns = (uint64_t)boot.tv_sec * 1000000000u + (uint64_t)boot.tv_nsec;
  struct pt_buf *b = &m->out;
  size_t p = pb_open(b, 1);
  pb_uint(b, 8, mono_ns);
  pb_uint(b, 58, PT_CLOCK_MONOTONIC);
  pb_uint(b, 10, 1);
  pb_uint(b, 13, 1);
  size_t cs = pb_open(b, 6);
  size_t c = pb_open(b, 1);
  pb_uint(b, 1, PT_CLOCK_BOOTTIME);
  pb_uint(b, 2, boot_ns);
  pb_close(b, c);
  c = pb_open(b, 1);
  pb_uint(b, 1, PT_CLOCK_MONOTONIC);
  pb_uint(b, 2, mono_ns);
  pb_close(b, c);
  pb_uint(b, 2, PT_CLOCK_MONOTONIC);
  pb_close(b, cs);
  pb_close(b, p);
}

static int merge_one(struct merge *m, const struct pt_merge_input *in) {
  char err[512];
  struct pt_reader *r = pt_reader_open(in->path, PT_READ_RAW, err, sizeof err);
  if (!r) {
    warn(m, "%s", err);
    return 1;
  }
  m->seqs_n = 0;
  struct pt_packet pk;
  int rc;
  int result = 0;
  while ((rc = pt_reader_next(r, &pk)) > 0) {
    if (!merge_packet(m, &pk)) {
      if (m->write_failed || m->out.failed) {
        result = -1;
        break;
      }
      warn(m, "%s: corrupt packet at byte %llu; the rest of the file is left out", in->path,
           (unsigned long long)pk.offset);
      result = 1;
      break;
    }
  }
  if (rc < 0) {
    warn(m, "%s: %s; the packets before are merged", in->path, pt_reader_error(r));
    result = 1;
  }
  m->st->bytes_in += pt_reader_offset(r);
  pt_reader_close(r);
  return result;
}

int pt_merge(const struct pt_merge_input *in, size_t n, int fd, const struct pt_merge_opts *o,
             struct pt_merge_stats *st) {
  struct merge m = {.o = o, .st = st, .fd = fd, .next_seq = 2};
  memset(st, 0, sizeof *st);
  if (gethostname(m.host, sizeof m.host - 1) != 0)
    m.host[0] = '\0';
  merge_header(&m);
  int result = 0;
  for (size_t i = 0; i < n && result >= 0; i++) {
    if (!m.group || strcmp(m.group, in[i].group) != 0) {
      m.group = in[i].group;
      m.group_salt = hash_str(in[i].group);
      m.gpids_n = 0;
      m.fn = NULL;
      m.fn_ctx = NULL;
      if (o && o->time_map)
        o->time_map(o->ctx, in[i].group, &m.fn, &m.fn_ctx);
    }
    m.flow_salt = in[i].arg ? mix64(0x5851f42d4c957f2dULL * in[i].arg) : 0;
    m.arg = in[i].arg;
    m.joins = in[i].joins;
    st->inputs++;
    int rc = merge_one(&m, &in[i]);
    if (rc > 0) {
      st->bad_inputs++;
      result = 1;
    } else if (rc < 0) {
      result = -1;
    }
  }
  out_flush(&m, true);
  if (m.write_failed || m.out.failed) {
    if (m.out.failed)
      warn(&m, "out of memory");
    result = -1;
  }
  free(m.out.data);
  free(m.pids_used);
  free(m.claims);
  free(m.seqs);
  free(m.gpids);
  return result;
}
