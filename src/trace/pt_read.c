/* The streaming Perfetto trace reader (pt_read.h).  Field numbers are
 * the Perfetto format's (protos/perfetto/trace/...), as in pt_proto.c. */
#include "pt_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- wire primitives ---------------------------------------------------- */
static int rd_varint(const uint8_t **pos, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*pos >= end)
      return -1;
    uint8_t b = *(*pos)++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

int pt_pb_next(const uint8_t **pos, const uint8_t *end, struct pt_pb_field *f) {
  if (*pos >= end)
    return 0;
  const uint8_t *p = *pos;
  uint64_t key;
  if (rd_varint(&p, end, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
    return -1;
  f->start = *pos;
  f->num = (uint32_t)(key >> 3);
  f->wire = (uint8_t)(key & 7);
  f->p = NULL;
  f->len = 0;
  f->v = 0;
  switch (f->wire) {
  case 0:
    if (rd_varint(&p, end, &f->v))
      return -1;
    break;
  case 1:
    if (end - p < 8)
      return -1;
    memcpy(&f->v, p, 8);
    p += 8;
    break;
  case 5: {
    uint32_t v32;
    if (end - p < 4)
      return -1;
    memcpy(&v32, p, 4);
    f->v = v32;
    p += 4;
    break;
  }
  case 2: {
    uint64_t n;
    if (rd_varint(&p, end, &n) || n > (uint64_t)(end - p))
      return -1;
    f->p = p;
    f->len = (size_t)n;
    p += n;
    break;
  }
  default:
    return -1; /* groups (3, 4) and reserved types are not ours */
  }
  f->end = p;
  *pos = p;
  return 1;
}

/* ---- a u64-keyed hash map of pointers ----------------------------------- */
struct pt_map {
  uint64_t *keys;
  void **vals;
  size_t cap, n;
};
static size_t map_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}
static void **map_slot(struct pt_map *m, uint64_t key, bool add) {
  if (add && (m->n + 1) * 4 >= m->cap * 3) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
      free(keys);
      free(vals);
      return NULL;
    }
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->vals[i])
        continue;
      size_t j = map_hash(m->keys[i]) & (cap - 1);
      while (vals[j])
        j = (j + 1) & (cap - 1);
      keys[j] = m->keys[i];
      vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
  }
  if (!m->cap)
    return NULL;
  size_t j = map_hash(key) & (m->cap - 1);
  while (m->vals[j]) {
    if (m->keys[j] == key)
      return &m->vals[j];
    j = (j + 1) & (m->cap - 1);
  }
  if (!add)
    return NULL;
  m->keys[j] = key;
  m->n++;
  return &m->vals[j];
}
static void *map_get(const struct pt_map *m, uint64_t key) {
  void **s = map_slot((struct pt_map *)m, key, false);
  return s ? *s : NULL;
}
static void map_free(struct pt_map *m, void (*fn)(void *)) {
  for (size_t i = 0; fn && i < m->cap; i++)
    if (m->vals[i])
      fn(m->vals[i]);
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* ---- per-sequence state ------------------------------------------------- */
/* An interned entry: a string, a frame (a = function iid, b = mapping
 * iid, c = rel_pc), a callstack (list of frame iids) or a mapping
 * (list of path iids, a = build id iid). */
struct ient {
  char *str;
  uint64_t a, b, c;
  uint64_t *list;
  size_t nlist;
};
static void ient_free(void *p) {
  struct ient *e = p;
  free(e->str);
  free(e->list);
  free(e);
}

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
  /* Sequence-scoped clocks (ids 64..127), [0, nclocks) of them as the
   * highest id used asks: usually one (64).  A fixed 64 cost 2 KiB per
   * sequence: a trace of 70,000 threads took 72 MB to merge. */
  struct seq_clock *clocks;
  uint32_t nclocks;
};

/* The sequence clock `id` (64..127); NULL when unknown and not `make`,
 * or out of memory. */
static struct seq_clock *seq_clock(struct seq *s, uint32_t id, bool make) {
  uint32_t i = id - 64;
  if (i < s->nclocks)
    return &s->clocks[i];
  if (!make)
    return NULL;
  struct seq_clock *c = realloc(s->clocks, (i + 1) * sizeof *c);
  if (!c)
    return NULL;
  memset(c + s->nclocks, 0, (i + 1 - s->nclocks) * sizeof *c);
  s->clocks = c;
  s->nclocks = i + 1;
  return &c[i];
}

static void seq_clear(struct seq *s) {
  map_free(&s->interned, ient_free);
  s->default_clock = 0;
  s->default_track = 0;
  free(s->clocks);
  s->clocks = NULL;
  s->nclocks = 0;
}
static void seq_free(void *p) {
  struct seq *s = p;
  seq_clear(s);
  free(s);
}

struct track_ent {
  struct pt_track_info info;
  char *name;
};
static void track_free(void *p) {
  struct track_ent *t = p;
  free(t->name);
  free(t);
}

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

static void rd_fail(struct pt_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rd_fail(struct pt_reader *r, const char *fmt, ...) {
  if (r->error[0])
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->error, sizeof r->error, fmt, ap);
  va_end(ap);
}

static struct pt_reader *reader_new(unsigned flags) {
  struct pt_reader *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->fd = -1;
  r->flags = flags;
  r->primary = PT_CLOCK_BOOTTIME; /* Perfetto's default trace clock */
  return r;
}

struct pt_reader *pt_reader_open(const char *path, unsigned flags, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  struct pt_reader *r = reader_new(flags);
  if (r) {
    r->cap = PT_READ_CHUNK;
    r->buf = malloc(r->cap);
    r->own_buf = true;
  }
  if (!r || !r->buf) {
    snprintf(err, errlen, "%s: out of memory", path);
    if (r)
      free(r);
    close(fd);
    return NULL;
  }
  r->fd = fd;
  return r;
}

struct pt_reader *pt_reader_open_mem(const void *data, size_t len, unsigned flags) {
  struct pt_reader *r = reader_new(flags);
  if (!r)
    return NULL;
  r->buf = (uint8_t *)(uintptr_t)data;
  r->cap = r->fill = len;
  r->eof = true;
  return r;
}

void pt_reader_close(struct pt_reader *r) {
  if (!r)
    return;
  if (r->fd >= 0)
    close(r->fd);
  if (r->own_buf)
    free(r->buf);
  map_free(&r->seqs, seq_free);
  map_free(&r->tracks, track_free);
  free(r->scratch);
  free(r->annots);
  free(r->flows);
  free(r);
}

const char *pt_reader_error(const struct pt_reader *r) {
  return r->error[0] ? r->error : "no error";
}
uint64_t pt_reader_offset(const struct pt_reader *r) { return r->file_off + r->pos; }
uint64_t pt_reader_packets(const struct pt_reader *r) { return r->packets; }

/* Make n unconsumed bytes available; false at end of file (or error). */
static bool rd_ensure(struct pt_reader *r, size_t n) {
  if (r->fill - r->pos >= n)
    return true;
  if (r->eof || r->fd < 0)
    return false;
  if (r->pos) {
    memmove(r->buf, r->buf + r->pos, r->fill - r->pos);
    r->file_off += r->pos;
    r->fill -= r->pos;
    r->pos = 0;
  }
  if (n > r->cap) {
    size_t cap = r->cap;
    while (cap < n)
      cap *= 2;
    uint8_t *b = realloc(r->buf, cap);
    if (!b) {
      rd_fail(r, "out of memory reading a packet of %zu bytes", n);
      return false;
    }
    r->buf = b;
    r->cap = cap;
  }
  while (r->fill < n) {
    ssize_t got = read(r->fd, r->buf + r->fill, r->cap - r->fill);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      rd_fail(r, "read failed at byte %llu: %s", (unsigned long long)(r->file_off + r->fill),
              strerror(errno));
      return false;
    }
    if (got == 0) {
      r->eof = true;
      return false;
    }
    r->fill += (size_t)got;
  }
  return true;
}

/* A top-level field's header: key and (wire 2) length. */
static int rd_header(struct pt_reader *r, uint32_t *num, uint8_t *wire, uint64_t *len,
                     size_t *hdr) {
  rd_ensure(r, 20);
  if (r->error[0])
    return -1;
  if (r->pos == r->fill)
    return 0;
  const uint8_t *p = r->buf + r->pos, *end = r->buf + r->fill;
  uint64_t key;
  if (rd_varint(&p, end, &key) || (key >> 3) == 0) {
    rd_fail(r, "corrupt or truncated at byte %llu (not a packet)",
            (unsigned long long)pt_reader_offset(r));
    return -1;
  }
  *num = (uint32_t)(key >> 3);
  *wire = (uint8_t)(key & 7);
  *len = 0;
  if (*wire == 2 && rd_varint(&p, end, len)) {
    rd_fail(r, "truncated at byte %llu (a packet's length)", (unsigned long long)pt_reader_offset(r));
    return -1;
  }
  *hdr = (size_t)(p - (r->buf + r->pos));
  return 1;
}

/* ---- decoding ----------------------------------------------------------- */
static struct seq *rd_seq(struct pt_reader *r, uint32_t id) {
  void **slot = map_slot(&r->seqs, id, true);
  if (!slot)
    return NULL;
  if (!*slot)
    *slot = calloc(1, sizeof(struct seq));
  return *slot;
}

static char *scratch_str(struct pt_reader *r, const uint8_t *p, size_t n) {
  if (r->scratch_len + n + 1 > r->scratch_cap)
    return NULL; /* sized at the packet's start: cannot happen */
  char *s = r->scratch + r->scratch_len;
  memcpy(s, p, n);
  s[n] = '\0';
  r->scratch_len += n + 1;
  return s;
}

static struct ient *intern_get(struct seq *s, unsigned table, uint64_t iid) {
  return s ? map_get(&s->interned, (uint64_t)table << 56 ^ iid) : NULL;
}
static const char *intern_str(struct seq *s, unsigned table, uint64_t iid) {
  struct ient *e = intern_get(s, table, iid);
  return e && e->str ? e->str : "";
}

static int rd_list(const struct pt_pb_field *f, uint64_t **list, size_t *n) {
  /* repeated uint64: one varint, or packed */
  size_t add = 1;
  if (f->wire == 2) {
    add = 0;
    for (size_t i = 0; i < f->len; i++)
      add += !(f->p[i] & 0x80);
  } else if (f->wire != 0) {
    return 0;
  }
  if (*n + add > PT_MAX_FRAMES)
    return 0;
  uint64_t *l = realloc(*list, (*n + add + 1) * sizeof *l);
  if (!l)
    return -1;
  *list = l;
  if (f->wire == 0) {
    l[(*n)++] = f->v;
    return 0;
  }
  const uint8_t *p = f->p, *end = f->p + f->len;
  uint64_t v;
  while (p < end && !rd_varint(&p, end, &v))
    l[(*n)++] = v;
  return 0;
}

static int rd_interned(struct pt_reader *r, struct seq *s, const uint8_t *p, const uint8_t *end) {
  struct pt_pb_field f, g;
  int rc;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    unsigned t = f.num;
    if (f.wire != 2 || t > 31)
      continue;
    struct ient e = {0};
    uint64_t iid = 0;
    const uint8_t *q = f.p, *qend = f.p + f.len;
    int rc2;
    while ((rc2 = pt_pb_next_fast(&q, qend, &g)) > 0) {
      if (g.num == 1 && g.wire == 0) {
        iid = g.v;
      } else if (g.num == 2 && g.wire == 2 &&
                 (t == IN_CATEGORY || t == IN_EVENT_NAME || t == IN_ANNOT_NAME || t == IN_FUNCTION ||
                  t == IN_BUILD_ID || t == IN_MAPPING_PATH)) {
        free(e.str);
        e.str = strndup((const char *)g.p, g.len);
        if (!e.str)
          return -1;
      } else if (t == IN_FRAME && g.wire == 0 && g.num >= 2 && g.num <= 4) {
        *(g.num == 2 ? &e.a : g.num == 3 ? &e.b : &e.c) = g.v;
      } else if ((t == IN_CALLSTACK && g.num == 2) || (t == IN_MAPPING && g.num == 7)) {
        if (rd_list(&g, &e.list, &e.nlist))
          return -1;
      } else if (t == IN_MAPPING && g.num == 2 && g.wire == 0) {
        e.a = g.v;
      }
    }
    if (rc2 < 0) {
      free(e.str);
      free(e.list);
      return -2;
    }
    void **slot = map_slot(&s->interned, (uint64_t)t << 56 ^ iid, true);
    struct ient *n = slot ? (*slot ? *slot : malloc(sizeof *n)) : NULL;
    if (!n) {
      free(e.str);
      free(e.list);
      return -1;
    }
    if (*slot) {
      free(n->str);
      free(n->list);
    }
    *n = e;
    *slot = n;
  }
  (void)r;
  return rc < 0 ? -2 : 0;
}

static uint32_t clock_anchor_prefer(const struct pt_read_clock *c, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (c[i].id == PT_CLOCK_MONOTONIC)
      return PT_CLOCK_MONOTONIC;
  for (size_t i = 0; i < n; i++)
    if (c[i].id < 64)
      return c[i].id;
  return 0;
}

static int rd_clock_snapshot(struct pt_reader *r, struct seq *s, const uint8_t *p,
                             const uint8_t *end, struct pt_packet *pkt) {
  struct pt_pb_field f, g;
  size_t n = 0;
  uint32_t primary = 0;
  int rc;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    if (f.num == 2 && f.wire == 0) {
      primary = (uint32_t)f.v;
    } else if (f.num == 1 && f.wire == 2 && n < 32) {
      struct pt_read_clock c = {0};
      const uint8_t *q = f.p;
      int rc2;
      while ((rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0) {
        if (g.num == 1 && g.wire == 0)
          c.id = (uint32_t)g.v;
        else if (g.num == 2 && g.wire == 0)
          c.ts = g.v;
        else if (g.num == 3 && g.wire == 0)
          c.incremental = g.v != 0;
      }
      if (rc2 < 0)
        return -2;
      r->clocks[n++] = c;
    }
  }
  if (rc < 0)
    return -2;
  if (primary)
    r->primary = primary;
  uint32_t anchor = clock_anchor_prefer(r->clocks, n);
  uint64_t anchor_ts = 0;
  for (size_t i = 0; i < n; i++)
    if (r->clocks[i].id == anchor)
      anchor_ts = r->clocks[i].ts;
  uint64_t primary_ts = 0;
  bool have_primary = false;
  for (size_t i = 0; i < n; i++)
    if (r->clocks[i].id == r->primary) {
      primary_ts = r->clocks[i].ts;
      have_primary = true;
    }
  for (size_t i = 0; i < n; i++) {
    const struct pt_read_clock *c = &r->clocks[i];
    struct seq_clock *sc = NULL;
    if (c->id >= 64 && c->id < 128 && s && anchor && (sc = seq_clock(s, c->id, true))) {
      sc->known = true;
      sc->incremental = c->incremental;
      sc->last = c->ts;
      sc->anchor = anchor;
      sc->anchor_diff = (int64_t)(anchor_ts - c->ts);
    } else if (c->id < 64 && have_primary) {
      r->global_known[c->id] = true;
      r->global_to_primary[c->id] = (int64_t)(primary_ts - c->ts);
    }
  }
  pkt->clock.clocks = r->clocks;
  pkt->clock.n = n;
  pkt->clock.primary = primary;
  return 0;
}

static int rd_defaults(struct seq *s, const uint8_t *p, const uint8_t *end) {
  struct pt_pb_field f, g;
  int rc;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    if (f.num == 58 && f.wire == 0) {
      s->default_clock = (uint32_t)f.v;
    } else if (f.num == 11 && f.wire == 2) {
      const uint8_t *q = f.p;
      int rc2;
      while ((rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0)
        if (g.num == 11 && g.wire == 0)
          s->default_track = g.v;
      if (rc2 < 0)
        return -2;
    }
  }
  return rc < 0 ? -2 : 0;
}

/* The packet's time on a global clock, the primary one when known. */
static void rd_resolve_ts(struct pt_reader *r, struct seq *s, uint64_t raw, uint32_t clock,
                          struct pt_packet *pkt) {
  pkt->has_ts = true;
  pkt->ts_clock = clock;
  uint64_t v = raw;
  if (clock >= 64 && clock < 128) {
    struct seq_clock *sc = s ? seq_clock(s, clock, false) : NULL;
    if (!sc || !sc->known) {
      pkt->ts = raw;
      pkt->clock_id = clock; /* no snapshot: left as written */
      return;
    }
    if (sc->incremental) {
      v = sc->last += raw;
      pkt->ts_incremental = true;
    }
    v += (uint64_t)sc->anchor_diff;
    clock = sc->anchor;
  }
  if (clock != r->primary && clock < 64 && r->global_known[clock]) {
    v += (uint64_t)r->global_to_primary[clock];
    clock = r->primary;
  }
  pkt->ts = v;
  pkt->clock_id = clock;
}

static int rd_annotation(struct pt_reader *r, struct seq *s, const struct pt_pb_field *f,
                         struct pt_annot *a) {
  struct pt_pb_field g;
  const uint8_t *q = f->p;
  int rc;
  memset(a, 0, sizeof *a);
  a->name = "";
  a->s = "";
  a->kind = PT_AN_OTHER;
  while ((rc = pt_pb_next_fast(&q, f->p + f->len, &g)) > 0) {
    switch (g.num) {
    case 1: a->name = intern_str(s, IN_ANNOT_NAME, g.v); break;
    case 10: if (g.wire == 2) a->name = scratch_str(r, g.p, g.len); break;
    case 2: a->kind = PT_AN_BOOL; a->u = g.v != 0; break;
    case 3: a->kind = PT_AN_UINT; a->u = g.v; break;
    case 4: a->kind = PT_AN_INT; a->i = (int64_t)g.v; break;
    case 5: a->kind = PT_AN_DOUBLE; memcpy(&a->d, &g.v, sizeof a->d); break;
    case 6:
      if (g.wire == 2) {
        a->kind = PT_AN_STRING;
        a->s = scratch_str(r, g.p, g.len);
      }
      break;
    default: break;
    }
  }
  if (!a->name)
    a->name = "";
  if (!a->s)
    a->s = "";
  return rc < 0 ? -2 : 0;
}

static int rd_push_flow(struct pt_reader *r, uint64_t v) {
  if (r->n_flows_total == r->flows_cap) {
    size_t cap = r->flows_cap ? r->flows_cap * 2 : 16;
    uint64_t *p = realloc(r->flows, cap * sizeof *p);
    if (!p)
      return -1;
    r->flows = p;
    r->flows_cap = cap;
  }
  r->flows[r->n_flows_total++] = v;
  return 0;
}

static int rd_event(struct pt_reader *r, struct seq *s, const uint8_t *p, const uint8_t *end,
                    struct pt_packet *pkt) {
  struct pt_pb_field f;
  int rc;
  size_t n_annots = 0;
  /* flows first into one array: begun ids, then terminating ones */
  size_t n_flow = 0, n_term = 0;
  r->n_flows_total = 0;
  pkt->event.name = pkt->event.category = "";
  pkt->event.track = s ? s->default_track : 0;
  const uint8_t *start = p;
  for (int pass = 0; pass < 2; pass++) {
    p = start;
    while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
      if (pass == 1) {
        if (f.num == 48 && f.wire == 1 && rd_push_flow(r, f.v) == 0)
          n_term++;
        continue;
      }
      switch (f.num) {
      case 9: pkt->event.type = (int)f.v; break;
      case 11: pkt->event.track = f.v; break;
      case 10: pkt->event.name = intern_str(s, IN_EVENT_NAME, f.v); break;
      case 23:
        if (f.wire == 2)
          pkt->event.name = scratch_str(r, f.p, f.len);
        break;
      case 3:
        if (!pkt->event.category[0])
          pkt->event.category = intern_str(s, IN_CATEGORY, f.v);
        break;
      case 22:
        if (f.wire == 2 && !pkt->event.category[0])
          pkt->event.category = scratch_str(r, f.p, f.len);
        break;
      case 4:
        if (f.wire != 2)
          break;
        if (n_annots == r->annots_cap) {
          size_t cap = r->annots_cap ? r->annots_cap * 2 : 16;
          struct pt_annot *a = realloc(r->annots, cap * sizeof *a);
          if (!a)
            return -1;
          r->annots = a;
          r->annots_cap = cap;
        }
        if (rd_annotation(r, s, &f, &r->annots[n_annots]))
          return -2;
        n_annots++;
        break;
      case 47:
        if (f.wire == 1 && rd_push_flow(r, f.v) == 0)
          n_flow++;
        break;
      case 30:
        pkt->event.has_counter = true;
        pkt->event.counter_int = (int64_t)f.v;
        break;
      case 44:
        pkt->event.has_counter = pkt->event.counter_is_double = true;
        memcpy(&pkt->event.counter_double, &f.v, sizeof(double));
        break;
      default: break;
      }
    }
    if (rc < 0)
      return -2;
  }
  if (!pkt->event.name)
    pkt->event.name = "";
  if (!pkt->event.category)
    pkt->event.category = "";
  pkt->event.annots = r->annots;
  pkt->event.n_annots = n_annots;
  pkt->event.flow_ids = r->flows;
  pkt->event.n_flows = n_flow;
  pkt->event.terminating_flow_ids = r->flows ? r->flows + n_flow : NULL; /* no flow yet: NULL */
  pkt->event.n_terminating = n_term;
  return 0;
}

static int rd_track(struct pt_reader *r, const uint8_t *p, const uint8_t *end,
                    struct pt_packet *pkt) {
  struct pt_pb_field f, g;
  int rc, rc2 = 0;
  const char *name = NULL;
  pkt->track.process_name = pkt->track.thread_name = pkt->track.counter_unit_name = "";
  pkt->track.counter_unit = 0;
  pkt->track.counter_incremental = false;
  pkt->track.labels = r->labels;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    switch (f.num) {
    case 1: pkt->track.uuid = f.v; break;
    case 5: pkt->track.parent_uuid = f.v; break;
    case 2:
    case 10:
      if (f.wire == 2)
        name = scratch_str(r, f.p, f.len);
      break;
    case 8: /* CounterDescriptor: unit 3, is_incremental 5, unit_name 6 */
      pkt->track.is_counter = true;
      for (const uint8_t *q = f.p; f.wire == 2 && (rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0;) {
        if (g.num == 3 && g.wire == 0)
          pkt->track.counter_unit = (int)g.v;
        else if (g.num == 5 && g.wire == 0)
          pkt->track.counter_incremental = g.v != 0;
        else if (g.num == 6 && g.wire == 2)
          pkt->track.counter_unit_name = scratch_str(r, g.p, g.len);
      }
      if (rc2 < 0)
        return -2;
      break;
    case 3:
    case 4:
      if (f.wire != 2)
        break;
      if (f.num == 3)
        pkt->track.is_process = true;
      else
        pkt->track.is_thread = true;
      for (const uint8_t *q = f.p; (rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0;) {
        if (g.num == 1 && g.wire == 0)
          pkt->track.pid = (int32_t)g.v;
        else if (f.num == 4 && g.num == 2 && g.wire == 0)
          pkt->track.tid = (int32_t)g.v;
        else if (f.num == 3 && g.num == 6 && g.wire == 2)
          pkt->track.process_name = scratch_str(r, g.p, g.len);
        else if (f.num == 4 && g.num == 5 && g.wire == 2)
          pkt->track.thread_name = scratch_str(r, g.p, g.len);
        else if (f.num == 3 && g.num == 8 && g.wire == 2 && pkt->track.n_labels < 16)
          r->labels[pkt->track.n_labels++] = scratch_str(r, g.p, g.len);
      }
      if (rc2 < 0)
        return -2;
      break;
    default: break;
    }
  }
  if (rc < 0)
    return -2;
  if (!name || !*name)
    name = pkt->track.is_thread ? pkt->track.thread_name : pkt->track.process_name;
  pkt->track.name = name ? name : "";
  /* Remember it for pt_reader_track (tracks are few: bounded by them). */
  void **slot = map_slot(&r->tracks, pkt->track.uuid, true);
  if (!slot)
    return -1;
  struct track_ent *t = *slot ? *slot : calloc(1, sizeof *t);
  if (!t)
    return -1;
  *slot = t;
  char *copy = strdup(pkt->track.name);
  if (copy) {
    free(t->name);
    t->name = copy;
  }
  t->info.uuid = pkt->track.uuid;
  t->info.parent_uuid = pkt->track.parent_uuid;
  t->info.pid = pkt->track.pid;
  t->info.tid = pkt->track.is_thread ? pkt->track.tid : 0;
  t->info.is_process = pkt->track.is_process;
  t->info.is_counter = pkt->track.is_counter;
  t->info.name = t->name ? t->name : "";
  return 0;
}

static int rd_sample(const uint8_t *p, const uint8_t *end, struct pt_packet *pkt) {
  struct pt_pb_field f;
  int rc;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    if (f.wire != 0)
      continue;
    switch (f.num) {
    case 1: pkt->sample.cpu = (uint32_t)f.v; break;
    case 2: pkt->sample.pid = (int32_t)f.v; break;
    case 3: pkt->sample.tid = (int32_t)f.v; break;
    case 4: pkt->sample.callstack_iid = f.v; break;
    default: break;
    }
  }
  return rc < 0 ? -2 : 0;
}

/* Decode one TracePacket: 0, -1 out of memory, -2 malformed. */
static int rd_packet(struct pt_reader *r, const uint8_t *data, size_t len, struct pt_packet *pkt) {
  memset(pkt, 0, sizeof *pkt);
  pkt->data = data;
  pkt->len = len;
  const uint8_t *p = data, *end = data + len;
  struct pt_pb_field f;
  int rc;
  bool has_ts = false, has_clock = false;
  uint64_t raw_ts = 0;
  uint32_t clock = 0;
  const uint8_t *interned = NULL, *defaults = NULL, *snapshot = NULL, *body = NULL;
  size_t interned_len = 0, defaults_len = 0, snapshot_len = 0, body_len = 0;
  uint32_t body_num = 0;
  /* First pass: the fields that order the rest. */
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    switch (f.num) {
    case F_TIMESTAMP: has_ts = true; raw_ts = f.v; break;
    case F_CLOCK_ID: has_clock = true; clock = (uint32_t)f.v; break;
    case F_SEQ: pkt->seq_id = (uint32_t)f.v; break;
    case F_FLAGS: pkt->seq_flags = (uint32_t)f.v; break;
    case F_INTERNED: interned = f.p; interned_len = f.len; break;
    case F_DEFAULTS: defaults = f.p; defaults_len = f.len; break;
    case F_CLOCK_SNAPSHOT: snapshot = f.p; snapshot_len = f.len; break;
    case F_TRACK_EVENT:
    case F_TRACK_DESCRIPTOR:
    case F_PERF_SAMPLE:
      if (f.wire == 2) {
        body = f.p;
        body_len = f.len;
        body_num = f.num;
      }
      break;
    default: break;
    }
  }
  if (rc < 0)
    return -2;
  struct seq *s = pkt->seq_id ? rd_seq(r, pkt->seq_id) : NULL;
  if (pkt->seq_id && !s)
    return -1;
  if (s && (pkt->seq_flags & SEQ_CLEARED))
    seq_clear(s);
  bool raw = r->flags & PT_READ_RAW;
  if (interned && s && !raw && (rc = rd_interned(r, s, interned, interned + interned_len)))
    return rc;
  if (defaults && s && (rc = rd_defaults(s, defaults, defaults + defaults_len)))
    return rc;
  if (snapshot) {
    pkt->kind = PT_PKT_CLOCK;
    if ((rc = rd_clock_snapshot(r, s, snapshot, snapshot + snapshot_len, pkt)))
      return rc;
  }
  if (has_ts) {
    if (!has_clock)
      clock = s && s->default_clock ? s->default_clock : PT_CLOCK_BOOTTIME;
    rd_resolve_ts(r, s, raw_ts, clock, pkt);
  }
  if (!body || raw)
    return 0;
  size_t need = 2 * body_len + 64;
  if (need > r->scratch_cap) {
    char *sc = realloc(r->scratch, need);
    if (!sc)
      return -1;
    r->scratch = sc;
    r->scratch_cap = need;
  }
  r->scratch_len = 0;
  if (body_num == F_TRACK_EVENT) {
    pkt->kind = PT_PKT_EVENT;
    return rd_event(r, s, body, body + body_len, pkt);
  }
  if (body_num == F_TRACK_DESCRIPTOR) {
    pkt->kind = PT_PKT_TRACK;
    return rd_track(r, body, body + body_len, pkt);
  }
  pkt->kind = PT_PKT_SAMPLE;
  return rd_sample(body, body + body_len, pkt);
}

int pt_reader_next(struct pt_reader *r, struct pt_packet *pkt) {
  if (r->error[0])
    return -1;
  for (;;) {
    uint32_t num;
    uint8_t wire;
    uint64_t len;
    size_t hdr;
    int rc = rd_header(r, &num, &wire, &len, &hdr);
    if (rc <= 0)
      return rc;
    uint64_t at = pt_reader_offset(r);
    if (num != 1 || wire != 2) {
      /* Not a packet: skip it (a varint or fixed field, or bytes). */
      uint64_t skip = wire == 2 ? len : wire == 1 ? 8 : wire == 5 ? 4 : 0;
      if (wire == 0) {
        const uint8_t *p = r->buf + r->pos + hdr;
        uint64_t v;
        if (rd_varint(&p, r->buf + r->fill, &v)) {
          rd_fail(r, "corrupt at byte %llu", (unsigned long long)at);
          return -1;
        }
        skip = (uint64_t)(p - (r->buf + r->pos + hdr));
      } else if (wire != 1 && wire != 2 && wire != 5) {
        rd_fail(r, "corrupt at byte %llu (wire type %u)", (unsigned long long)at, wire);
        return -1;
      }
      uint64_t total = hdr + skip;
      while (total) {
        if (r->pos == r->fill && !rd_ensure(r, 1)) {
          rd_fail(r, "truncated at byte %llu", (unsigned long long)pt_reader_offset(r));
          return -1;
        }
        size_t n = r->fill - r->pos < total ? r->fill - r->pos : (size_t)total;
        r->pos += n;
        total -= n;
      }
      continue;
    }
    if (len > PT_READ_MAX_PACKET) {
      rd_fail(r, "corrupt at byte %llu (a packet of %llu bytes)", (unsigned long long)at,
              (unsigned long long)len);
      return -1;
    }
    if (!rd_ensure(r, hdr + (size_t)len)) {
      rd_fail(r, "truncated at byte %llu (a packet of %llu bytes, %llu there)",
              (unsigned long long)at, (unsigned long long)len,
              (unsigned long long)(r->fill - r->pos - hdr));
      return -1;
    }
    const uint8_t *data = r->buf + r->pos + hdr;
    r->pos += hdr + (size_t)len;
    rc = rd_packet(r, data, (size_t)len, pkt);
    if (rc == -1) {
      rd_fail(r, "out of memory at byte %llu", (unsigned long long)at);
      return -1;
    }
    if (rc == -2) {
      rd_fail(r, "corrupt packet at byte %llu", (unsigned long long)at);
      return -1;
    }
    pkt->offset = at;
    r->packets++;
    return 1;
  }
}

/* A mapping's path: its interned components joined by '/'. */
static char *mapping_path(struct seq *s, const struct ient *m) {
  size_t n = 1 + m->nlist;
  for (size_t i = 0; i < m->nlist; i++)
    n += strlen(intern_str(s, IN_MAPPING_PATH, m->list[i])) + 1;
  char *out = malloc(n), *w = out;
  if (!out)
    return NULL;
  for (size_t i = 0; i < m->nlist; i++) {
    const char *part = intern_str(s, IN_MAPPING_PATH, m->list[i]);
    if ((w == out || w[-1] != '/') && part[0] != '/') /* as Perfetto: "/" before each */
      *w++ = '/';
    size_t k = strlen(part);
    memcpy(w, part, k);
    w += k;
  }
  *w = '\0';
  return out;
}

size_t pt_reader_callstack(struct pt_reader *r, uint32_t seq_id, uint64_t iid,
                           struct pt_frame *out, size_t max) {
  struct seq *s = map_get(&r->seqs, seq_id);
  struct ient *cs = intern_get(s, IN_CALLSTACK, iid);
  if (!cs)
    return 0;
  /* The format lists the bottom (outermost) frame first. */
  for (size_t i = 0; i < cs->nlist && i < max; i++) {
    struct ient *fr = intern_get(s, IN_FRAME, cs->list[cs->nlist - 1 - i]);
    struct pt_frame *o = &out[i];
    o->function = o->mapping = o->build_id = "";
    o->rel_pc = 0;
    if (!fr)
      continue;
    o->function = intern_str(s, IN_FUNCTION, fr->a);
    o->rel_pc = fr->c;
    struct ient *m = intern_get(s, IN_MAPPING, fr->b);
    if (m) {
      o->build_id = intern_str(s, IN_BUILD_ID, m->a);
      if (m->nlist && !m->str)
        m->str = mapping_path(s, m);
      if (m->str)
        o->mapping = m->str;
    }
  }
  return cs->nlist;
}

const struct pt_track_info *pt_reader_track(struct pt_reader *r, uint64_t uuid) {
  struct track_ent *t = map_get(&r->tracks, uuid);
  return t ? &t->info : NULL;
}
