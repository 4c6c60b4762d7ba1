/* The finisher's scan (pt_finish_internal.h): the recording's chunks,
 * and those spilled to its spill file, cut into runs of one thread's
 * records (segments), each thread paired as it is scanned (pt_pair.h). */
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


#include "pt_finish_internal.h"
#include "xpt_msg.h"

/* ---- segments: runs of one thread's records --------------------------------- */

PT_HIDDEN int fin_seg_cmp(const void *x, const void *y) {
  const struct fin_seg *a = x, *b = y;
  if (a->key != b->key)
    return a->key < b->key ? -1 : 1;
  return a->number < b->number ? -1 : a->number > b->number;
}

PT_HIDDEN int fin_thread_cmp(const void *x, const void *y) {
  const struct fin_thread_order *a = x, *b = y;
  if (a->ts0 != b->ts0)
    return a->ts0 < b->ts0 ? -1 : 1;
  return a->first < b->first ? -1 : a->first > b->first;
}


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
PT_HIDDEN void fin_pair_held(struct fin *f, struct pt_pair_thread *t, const uint32_t *map) {
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

/* Pages of the recording or the spill file read through: their mapping
 * is dropped (the file keeps them, unchanged: a later read maps them
 * again), so that the finisher's memory is what it reads now, not the
 * recording's size (a 2.3 GB recording took 2.28 GB).  A fault maps the
 * pages around it that the page cache holds too (up to 64 KiB), pages
 * released before among them: the release reaches that far on both
 * sides, inside the mapping the range is in. */
enum { FIN_AROUND = 64 << 10 };
PT_HIDDEN void fin_release(const struct fin *f, const void *p, size_t len) {
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

/* Walk one chunk: descriptions go to the table, thread records open
 * segments.  Records are checked against the chunk's bounds. */
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

PT_HIDDEN void fin_ref_add(struct fin *f, uint64_t gen, const struct xpt_rec_chunk *c, uint32_t cap) {
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

PT_HIDDEN void fin_scan_refs(struct fin *f) {
  if (f->refs_n)
    qsort(f->refs, f->refs_n, sizeof *f->refs, fin_ref_cmp);
  for (size_t i = 0; i < f->refs_n; i++)
    fin_scan_chunk(f, f->refs[i].c, f->refs[i].cap);
}

PT_HIDDEN bool fin_spilled(const struct fin *f, uint64_t gen) {
  return f->spilled_n &&
         bsearch(&gen, f->spilled_gens, f->spilled_n, sizeof gen, fin_u64_cmp) != NULL;
}

/* The spill file (policy flush): chunk images, trusted up to the length
 * the header says was written whole. */
PT_HIDDEN void fin_read_spill(struct fin *f, int dirfd, const char *name) {
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

