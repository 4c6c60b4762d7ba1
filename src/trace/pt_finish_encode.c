/* The finisher's encoding (pt_finish_internal.h): each thread's segments
 * in order through the encoder, slices whose other half was not recorded
 * handed to pt_handoff.c, the output written as it fills. */
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

PT_HIDDEN void fin_graph_add(struct fin *f, const struct pt_rec *r) {
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

const struct pt_encoder *fin_enc;

PT_HIDDEN void fin_out_flush(struct fin *f) {
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

PT_HIDDEN void fin_encode(struct fin *f) {
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

