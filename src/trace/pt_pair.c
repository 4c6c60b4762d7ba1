/* Pairing a thread's begins and ends (pt_finish.c): what has no other
 * half on its thread goes to pt_handoff.c.  The finisher pairs each
 * thread while it scans the recording, as long as the thread's segments
 * come in order (the usual case: a thread's chunks are copied out in the
 * order it filled them), so that the records are read once for both; a
 * thread whose segments come out of order is paired again afterwards,
 * segment after segment. */
#include <stdlib.h>
#include <string.h>

#include "pt_pair.h"

static bool pair_half(struct pt_pairer *p, const struct pt_pair_open *o, enum pt_half_kind kind) {
  if (p->hn == p->hcap) {
    size_t cap = p->hcap ? p->hcap * 2 : 16;
    struct pt_pair_half *h = realloc(p->halves, cap * sizeof *h);
    if (!h) {
      p->failed = true;
      return false;
    }
    p->halves = h;
    p->hcap = cap;
  }
  p->halves[p->hn++] = (struct pt_pair_half){*o, (uint8_t)kind};
  return true;
}

/* One begin or end (innermost first, by trace point and instance). */
static void pair_one(struct pt_pairer *p, enum pt_kind kind, const struct pt_pair_open *o) {
  if (kind == PT_KIND_BEGIN) {
    if (p->n == p->cap) {
      size_t c = p->cap ? p->cap * 2 : 64;
      struct pt_pair_open *x = realloc(p->open, c * sizeof *x);
      if (!x) {
        pair_half(p, o, PT_HALF_CLOSED); /* cannot pair it here */
        return;
      }
      p->open = x;
      p->cap = c;
    }
    p->open[p->n++] = *o;
    return;
  }
  size_t j = p->n;
  while (j > 0 && (p->open[j - 1].uid != o->uid || p->open[j - 1].instance != o->instance))
    j--;
  if (j == 0) {
    pair_half(p, o, PT_HALF_END);
    return;
  }
  while (p->n > j)
    pair_half(p, &p->open[--p->n], PT_HALF_CLOSED);
  p->n--;
}

uint32_t pt_pair_compact(struct pt_pairer *p, const uint8_t *data, uint32_t off, uint32_t end,
                         uint32_t seg) {
  struct pt_pair_open *open = p->open;
  size_t n = p->n;
  while (off + XPT_REC_COMPACT_SIZE <= end) {
    uint64_t w[2];
    memcpy(w, data + off, sizeof w);
    if (!(w[0] & XPT_REC_COMPACT_BIT))
      break;
    enum pt_kind kind = pt_kind_fast((uint16_t)(w[1] >> 40));
    uint64_t uid = w[1] & XPT_REC_COMPACT_UID_MAX;
    if (kind == PT_KIND_END && n && open[n - 1].uid == uid && !open[n - 1].instance) {
      n--; /* the innermost begin's end: the commonest */
    } else if (kind == PT_KIND_BEGIN && n < p->cap) {
      open[n++] = (struct pt_pair_open){uid, 0, w[0] & ~XPT_REC_COMPACT_BIT, pt_pos(seg, off)};
    } else if (kind == PT_KIND_BEGIN || kind == PT_KIND_END) {
      struct pt_pair_open o = {uid, 0, w[0] & ~XPT_REC_COMPACT_BIT, pt_pos(seg, off)};
      p->n = n;
      pair_one(p, kind, &o);
      open = p->open;
      n = p->n;
    }
    off += XPT_REC_COMPACT_SIZE;
  }
  p->n = n;
  return off;
}

void pt_pair_record(struct pt_pairer *p, const struct xpt_rec_raw *raw, uint64_t pos) {
  if (raw->kind != XPT_REC_EVENT || raw->len > 1024)
    return;
  enum pt_kind kind = pt_kind_fast(raw->type);
  if (kind != PT_KIND_BEGIN && kind != PT_KIND_END)
    return;
  struct pt_pair_open o = {raw->uid, raw->instance, raw->ts, pos};
  pair_one(p, kind, &o);
}

void pt_pair_segment(struct pt_pairer *p, const uint8_t *data, uint32_t from, uint32_t to,
                     uint32_t seg) {
  for (uint32_t off = from; off < to;) {
    off = pt_pair_compact(p, data, off, to, seg);
    if (off >= to)
      break;
    struct xpt_rec_raw raw;
    uint32_t size = xpt_rec_read(data + off, to - off, &raw); /* checked by the scan */
    if (!size)
      break;
    pt_pair_record(p, &raw, pt_pos(seg, off));
    off += size;
  }
}

bool pt_pair_hand(struct pt_pairer *p, const uint32_t *map) {
  bool ok = !p->failed;
  for (size_t k = 0; k < p->hn + p->n; k++) {
    bool open = k >= p->hn;
    struct pt_pair_open o = open ? p->open[k - p->hn] : p->halves[k].o;
    if (map)
      o.pos = pt_pos(map[o.pos >> 32], (uint32_t)o.pos);
    ok &= pt_handoff_add(o.uid, o.instance, o.ts, o.pos,
                         open ? PT_HALF_OPEN : (enum pt_half_kind)p->halves[k].kind);
  }
  return ok;
}

void pt_pair_free(struct pt_pairer *p) {
  free(p->open);
  free(p->halves);
  memset(p, 0, sizeof *p);
}

/* ---- threads paired while the recording is scanned ----------------- */

static struct pt_pair_thread *pt_threads;
static size_t pt_threads_cap, pt_threads_n;

static size_t thread_slot(const struct pt_pair_thread *tab, size_t cap, uint64_t key) {
  size_t j = (size_t)(key * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
  while (tab[j].used && tab[j].key != key)
    j = (j + 1) & (cap - 1);
  return j;
}

struct pt_pair_thread *pt_pair_thread(uint64_t key, bool make) {
  if (make && (pt_threads_n + 1) * 2 > pt_threads_cap) {
    size_t cap = pt_threads_cap ? pt_threads_cap * 2 : 64;
    struct pt_pair_thread *tab = calloc(cap, sizeof *tab);
    if (!tab)
      return NULL;
    for (size_t i = 0; i < pt_threads_cap; i++)
      if (pt_threads[i].used)
        tab[thread_slot(tab, cap, pt_threads[i].key)] = pt_threads[i];
    free(pt_threads);
    pt_threads = tab;
    pt_threads_cap = cap;
  }
  if (!pt_threads_cap)
    return NULL;
  struct pt_pair_thread *t = &pt_threads[thread_slot(pt_threads, pt_threads_cap, key)];
  if (!t->used) {
    if (!make)
      return NULL;
    memset(t, 0, sizeof *t);
    t->used = true;
    t->key = key;
    pt_threads_n++;
  }
  return t;
}

bool pt_pair_hold(struct pt_pair_thread *t, uint64_t number, uint32_t added) {
  for (size_t i = 0; i < t->held_n; i++)
    if (t->held[i].number == number) {
      pt_pair_disorder(t);
      return false;
    }
  if (t->held_n == t->held_cap) {
    size_t cap = t->held_cap ? t->held_cap * 2 : 8;
    struct pt_pair_held *h = realloc(t->held, cap * sizeof *h);
    if (!h) {
      pt_pair_disorder(t);
      return false;
    }
    t->held = h;
    t->held_cap = cap;
  }
  t->held[t->held_n++] = (struct pt_pair_held){number, added};
  return true;
}

bool pt_pair_take(struct pt_pair_thread *t, bool any, struct pt_pair_held *h) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < t->held_n; i++)
    if (any ? best == SIZE_MAX || t->held[i].number < t->held[best].number
            : t->held[i].number == t->next)
      best = i;
  if (best == SIZE_MAX)
    return false;
  *h = t->held[best];
  t->held[best] = t->held[--t->held_n];
  return true;
}

void pt_pair_disorder(struct pt_pair_thread *t) {
  t->disordered = true;
  pt_pair_free(&t->pairer);
  free(t->held);
  t->held = NULL;
  t->held_n = t->held_cap = 0;
}

void pt_pair_threads_reset(void) {
  for (size_t i = 0; i < pt_threads_cap; i++) {
    pt_pair_free(&pt_threads[i].pairer);
    free(pt_threads[i].held);
  }
  free(pt_threads);
  pt_threads = NULL;
  pt_threads_cap = pt_threads_n = 0;
}
