/* The finisher: reads a recording (xpt_rec.h) through a read-only
 * mapping, rebuilds each thread's records in order and feeds them to the
 * encoders.  The trace is written to a temporary name and then linked
 * into place, so a trace file is either complete or absent: a failed
 * write (full disk) keeps the recording for a later try. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "pt_common.h"
#include "pt_pair.h"
#include "xpt_msg.h"
#include "xpt_finish.h"
#include "xpt_clock_correct.h"

enum pt_format pt_format;
struct pt_process pt_proc;

/* ---- clock ---------------------------------------------------------------- */

struct pt_rclock pt_rclock;

static uint64_t fin_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The slope runs from the recorder's set-up point to now: the finisher
 * runs on the same machine, whose TSC is invariant (checked at set-up).
 * An MPI rank run with XPTRACE_MPI_TEST_CLOCK_OFFSET_NS is shown skewed
 * by that much, as a host's would be (tests of the clock correction;
 * xpt_clock_correct.h): set by the caller after this. */
static void fin_clock_setup(const struct xpt_rec_header *h) {
  struct pt_rclock *c = &pt_rclock;
  c->tsc = h->clock == XPT_REC_CLOCK_TSC;
  c->base = h->tsc_base;
  c->base_ns = h->tsc_base_ns;
  c->ns_per_tick = 1.0;
  c->skew_ns = 0;
#if defined(__x86_64__)
  if (c->tsc) {
    uint64_t t0 = __rdtsc(), ns = fin_mono_ns(), t1 = __rdtsc();
    uint64_t now = t0 + (t1 - t0) / 2;
    if (now > c->base && ns > c->base_ns)
      c->ns_per_tick = (double)(ns - c->base_ns) / (double)(now - c->base);
  }
#else
  c->tsc = false;
#endif
}

static uint64_t fin_clock_ns(uint64_t raw) { return pt_rclock_ns(raw); }

/* ---- descriptions: uid -> pt_desc ----------------------------------------- */

static struct pt_desc **fin_descs;
static size_t fin_descs_cap, fin_descs_n;

static size_t fin_desc_slot(uint64_t uid) {
  size_t j = (size_t)(uid * 0x9e3779b97f4a7c15ull) & (fin_descs_cap - 1);
  while (fin_descs[j] && fin_descs[j]->ev.unique_id != uid)
    j = (j + 1) & (fin_descs_cap - 1);
  return j;
}

static const xpti_trace_event_data_t *fin_desc_find(uint64_t uid) {
  if (!uid || !fin_descs_cap)
    return NULL;
  struct pt_desc *d = fin_descs[fin_desc_slot(uid)];
  return d ? &d->ev : NULL;
}

static void fin_desc_free_all(void) {
  for (size_t i = 0; i < fin_descs_cap; i++)
    free(fin_descs[i]);
  free(fin_descs);
  fin_descs = NULL;
  fin_descs_cap = fin_descs_n = 0;
}

/* One allocation holds the description, its strings and its metadata. */
static void fin_desc_add(uint64_t uid, const uint8_t *p, uint32_t len) {
  struct xpt_rec_desc d;
  if (!uid || len < sizeof d)
    return;
  memcpy(&d, p, sizeof d);
  size_t strings = (size_t)d.name_len + d.file_len;
  if (sizeof d + strings + d.meta_len > len)
    return; /* damaged */
  if ((fin_descs_n + 1) * 2 > fin_descs_cap) {
    size_t cap = fin_descs_cap ? fin_descs_cap * 2 : 256;
    struct pt_desc **t = calloc(cap, sizeof *t);
    if (!t)
      return;
    struct pt_desc **old = fin_descs;
    size_t old_cap = fin_descs_cap;
    fin_descs = t;
    fin_descs_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i])
        fin_descs[fin_desc_slot(old[i]->ev.unique_id)] = old[i];
    free(old);
  }
  size_t j = fin_desc_slot(uid);
  if (fin_descs[j] && fin_descs[j]->meta_count >= d.meta_count)
    return; /* known, and its metadata has not grown */
  struct pt_desc *x = calloc(1, sizeof *x + strings + 2 + d.meta_len);
  if (!x)
    return;
  char *name = (char *)(x + 1), *file = name + d.name_len + 1;
  uint8_t *meta = (uint8_t *)file + d.file_len + 1;
  memcpy(name, p + sizeof d, d.name_len);
  memcpy(file, p + sizeof d + d.name_len, d.file_len);
  memcpy(meta, p + sizeof d + strings, d.meta_len);
  x->payload.name = d.name_len ? name : NULL;
  x->payload.source_file = d.file_len ? file : NULL;
  x->payload.line_no = d.line;
  x->payload.column_no = d.column;
  x->payload.flags = d.payload_flags;
  x->payload.internal = uid;
  x->ev.unique_id = uid;
  x->ev.source_id = d.source_id;
  x->ev.target_id = d.target_id;
  x->ev.event_type = d.event_type;
  x->ev.activity_type = d.activity_type;
  x->ev.flags = d.event_flags;
  x->ev.reserved.payload = &x->payload;
  x->meta = meta;
  x->meta_len = d.meta_len;
  x->meta_count = d.meta_count;
  if (fin_descs[j])
    free(fin_descs[j]);
  else
    fin_descs_n++;
  fin_descs[j] = x;
}

/* ---- segments: runs of one thread's records --------------------------------- */

struct fin_seg {
  uint64_t key; /* pid << 32 | tid */
  uint64_t number;
  uint64_t ts0;
  const uint8_t *data;
  uint32_t from, to;
  uint32_t added; /* its index before the segments are sorted */
  char name[24];
};

static int fin_seg_cmp(const void *x, const void *y) {
  const struct fin_seg *a = x, *b = y;
  if (a->key != b->key)
    return a->key < b->key ? -1 : 1;
  return a->number < b->number ? -1 : a->number > b->number;
}

struct fin_thread_order {
  size_t first; /* index of its first segment */
  uint64_t ts0;
};

static int fin_thread_cmp(const void *x, const void *y) {
  const struct fin_thread_order *a = x, *b = y;
  if (a->ts0 != b->ts0)
    return a->ts0 < b->ts0 ? -1 : 1;
  return a->first < b->first ? -1 : a->first > b->first;
}

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

static bool fin_seg_add(struct fin *f, const struct fin_seg *s) {
  if (f->segs_n == f->segs_cap) {
    size_t cap = f->segs_cap ? f->segs_cap * 2 : 64;
    struct fin_seg *n = realloc(f->segs, cap * sizeof *n);
    if (!n) {
      f->damaged++;
      return false;
    }
    f->segs = n;
    f->segs_cap = cap;
  }
  f->segs[f->segs_n++] = *s;
  return true;
}

/* ---- pairing while scanning (pt_pair.h) ---------------------------- */

static void fin_release(const struct fin *f, const void *p, size_t len);

/* The thread of a segment that opens, when the segment is its next: it
 * is paired as it is scanned; NULL: held for its turn, or the thread is
 * paired after the scan. */
static struct pt_pair_thread *fin_seg_open(const struct fin_seg *seg) {
  struct pt_pair_thread *t = pt_pair_thread(seg->key, true);
  if (!t || t->disordered)
    return NULL;
  if (seg->number == t->next)
    return t;
  if (seg->number > t->next)
    pt_pair_hold(t, seg->number, seg->added);
  else
    pt_pair_disorder(t); /* a number twice */
  return NULL;
}

/* Pairs t's held segments: those whose turn has come, or (after the
 * scan, map given) all that are left, in order. */
static void fin_pair_held(struct fin *f, struct pt_pair_thread *t, const uint32_t *map) {
  struct pt_pair_held h;
  while (!t->disordered && pt_pair_take(t, map != NULL, &h)) {
    const struct fin_seg *s = &f->segs[map ? map[h.added] : h.added];
    pt_pair_segment(&t->pairer, s->data, s->from, s->to, h.added);
    fin_release(f, s->data + s->from, s->to - s->from);
    t->next = h.number + 1;
  }
}

/* A segment ended: it is added; a paired one lets held ones follow. */
static void fin_seg_close(struct fin *f, const struct fin_seg *seg, struct pt_pair_thread *paired) {
  bool added = fin_seg_add(f, seg);
  struct pt_pair_thread *t = paired ? paired : pt_pair_thread(seg->key, false);
  if (!t || t->disordered)
    return;
  if (!added) {
    pt_pair_disorder(t);
  } else if (paired) {
    t->next = seg->number + 1;
    fin_pair_held(f, t, NULL);
  }
}

/* Walk one chunk: descriptions go to the table, thread records open
 * segments.  Records are checked against the chunk's bounds. */
/* Pages of the recording or the spill file read through: their mapping
 * is dropped (the file keeps them, unchanged: a later read maps them
 * again), so that the finisher's memory is what it reads now, not the
 * recording's size (a 2.3 GB recording took 2.28 GB).  A fault maps the
 * pages around it that the page cache holds too (up to 64 KiB), pages
 * released before among them: the release reaches that far on both
 * sides, inside the mapping the range is in. */
enum { FIN_AROUND = 64 << 10 };
static void fin_release(const struct fin *f, const void *p, size_t len) {
  const uint8_t *lo = NULL, *hi = NULL, *q = p;
  if (f->map && q >= f->map && q < f->map + f->map_len)
    lo = f->map, hi = f->map + f->map_len;
  else if (f->spill && q >= f->spill && q < f->spill + f->spill_len)
    lo = f->spill, hi = f->spill + f->spill_len;
  if (!lo || !len)
    return;
  uintptr_t a = (uintptr_t)q > (uintptr_t)lo + FIN_AROUND ? (uintptr_t)q - FIN_AROUND : (uintptr_t)lo;
  uintptr_t b = (uintptr_t)q + len + FIN_AROUND < (uintptr_t)hi ? (uintptr_t)q + len + FIN_AROUND
                                                                 : (uintptr_t)hi;
  a &= ~(uintptr_t)4095; /* the mappings start on a page */
  b = (b + 4095) & ~(uintptr_t)4095;
  madvise((void *)a, b - a, MADV_DONTNEED);
}

static void fin_scan_chunk(struct fin *f, const struct xpt_rec_chunk *c, uint32_t cap) {
  const uint8_t *data = (const uint8_t *)(c + 1);
  uint32_t committed = atomic_load_explicit(&((struct xpt_rec_chunk *)c)->committed,
                                            memory_order_acquire);
  if (committed > cap)
    committed = cap;
  struct fin_seg seg = {0};
  struct pt_pair_thread *pairing = NULL; /* the open segment's, paired now */
  bool open = false;
  uint32_t off = 0;
  while (off + XPT_REC_MIN_SIZE <= committed) {
    if (pairing) { /* compact records: events of the open segment */
      off = pt_pair_compact(&pairing->pairer, data, off, committed, seg.added);
    } else if (open) {
      uint64_t w0;
      while (off + XPT_REC_COMPACT_SIZE <= committed &&
             (memcpy(&w0, data + off, 8), w0 & XPT_REC_COMPACT_BIT))
        off += XPT_REC_COMPACT_SIZE;
    }
    if (off + XPT_REC_MIN_SIZE > committed)
      break;
    struct xpt_rec_raw r;
    uint32_t size = xpt_rec_read(data + off, committed - off, &r);
    if (size == 0 || r.len > cap || size > committed - off) {
      f->damaged++;
      break;
    }
    if (r.kind == XPT_REC_DESC) {
      fin_desc_add(r.uid, data + off + sizeof r, r.len);
    } else if (r.kind == XPT_REC_THREAD && c->kind == XPT_REC_CHUNK_EVENTS) {
      if (open) {
        seg.to = off;
        fin_seg_close(f, &seg, pairing);
      }
      memset(&seg, 0, sizeof seg);
      seg.key = r.uid;
      seg.number = r.instance;
      seg.ts0 = r.ts;
      seg.data = data;
      seg.from = off + size;
      seg.added = (uint32_t)f->segs_n;
      size_t n = r.len < sizeof seg.name - 1 ? r.len : sizeof seg.name - 1;
      memcpy(seg.name, data + off + sizeof r, n);
      open = true;
      pairing = fin_seg_open(&seg);
    } else if (c->kind == XPT_REC_CHUNK_EVENTS && !open) {
      f->damaged++; /* a record outside any segment */
    } else if (pairing) {
      pt_pair_record(&pairing->pairer, &r, pt_pos(seg.added, off));
    }
    off += size;
  }
  if (open) {
    seg.to = off;
    fin_seg_close(f, &seg, pairing);
  }
  fin_release(f, c, sizeof *c + committed);
}

static int fin_u64_cmp(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

static int fin_ref_cmp(const void *x, const void *y) {
  const struct fin_ref *a = x, *b = y;
  if (a->gen != b->gen)
    return a->gen < b->gen ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void fin_ref_add(struct fin *f, uint64_t gen, const struct xpt_rec_chunk *c, uint32_t cap) {
  if (f->refs_n == f->refs_cap) {
    size_t n = f->refs_cap ? f->refs_cap * 2 : 256;
    struct fin_ref *r = realloc(f->refs, n * sizeof *r);
    if (!r) {
      fin_scan_chunk(f, c, cap); /* out of order: its thread is paired later */
      return;
    }
    f->refs = r;
    f->refs_cap = n;
  }
  f->refs[f->refs_n] = (struct fin_ref){gen, f->refs_n, c, cap};
  f->refs_n++;
}

static void fin_scan_refs(struct fin *f) {
  if (f->refs_n)
    qsort(f->refs, f->refs_n, sizeof *f->refs, fin_ref_cmp);
  for (size_t i = 0; i < f->refs_n; i++)
    fin_scan_chunk(f, f->refs[i].c, f->refs[i].cap);
}

static bool fin_spilled(const struct fin *f, uint64_t gen) {
  return f->spilled_n &&
         bsearch(&gen, f->spilled_gens, f->spilled_n, sizeof gen, fin_u64_cmp) != NULL;
}

/* The spill file (policy flush): chunk images, trusted up to the length
 * the header says was written whole. */
static void fin_read_spill(struct fin *f, int dirfd, const char *name) {
  char spill_name[300];
  snprintf(spill_name, sizeof spill_name, "%s%s", name, XPT_REC_SPILL_SUFFIX);
  int fd = openat(dirfd, spill_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return;
  struct stat st;
  uint64_t whole = atomic_load(&((struct xpt_rec_header *)f->h)->spilled);
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    size_t len = (size_t)st.st_size < whole ? (size_t)st.st_size : (size_t)whole;
    void *m = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (m != MAP_FAILED) {
      f->spill = m;
      f->spill_len = len;
    }
  }
  /* The entries' headers are read, not mapped: their pages stay out of
   * memory until their chunk's turn comes (fin_scan_refs). */
  size_t cap = 0, off = 0;
  while (f->spill && off + sizeof(struct xpt_rec_spill) <= f->spill_len) {
    struct xpt_rec_spill e;
    struct xpt_rec_chunk ch;
    uint8_t head[sizeof e + sizeof ch];
    if (pread(fd, head, sizeof head, (off_t)off) != (ssize_t)sizeof head) {
      f->damaged++;
      break;
    }
    memcpy(&e, head, sizeof e);
    memcpy(&ch, head + sizeof e, sizeof ch);
    if (e.magic != XPT_REC_SPILL_MAGIC || e.bytes < sizeof(struct xpt_rec_chunk) ||
        e.bytes > f->h->chunk_size || e.bytes > f->spill_len - off - sizeof e) {
      f->damaged++;
      break;
    }
    const struct xpt_rec_chunk *c = (const struct xpt_rec_chunk *)(f->spill + off + sizeof e);
    if (f->spilled_n == cap) {
      cap = cap ? cap * 2 : 256;
      uint64_t *g = realloc(f->spilled_gens, cap * sizeof *g);
      if (!g)
        break;
      f->spilled_gens = g;
    }
    f->spilled_gens[f->spilled_n++] = e.gen;
    if (ch.magic == XPT_REC_CHUNK_MAGIC)
      fin_ref_add(f, e.gen, c, e.bytes - (uint32_t)sizeof *c);
    off += sizeof e + e.bytes;
  }
  close(fd);
  if (f->spilled_n)
    qsort(f->spilled_gens, f->spilled_n, sizeof *f->spilled_gens, fin_u64_cmp);
}

static void fin_graph_add(struct fin *f, const struct pt_rec *r) {
  if (f->graph_n == f->graph_cap) {
    size_t cap = f->graph_cap ? f->graph_cap * 2 : 64;
    struct pt_graph_rec *g = realloc(f->graph, cap * sizeof *g);
    if (!g) {
      f->damaged++;
      return;
    }
    f->graph = g;
    f->graph_cap = cap;
  }
  f->graph[f->graph_n++] =
      (struct pt_graph_rec){r->ts, r->event, r->instance, r->type, r->stream, 0};
}

static const struct pt_encoder *fin_enc;

static void fin_out_flush(struct fin *f) {
  const uint8_t *p = f->out.data;
  size_t n = f->out.len;
  while (n && !f->failed) {
    ssize_t w = write(f->fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      f->failed = true;
      f->err = w < 0 ? errno : ENOSPC;
      break;
    }
    p += w;
    n -= (size_t)w;
  }
  if (f->out.failed && !f->failed) {
    f->failed = true;
    f->err = ENOMEM;
  }
  f->out.len = 0;
}

/* ---- whole slices: the halves whose other half was not recorded ------- */

/* Pairs the begins and ends of a thread's segments [first, end) by trace
 * point (0: a NULL event; ends carry no name) and instance, innermost
 * first, and hands pt_handoff.c what has no other half here: an end whose
 * begin is not on this thread (sent by another, or lost: ring), a begin
 * an enclosing end closed (ended elsewhere, or its end was lost), a begin
 * still open at the end.  Those pt_handoff_match cannot pair across
 * threads are removed (an open begin only when anything was lost):
 * drawn, each would nest later slices under one they did not run in.
 * A thread whose segments the scan read in order was paired then. */
static void fin_pair(struct fin *f, size_t first, size_t end, const uint32_t *map) {
  struct pt_pair_thread *t = pt_pair_thread(f->segs[first].key, false);
  if (t)
    fin_pair_held(f, t, map);
  bool ok;
  if (t && !t->disordered) {
    ok = pt_pair_hand(&t->pairer, map);
  } else {
    struct pt_pairer p = {0};
    for (size_t i = first; i < end; i++) {
      const struct fin_seg *s = &f->segs[i];
      pt_pair_segment(&p, s->data, s->from, s->to, (uint32_t)i);
      fin_release(f, s->data + s->from, s->to - s->from);
    }
    ok = pt_pair_hand(&p, NULL);
    pt_pair_free(&p);
  }
  if (!ok && !f->failed) {
    f->failed = true;
    f->err = ENOMEM;
  }
}

/* Encode one segment's records; ts never goes back on a thread. */
static void fin_encode_segment(struct fin *f, struct pt_thread *t, size_t seg, size_t *next) {
  size_t places_n;
  const struct pt_half_place *places = pt_handoff_places(&places_n);
  _Alignas(16) uint8_t buf[sizeof(struct pt_rec) + 1024];
  const struct fin_seg *s = &f->segs[seg];
  uint32_t off = s->from;
  while (off < s->to) {
    uint64_t w0;
    memcpy(&w0, s->data + off, sizeof w0);
    if ((w0 & XPT_REC_COMPACT_BIT) && fin_enc->compact) {
      /* the common way, up to the next record whose fate was decided */
      uint32_t stop = s->to;
      if (*next < places_n && places[*next].pos >> 32 == seg &&
          (uint32_t)places[*next].pos >= off)
        stop = (uint32_t)places[*next].pos;
      size_t k = fin_enc->compact(&f->out, t, s->data + off, stop - off);
      off += (uint32_t)k * XPT_REC_COMPACT_SIZE;
      f->records += k;
      if (f->out.len >= PT_OUT_FLUSH)
        fin_out_flush(f);
      if (k)
        continue;
    }
    struct xpt_rec_raw raw;
    uint32_t size = xpt_rec_read(s->data + off, s->to - off, &raw);
    uint64_t pos = pt_pos(seg, off);
    off += size;
    if (raw.kind == XPT_REC_DESC || raw.kind == XPT_REC_THREAD)
      continue;
    if (raw.len > sizeof buf - sizeof(struct pt_rec) || raw.kind > XPT_REC_EDGE) {
      f->damaged++;
      continue;
    }
    const struct pt_half_place *fate = NULL;
    if (*next < places_n && places[*next].pos == pos)
      fate = &places[(*next)++];
    if (fate && fate->fate == PT_FATE_DROP) {
      f->damaged++; /* counted with the dropped events */
      f->unpaired++;
      continue;
    }
    if (fate && fate->fate == PT_FATE_SKIP) { /* drawn with its begin */
      f->records++;
      continue;
    }
    f->records++;
    struct pt_rec *r = (struct pt_rec *)buf;
    memcpy(buf, &raw, sizeof raw);
    if (raw.len) /* only full records have inline bytes */
      memcpy(buf + sizeof raw, s->data + off - size + sizeof raw, raw.len);
    r->event = fin_desc_find(raw.uid);
    uint64_t ts = fin_clock_ns(raw.ts);
    if (ts < t->last_ns)
      ts = t->last_ns;
    t->last_ns = ts;
    r->ts = ts;
    if (fate) {
      pt_handoff_draw(r, buf + sizeof raw, fin_clock_ns(fate->end_ts));
    } else if (r->pad == PT_INLINE_TIMED) {
      pt_dev_add(r);
    } else if (pt_kind_fast(r->type) == PT_KIND_GRAPH) {
      fin_graph_add(f, r);
      if (r->pad == PT_INLINE_EDGE && r->event) {
        struct pt_edge_inline e;
        memcpy(&e, r + 1, sizeof e);
        pt_dev_edge(r->event->source_id, e.source_instance, r->event->target_id,
                    e.target_instance);
      }
    } else {
      fin_enc->thread_record(&f->out, t, r, ts);
      pt_slices_record(r, ts);
    }
    if (f->out.len >= PT_OUT_FLUSH)
      fin_out_flush(f);
  }
  fin_release(f, s->data + s->from, s->to - s->from);
}

static void fin_encode(struct fin *f) {
  if (f->segs_n)
    qsort(f->segs, f->segs_n, sizeof *f->segs, fin_seg_cmp);
  size_t threads = 0;
  for (size_t i = 0; i < f->segs_n; i++)
    threads += i == 0 || f->segs[i].key != f->segs[i - 1].key;
  struct fin_thread_order *order = calloc(threads ? threads : 1, sizeof *order);
  uint32_t *map = malloc((f->segs_n ? f->segs_n : 1) * sizeof *map); /* added -> sorted */
  if (!order || !map) {
    free(order);
    free(map);
    f->failed = true;
    f->err = ENOMEM;
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < f->segs_n; i++)
    map[f->segs[i].added] = (uint32_t)i;
  for (size_t i = 0; i < f->segs_n; i++)
    if (i == 0 || f->segs[i].key != f->segs[i - 1].key)
      order[k++] = (struct fin_thread_order){i, f->segs[i].ts0};
  /* Threads numbered in the order they first recorded. */
  qsort(order, threads, sizeof *order, fin_thread_cmp);
  /* Every thread's unpaired halves first: a slice's end may be on a
   * thread drawn before its begin's. */
  for (size_t n = 0; n < threads; n++) {
    size_t i = order[n].first, end = i;
    while (end < f->segs_n && f->segs[end].key == f->segs[i].key)
      end++;
    fin_pair(f, i, end, map);
  }
  free(map);
  bool lost = atomic_load(&((struct xpt_rec_header *)f->h)->dropped) || f->damaged;
  if (!f->failed && !pt_handoff_match(lost)) {
    f->failed = true;
    f->err = ENOMEM;
  }
  fin_enc->begin_file(&f->out);
  for (size_t n = 0; n < threads && !f->failed; n++) {
    size_t i = order[n].first;
    struct pt_thread t;
    memset(&t, 0, sizeof t);
    t.pid = (pid_t)(f->segs[i].key >> 32);
    t.tid = (pid_t)(uint32_t)f->segs[i].key;
    t.index = (uint32_t)n + 1;
    memcpy(t.name, f->segs[i].name, sizeof t.name);
    size_t end = i;
    while (end < f->segs_n && f->segs[end].key == f->segs[i].key)
      end++;
    size_t next = pt_handoff_from(pt_pos(i, 0));
    pt_slices_thread();
    for (; i < end; i++)
      fin_encode_segment(f, &t, i, &next);
    free(t.open);
    free(t.seq.interned);
    free(t.seq.seen);
  }
  free(order);
  pt_slices_thread(); /* the last thread's open slices */
  pt_dev_pass(&f->out, fin_enc, true, fin_mono_ns());
  if (f->graph_n)
    fin_enc->graph(&f->out, f->graph, f->graph_n);
  uint64_t dropped = atomic_load(&((struct xpt_rec_header *)f->h)->dropped) + pt_dev_dropped() +
                     f->damaged;
  if (dropped)
    fin_enc->dropped(&f->out, dropped, fin_mono_ns());
  if (fin_enc->trailer)
    pt_buf_str(&f->out, fin_enc->trailer);
  fin_out_flush(f);
}

/* ---- files ------------------------------------------------------------------ */

/* "events.xprec" -> "trace.perfetto-trace", "events.2.xprec" -> "trace.2.perfetto-trace" */
static void fin_trace_name(const char *rec, bool json, char *buf, size_t len) {
  const char *ext = json ? "json" : "perfetto-trace";
  const char *mid = rec + strlen("events");
  size_t mid_len = strlen(mid) - strlen(".xprec");
  snprintf(buf, len, "trace%.*s.%s", (int)mid_len, mid, ext);
}

/* Put the finished temporary file in place under `want`, or a new name
 * when that is taken (never replacing a file). */
static int fin_publish(int dirfd, const char *tmp, const char *want, char *got, size_t len) {
  const char *dot = strchr(want, '.');
  size_t stem = dot ? (size_t)(dot - want) : strlen(want);
  for (int n = 0; n < 1000; n++) {
    if (n == 0)
      snprintf(got, len, "%s", want);
    else
      snprintf(got, len, "%.*s-%d%s", (int)stem, want, n, dot ? dot : "");
    if (renameat2(dirfd, tmp, dirfd, got, RENAME_NOREPLACE) == 0)
      return 0;
    if (errno == EEXIST)
      continue;
    if (errno != EINVAL && errno != ENOSYS)
      return errno;
    if (linkat(dirfd, tmp, dirfd, got, 0) == 0) { /* no RENAME_NOREPLACE here */
      unlinkat(dirfd, tmp, 0);
      return 0;
    }
    if (errno != EEXIST)
      return errno;
  }
  return EEXIST;
}

static bool fin_header_ok(const struct xpt_rec_header *h, size_t size) {
  return size >= XPT_REC_HEADER_SIZE && h->magic == XPT_REC_MAGIC &&
         h->version == XPT_REC_VERSION && h->header_size == XPT_REC_HEADER_SIZE &&
         h->chunk_size >= XPT_REC_CHUNK_MIN && h->chunk_size % 4096 == 0;
}

static void fin_reset(void) {
  pt_pair_threads_reset();
  pt_dev_reset();
  pt_handoff_reset();
  pt_str_reset();
  pt_encoders_reset();
  fin_desc_free_all();
}

/* Whether the process that made the recording on fd is gone. */
static bool fin_owner_dead(int fd) {
  struct xpt_rec_header h;
  if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || h.magic != XPT_REC_MAGIC || h.pid <= 0)
    return false;
  return kill(h.pid, 0) != 0 && errno == ESRCH;
}

int xpt_finish_recording(const char *dir, const char *name, const char *prefix,
                         struct xpt_finish_result *res) {
  memset(res, 0, sizeof *res);
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    xpt_msg("%s cannot open '%s': %s", prefix, dir, strerror(errno));
    return -1;
  }
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int e = errno;
    close(dirfd);
    if (e == ENOENT)
      return 1;
    xpt_msg("%s cannot open '%s/%s': %s", prefix, dir, name, strerror(e));
    return -1;
  }
  /* One finisher per recording, and none while its process lives (it
   * holds a shared lock): a lock goes with its holder's death.  A child
   * forked just before its parent died holds the parent's lock until its
   * fork handler closes the inherited descriptor: wait for that. */
  bool locked = flock(fd, LOCK_EX | LOCK_NB) != 0;
  for (int i = 0; locked && i < 200 && fin_owner_dead(fd); i++) {
    struct timespec pause = {0, 10 * 1000000};
    nanosleep(&pause, NULL);
    locked = flock(fd, LOCK_EX | LOCK_NB) != 0;
  }
  if (locked) {
    struct xpt_rec_header h;
    if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && h.magic == XPT_REC_MAGIC) {
      res->pid = h.pid;
      memcpy(res->program, h.program, sizeof res->program);
      res->program[sizeof res->program - 1] = '\0';
    }
    snprintf(res->trace, sizeof res->trace, "%s", dir);
    res->busy = true;
    close(fd);
    close(dirfd);
    return 2;
  }
  struct stat st;
  int rc = -1;
  struct fin f;
  memset(&f, 0, sizeof f);
  f.fd = -1;
  char tmp[320] = "", trace[256];
  if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
    rc = 1; /* another finisher had it first and removed it (a shared -o) */
    goto out;
  }
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < XPT_REC_HEADER_SIZE) {
    xpt_msg("%s '%s/%s' is not a recording (too short)", prefix, dir, name);
    goto out;
  }
  f.map_len = (size_t)st.st_size;
  f.map = mmap(NULL, f.map_len, PROT_READ, MAP_SHARED, fd, 0);
  if (f.map == MAP_FAILED) {
    f.map = NULL;
    xpt_msg("%s cannot map '%s/%s': %s", prefix, dir, name, strerror(errno));
    goto out;
  }
  f.h = (const struct xpt_rec_header *)f.map;
  if (!fin_header_ok(f.h, f.map_len)) {
    xpt_msg("%s '%s/%s' is not a recording of this version", prefix, dir, name);
    goto out;
  }
  if (atomic_load(&((struct xpt_rec_header *)f.h)->state) == XPT_REC_DONE) {
    rc = 1;
    goto out;
  }
  fin_reset();
  pt_format = f.h->format == XPT_REC_FORMAT_JSON ? PT_FORMAT_JSON : PT_FORMAT_PROTO;
  fin_enc = pt_format == PT_FORMAT_JSON ? &pt_json_encoder : &pt_proto_encoder;
  pt_annotate_all = f.h->annotate_all != 0;
  memset(&pt_proc, 0, sizeof pt_proc);
  pt_proc.pid = f.h->pid;
  pt_proc.start_ns = f.h->start_ns;
  pt_proc.forked = f.h->forked != 0;
  memcpy(pt_proc.program, f.h->program, sizeof pt_proc.program);
  pt_proc.program[sizeof pt_proc.program - 1] = '\0';
  pt_proc.stream_names = (const char *)f.map + XPT_REC_STREAMS_OFF;
  pt_proc.tool_names = (const char *)f.map + XPT_REC_TOOLS_OFF;
  pt_kind_reset();
  fin_clock_setup(f.h);
  /* An MPI rank (the MPI layer's mpi-clock file): named by rank. */
  struct xpt_mpi_clock mc;
  if (xpt_mpi_clock_find(dir, f.h->pid, &mc) == 0) {
    pt_rclock.skew_ns = mc.test_offset_ns;
    char suffix[32];
    int n = snprintf(suffix, sizeof suffix, " rank %d/%d", mc.rank, mc.size);
    size_t keep = sizeof pt_proc.program - 1 - (size_t)n, len = strlen(pt_proc.program);
    memcpy(pt_proc.program + (len < keep ? len : keep), suffix, (size_t)n + 1);
  }

  /* Chunks copied out to the spill file first (whole entries only), then
   * those still in the ring that were not (their generation tells). */
  fin_read_spill(&f, dirfd, name);
  uint64_t chunks = (f.map_len - XPT_REC_HEADER_SIZE) / f.h->chunk_size;
  uint64_t written = atomic_load(&((struct xpt_rec_header *)f.h)->chunks_used);
  if (f.h->policy == XPT_REC_FLUSH && written && written < chunks)
    chunks = written; /* the rest were never handed out (holes) */
  for (uint64_t i = 0; i < chunks; i++) {
    const struct xpt_rec_chunk *c =
        (const struct xpt_rec_chunk *)(f.map + XPT_REC_HEADER_SIZE + i * f.h->chunk_size);
    if (c->magic != XPT_REC_CHUNK_MAGIC) {
      fin_release(&f, c, sizeof *c); /* never used */
      continue;
    }
    /* Copied out (free or not): read there.  A free chunk whose copy is
     * not in the part of the spill file read here is read from the ring,
     * where it still is (not reused: it would have a new generation). */
    if (fin_spilled(&f, atomic_load(&((struct xpt_rec_chunk *)c)->gen))) {
      fin_release(&f, c, sizeof *c); /* its header was read */
      continue;
    }
    uint64_t gen = atomic_load(&((struct xpt_rec_chunk *)c)->gen);
    fin_release(&f, c, sizeof *c); /* mapped again in its turn */
    fin_ref_add(&f, gen, c, f.h->chunk_size - (uint32_t)sizeof *c);
  }
  fin_scan_refs(&f);

  fin_trace_name(name, pt_format == PT_FORMAT_JSON, trace, sizeof trace);
  snprintf(tmp, sizeof tmp, ".%s.tmp-%d", trace, (int)getpid());
  unlinkat(dirfd, tmp, 0); /* our own leftover, if any */
  f.fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (f.fd < 0) {
    xpt_msg("%s cannot create '%s/%s': %s", prefix, dir, tmp, strerror(errno));
    tmp[0] = '\0';
    goto out;
  }
  fin_encode(&f);
  if (!f.failed && fsync(f.fd) != 0 && errno != EINVAL) {
    f.failed = true;
    f.err = errno;
  }
  if (f.failed) {
    xpt_msg("%s cannot write the trace of '%s/%s': %s; the recording is kept", prefix,
            dir, name, strerror(f.err));
    goto out;
  }
  char got[256];
  int e = fin_publish(dirfd, tmp, trace, got, sizeof got);
  if (e) {
    xpt_msg("%s cannot name the trace '%s/%s': %s; the recording is kept", prefix, dir,
            trace, strerror(e));
    goto out;
  }
  tmp[0] = '\0';
  snprintf(res->trace, sizeof res->trace, "%s/%s", dir, got);
  res->pid = f.h->pid;
  memcpy(res->program, pt_proc.program, sizeof res->program);
  res->records = f.records;
  res->dropped = atomic_load(&((struct xpt_rec_header *)f.h)->dropped) + f.damaged;
  res->unpaired = f.unpaired;
  res->disk_full = (int)atomic_load(&((struct xpt_rec_header *)f.h)->disk_full);
  unlinkat(dirfd, name, 0);
  char spill_name[300];
  snprintf(spill_name, sizeof spill_name, "%s%s", name, XPT_REC_SPILL_SUFFIX);
  unlinkat(dirfd, spill_name, 0);
  rc = 0;
out:
  if (f.fd >= 0)
    close(f.fd);
  if (tmp[0])
    unlinkat(dirfd, tmp, 0);
  if (f.map)
    munmap((void *)f.map, f.map_len);
  if (f.spill)
    munmap((void *)f.spill, f.spill_len);
  free(f.spilled_gens);
  free(f.refs);
  free(f.segs);
  free(f.graph);
  free(f.out.data);
  fin_reset();
  close(fd);
  close(dirfd);
  return rc;
}

static bool fin_is_recording(const char *n) {
  size_t len = strlen(n);
  return len >= 12 && !strncmp(n, "events", 6) && !strcmp(n + len - 6, ".xprec");
}

static int fin_tree(const char *dir, const char *prefix, int depth,
                    void (*each)(const struct xpt_finish_result *, void *), void *ctx) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int written = 0;
  bool failed = false;
  struct dirent *e;
  char sub[4096];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    if (e->d_type == DT_DIR && depth < 16) {
      snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
      int n = fin_tree(sub, prefix, depth + 1, each, ctx);
      failed |= n < 0;
      written += n > 0 ? n : 0;
    } else if (e->d_type == DT_REG && fin_is_recording(e->d_name)) {
      struct xpt_finish_result res;
      int rc = xpt_finish_recording(dir, e->d_name, prefix, &res);
      if (rc == 0)
        written++;
      if ((rc == 0 || rc == 2) && each)
        each(&res, ctx);
      failed |= rc < 0;
    }
  }
  closedir(d);
  return failed ? -1 : written;
}

int xpt_finish_tree(const char *dir, const char *prefix,
                    void (*each)(const struct xpt_finish_result *, void *), void *ctx) {
  return fin_tree(dir, prefix, 0, each, ctx);
}
