/* The streaming Perfetto trace reader (pt_read.h): the read buffer, the
 * packets and their framing, callstacks, tracks.  What a packet holds is
 * decoded in pt_read_decode.c; protobuf primitives in pt_read_wire.c. */
#include "pt_read_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ient_free(void *p) {
  struct ient *e = p;
  free(e->str);
  free(e->list);
  free(e);
}

static void seq_clear(struct seq *s) {
  rd_map_free(&s->interned, ient_free);
  s->default_clock = 0;
  s->default_track = 0;
  s->sample_hz = 0;
  free(s->clocks);
  s->clocks = NULL;
  s->nclocks = 0;
}
static void seq_free(void *p) {
  struct seq *s = p;
  seq_clear(s);
  free(s);
}

static void track_free(void *p) {
  struct track_ent *t = p;
  free(t->name);
  free(t);
}

PT_READ_HIDDEN void rd_fail(struct pt_reader *r, const char *fmt, ...) {
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
  rd_map_free(&r->seqs, seq_free);
  rd_map_free(&r->tracks, track_free);
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
  pkt->sample.hz = s ? s->sample_hz : 0;
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
    n += strlen(rd_intern_str(s, IN_MAPPING_PATH, m->list[i])) + 1;
  char *out = malloc(n), *w = out;
  if (!out)
    return NULL;
  for (size_t i = 0; i < m->nlist; i++) {
    const char *part = rd_intern_str(s, IN_MAPPING_PATH, m->list[i]);
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
  struct seq *s = rd_map_get(&r->seqs, seq_id);
  struct ient *cs = rd_intern_get(s, IN_CALLSTACK, iid);
  if (!cs)
    return 0;
  /* The format lists the bottom (outermost) frame first. */
  for (size_t i = 0; i < cs->nlist && i < max; i++) {
    struct ient *fr = rd_intern_get(s, IN_FRAME, cs->list[cs->nlist - 1 - i]);
    struct pt_frame *o = &out[i];
    o->function = o->mapping = o->build_id = "";
    o->rel_pc = 0;
    if (!fr)
      continue;
    o->function = rd_intern_str(s, IN_FUNCTION, fr->a);
    o->rel_pc = fr->c;
    struct ient *m = rd_intern_get(s, IN_MAPPING, fr->b);
    if (m) {
      o->build_id = rd_intern_str(s, IN_BUILD_ID, m->a);
      if (m->nlist && !m->str)
        m->str = mapping_path(s, m);
      if (m->str)
        o->mapping = m->str;
    }
  }
  return cs->nlist;
}

const struct pt_track_info *pt_reader_track(struct pt_reader *r, uint64_t uuid) {
  struct track_ent *t = rd_map_get(&r->tracks, uuid);
  return t ? &t->info : NULL;
}
