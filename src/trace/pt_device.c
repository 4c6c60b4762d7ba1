/* Device work on tracks of its own.  Timed slices (xptrace_protocol.h)
 * are held by the writer for a while, so that the edges joining them can
 * arrive (an edge may be drained a pass after its slices), then drawn at
 * their own times on a track per track id: sorted by begin, each on the
 * first lane whose last slice has ended, a new lane when none has.  Every
 * lane thus holds disjoint slices in time order.  Writer only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pt_common.h"

/* Held at least this long after being drained: an edge recorded before
 * a slice is drained at most one pass after it. */
#define PT_DEV_HOLD_NS 200000000ull
/* A source whose edge's target has not completed yet waits up to this. */
#define PT_DEV_WAIT_NS 2000000000ull
#define PT_DEV_HELD_MAX 65536
#define PT_DEV_LANES_MAX 4096u
#define PT_DEV_NEST_LANES_MAX 65536u /* handed-on slices: a queue's depth */
#define PT_DEV_TRACKS_MAX ((1u << 18) - 1u)
#define PT_DEV_FLOWS_MAX 32

struct pt_dev_slice {
  uint64_t begin, end, track_id, instance, drained;
  const xpti_trace_event_data_t *event;
  const char *name;       /* interned; NULL: the event's payload name */
  const char *track_name; /* interned; NULL: none given */
  uint8_t stream;
  bool waits; /* source of an edge whose target is not here yet */
};

struct pt_dev_track {
  uint64_t id;
  const char *name;
  uint32_t lanes, cap;
  uint64_t *lane_end;
  /* Handed-on slices nest (10,000 tasks begun in order and ended in
   * reverse are one lane): per lane, the ends of its open slices. */
  struct pt_dev_stack {
    uint64_t *end;
    uint32_t n, cap;
  } *nest;
  /* ... and their lanes in a min-heap by last end, so that thousands in
   * flight at once (a queue) find a free lane in log time. */
  uint32_t *heap, last_lane;
};

struct pt_dev_edge {
  uint64_t src_uid, src_inst, dst_uid, dst_inst;
  uint64_t flow; /* 0: not drawn (yet) */
  size_t next_by_src, next_by_dst;
};

/* (uid, instance) -> an index; open addressing, SIZE_MAX = none. */
struct pt_dev_map {
  struct pt_dev_key {
    uint64_t uid, inst;
    size_t value;
  } *slot;
  size_t cap, n;
};

static struct pt_dev_slice *dev_held;
static size_t dev_held_n, dev_held_cap;
static struct pt_dev_track *dev_tracks;
static size_t dev_tracks_n, dev_tracks_cap, dev_track_last;
static struct pt_dev_edge *dev_edges;
static size_t dev_edges_n, dev_edges_cap;
static struct pt_dev_map dev_by_src, dev_by_dst, dev_held_at;
static uint64_t dev_dropped, dev_flows;
static struct pt_seq dev_seq; /* which events had their properties written */

static size_t dev_map_slot(const struct pt_dev_map *m, uint64_t uid, uint64_t inst) {
  size_t j = (size_t)((uid * 0x9e3779b97f4a7c15ull) ^ (inst * 0xc2b2ae3d27d4eb4full)) &
             (m->cap - 1);
  while (m->slot[j].value != SIZE_MAX && (m->slot[j].uid != uid || m->slot[j].inst != inst))
    j = (j + 1) & (m->cap - 1);
  return j;
}

/* The value slot of a key, added (SIZE_MAX) when new; NULL when out of memory. */
static size_t *dev_map_at(struct pt_dev_map *m, uint64_t uid, uint64_t inst) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct pt_dev_key *t = malloc(cap * sizeof *t);
    if (!t)
      return NULL;
    for (size_t i = 0; i < cap; i++)
      t[i].value = SIZE_MAX;
    struct pt_dev_map grown = {t, cap, m->n};
    for (size_t i = 0; i < m->cap; i++)
      if (m->slot[i].value != SIZE_MAX)
        t[dev_map_slot(&grown, m->slot[i].uid, m->slot[i].inst)] = m->slot[i];
    free(m->slot);
    *m = grown;
  }
  size_t j = dev_map_slot(m, uid, inst);
  if (m->slot[j].value == SIZE_MAX) {
    m->slot[j].uid = uid;
    m->slot[j].inst = inst;
    m->n++;
  }
  return &m->slot[j].value;
}

static size_t dev_map_get(const struct pt_dev_map *m, uint64_t uid, uint64_t inst) {
  return m->cap ? m->slot[dev_map_slot(m, uid, inst)].value : SIZE_MAX;
}

static void dev_map_clear(struct pt_dev_map *m) {
  for (size_t i = 0; i < m->cap; i++)
    m->slot[i].value = SIZE_MAX;
  m->n = 0;
}

static void dev_map_free(struct pt_dev_map *m) {
  free(m->slot);
  memset(m, 0, sizeof *m);
}

static bool dev_grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap)
    return true;
  size_t c = *cap ? *cap * 2 : 64;
  while (c < need)
    c *= 2;
  void *q = realloc(*p, c * size);
  if (!q)
    return false;
  *p = q;
  *cap = c;
  return true;
}

void pt_dev_add(const struct pt_rec *r) {
  struct pt_timed_inline t;
  memcpy(&t, r + 1, sizeof t);
  if (!dev_grow((void **)&dev_held, &dev_held_cap, dev_held_n + 1, sizeof *dev_held)) {
    dev_dropped++;
    return;
  }
  const char *strings = (const char *)(r + 1) + sizeof t;
  struct pt_dev_slice *s = &dev_held[dev_held_n++];
  *s = (struct pt_dev_slice){
      .begin = t.begin_ns,
      .end = t.end_ns < t.begin_ns ? t.begin_ns : t.end_ns,
      .track_id = t.track_id,
      .instance = r->instance,
      .event = r->event,
      .name = t.name_len ? pt_str_intern(strings + t.track_name_len, t.name_len) : NULL,
      .track_name = t.track_name_len ? pt_str_intern(strings, t.track_name_len) : NULL,
      .stream = r->stream,
  };
}

void pt_dev_edge(uint64_t source_uid, uint64_t source_instance, uint64_t target_uid,
                 uint64_t target_instance) {
  if (!source_uid || !target_uid || !source_instance || !target_instance ||
      !dev_grow((void **)&dev_edges, &dev_edges_cap, dev_edges_n + 1, sizeof *dev_edges))
    return;
  size_t *by_src = dev_map_at(&dev_by_src, source_uid, source_instance);
  size_t *by_dst = by_src ? dev_map_at(&dev_by_dst, target_uid, target_instance) : NULL;
  if (!by_dst)
    return;
  size_t i = dev_edges_n++;
  dev_edges[i] = (struct pt_dev_edge){source_uid, source_instance, target_uid, target_instance,
                                      0, *by_src, *by_dst};
  *by_src = i;
  *by_dst = i;
}

uint64_t pt_dev_dropped(void) { return dev_dropped; }

static struct pt_dev_track *dev_track(const struct pt_dev_slice *s) {
  if (dev_track_last < dev_tracks_n && dev_tracks[dev_track_last].id == s->track_id)
    return &dev_tracks[dev_track_last];
  for (size_t i = 0; i < dev_tracks_n; i++)
    if (dev_tracks[i].id == s->track_id)
      return &dev_tracks[dev_track_last = i];
  if (dev_tracks_n >= PT_DEV_TRACKS_MAX ||
      !dev_grow((void **)&dev_tracks, &dev_tracks_cap, dev_tracks_n + 1, sizeof *dev_tracks))
    return NULL;
  struct pt_dev_track *t = &dev_tracks[dev_track_last = dev_tracks_n++];
  *t = (struct pt_dev_track){.id = s->track_id, .name = s->track_name};
  return t;
}

/* The lane of a slice (its descriptor written when new); UINT32_MAX: none. */
static bool dev_nests(const struct pt_dev_track *t) {
  return (t->id & PT_HANDOFF_TRACK) == PT_HANDOFF_TRACK;
}

/* The ends of a nesting lane's open slices that come by `until`, written
 * now: every later slice begins after them (held slices go out sorted). */
static void dev_nest_close(struct pt_buf *out, const struct pt_encoder *enc, uint32_t index,
                           uint32_t lane, struct pt_dev_stack *k, uint64_t until) {
  while (k->n && k->end[k->n - 1] <= until) {
    k->n--;
    if (enc->device_end)
      enc->device_end(out, index, lane, k->end[k->n]);
  }
}

/* Whether s fits a nesting lane: after the slices that ended by its
 * begin, inside the innermost still open (or none open). */
static bool dev_nest_fits(struct pt_buf *out, const struct pt_encoder *enc, uint32_t index,
                          uint32_t lane, struct pt_dev_stack *k, const struct pt_dev_slice *s) {
  dev_nest_close(out, enc, index, lane, k, s->begin);
  return !k->n || s->end <= k->end[k->n - 1];
}

static bool dev_nest_push(struct pt_dev_stack *k, uint64_t end) {
  size_t cap = k->cap;
  if (!dev_grow((void **)&k->end, &cap, k->n + 1, sizeof *k->end))
    return false;
  k->cap = (uint32_t)cap;
  k->end[k->n++] = end;
  return true;
}

static void dev_heap_down(struct pt_dev_track *t, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < t->lanes && t->lane_end[t->heap[l]] < t->lane_end[t->heap[m]])
      m = l;
    if (r < t->lanes && t->lane_end[t->heap[r]] < t->lane_end[t->heap[m]])
      m = r;
    if (m == i)
      return;
    uint32_t x = t->heap[i];
    t->heap[i] = t->heap[m];
    t->heap[m] = x;
    i = m;
  }
}

static void dev_heap_up(struct pt_dev_track *t, uint32_t i) {
  while (i && t->lane_end[t->heap[(i - 1) / 2]] > t->lane_end[t->heap[i]]) {
    uint32_t p = (i - 1) / 2, x = t->heap[i];
    t->heap[i] = t->heap[p];
    t->heap[p] = x;
    i = p;
  }
}

/* A nesting track's lane for s: inside the open slices of the lane used
 * last (begun in order, ended in reverse), else the lane that ended
 * first if it has ended by s's begin; UINT32_MAX: a new one. */
static uint32_t dev_nest_lane(struct pt_buf *out, const struct pt_encoder *enc, uint32_t index,
                              struct pt_dev_track *t, const struct pt_dev_slice *s) {
  uint32_t l = t->last_lane;
  if (l < t->lanes && dev_nest_fits(out, enc, index, l, &t->nest[l], s)) {
    if (!dev_nest_push(&t->nest[l], s->end))
      return UINT32_MAX - 1;
    if (s->end > t->lane_end[l]) {
      t->lane_end[l] = s->end;
      for (uint32_t i = 0; i < t->lanes; i++)
        if (t->heap[i] == l) {
          dev_heap_down(t, i);
          break;
        }
    }
    return l;
  }
  if (!t->lanes || t->lane_end[t->heap[0]] > s->begin)
    return UINT32_MAX;
  l = t->heap[0];
  dev_nest_close(out, enc, index, l, &t->nest[l], UINT64_MAX);
  if (!dev_nest_push(&t->nest[l], s->end))
    return UINT32_MAX - 1;
  t->lane_end[l] = s->end;
  dev_heap_down(t, 0);
  return t->last_lane = l;
}

static uint32_t dev_lane(struct pt_buf *out, const struct pt_encoder *enc, struct pt_dev_track *t,
                         uint32_t index, const struct pt_dev_slice *s) {
  bool nests = dev_nests(t);
  if (nests) {
    uint32_t l = dev_nest_lane(out, enc, index, t, s);
    if (l == UINT32_MAX - 1)
      return UINT32_MAX;
    if (l != UINT32_MAX)
      return l;
  }
  for (uint32_t l = 0; !nests && l < t->lanes; l++) {
    if (t->lane_end[l] <= s->begin) {
      t->lane_end[l] = s->end;
      return l;
    }
  }
  if (t->lanes >= (nests ? PT_DEV_NEST_LANES_MAX : PT_DEV_LANES_MAX))
    return UINT32_MAX;
  size_t cap = t->cap;
  if (!dev_grow((void **)&t->lane_end, &cap, t->lanes + 1, sizeof *t->lane_end))
    return UINT32_MAX;
  if (nests) {
    size_t ncap = t->cap, hcap = t->cap;
    if (!dev_grow((void **)&t->nest, &ncap, t->lanes + 1, sizeof *t->nest) ||
        !dev_grow((void **)&t->heap, &hcap, t->lanes + 1, sizeof *t->heap))
      return UINT32_MAX;
    t->nest[t->lanes] = (struct pt_dev_stack){0};
    if (!dev_nest_push(&t->nest[t->lanes], s->end))
      return UINT32_MAX;
  }
  t->cap = (uint32_t)cap;
  uint32_t l = t->lanes++;
  t->lane_end[l] = s->end;
  if (nests) {
    t->heap[l] = l;
    dev_heap_up(t, l);
    t->last_lane = l;
  }
  char fallback[48], name[PT_NAME_MAX + 16];
  const char *base = t->name;
  if (!base) {
    snprintf(fallback, sizeof fallback, "track %llu", (unsigned long long)t->id);
    base = fallback;
  }
  if (l == 0)
    snprintf(name, sizeof name, "%s", base);
  else
    snprintf(name, sizeof name, "%s #%u", base, l + 1);
  enc->device_lane(out, index, l, name);
  return l;
}

static int dev_cmp(const void *x, const void *y) {
  const struct pt_dev_slice *a = x, *b = y;
  if (a->begin != b->begin)
    return a->begin < b->begin ? -1 : 1;
  return a->end < b->end ? -1 : a->end > b->end; /* the shorter first */
}

static void dev_emit(struct pt_buf *out, const struct pt_encoder *enc,
                     const struct pt_dev_slice *s) {
  struct pt_dev_track *t = dev_track(s);
  uint32_t index = t ? (uint32_t)(t - dev_tracks) : 0;
  uint32_t lane = t ? dev_lane(out, enc, t, index, s) : UINT32_MAX;
  if (lane == UINT32_MAX) {
    dev_dropped++;
    return;
  }
  uint64_t out_ids[PT_DEV_FLOWS_MAX], in_ids[PT_DEV_FLOWS_MAX];
  size_t n_out = 0, n_in = 0;
  uint64_t uid = s->event ? s->event->unique_id : 0;
  if (uid) {
    for (size_t e = dev_map_get(&dev_by_src, uid, s->instance); e != SIZE_MAX;
         e = dev_edges[e].next_by_src)
      if (dev_edges[e].flow && n_out < PT_DEV_FLOWS_MAX)
        out_ids[n_out++] = dev_edges[e].flow;
    for (size_t e = dev_map_get(&dev_by_dst, uid, s->instance); e != SIZE_MAX;
         e = dev_edges[e].next_by_dst)
      if (dev_edges[e].flow && n_in < PT_DEV_FLOWS_MAX)
        in_ids[n_in++] = dev_edges[e].flow;
  }
  char namebuf[48];
  const char *name = s->name;
  if (!name && s->event && s->event->reserved.payload && s->event->reserved.payload->name)
    name = s->event->reserved.payload->name;
  if (!name) {
    snprintf(namebuf, sizeof namebuf, "device work");
    name = namebuf;
  }
  unsigned args = 0;
  if (s->event) {
    bool fresh = false;
    args = pt_args_wanted(pt_seq_seen(&dev_seq, s->event, &fresh), fresh, s->event);
  }
  struct pt_dev_out o = {
      .begin = s->begin,
      .end = s->end,
      .track_index = index,
      .lane = lane,
      .name = name,
      .cat = pt_stream_name(s->stream),
      .event = s->event,
      .instance = s->instance,
      .args = args,
      .flows_out = out_ids,
      .flows_in = in_ids,
      .n_out = n_out,
      .n_in = n_in,
      .end_later = t && t->nest,
  };
  enc->device_slice(out, &o);
}

static void dev_nest_close_all(struct pt_buf *out, const struct pt_encoder *enc) {
  for (size_t i = 0; i < dev_tracks_n; i++)
    for (uint32_t l = 0; dev_tracks[i].nest && l < dev_tracks[i].lanes; l++)
      dev_nest_close(out, enc, (uint32_t)i, l, &dev_tracks[i].nest[l], UINT64_MAX);
}

void pt_dev_pass(struct pt_buf *out, const struct pt_encoder *enc, bool final, uint64_t now) {
  if (!dev_held_n) {
    if (final)
      dev_nest_close_all(out, enc);
    return;
  }
  /* Slices drained in this pass are stamped now. */
  for (size_t i = dev_held_n; i-- > 0 && !dev_held[i].drained;)
    dev_held[i].drained = now;
  qsort(dev_held, dev_held_n, sizeof *dev_held, dev_cmp);
  dev_map_clear(&dev_held_at);
  for (size_t i = 0; i < dev_held_n; i++) {
    dev_held[i].waits = false;
    size_t *at = dev_held[i].event
                     ? dev_map_at(&dev_held_at, dev_held[i].event->unique_id, dev_held[i].instance)
                     : NULL;
    if (at && *at == SIZE_MAX)
      *at = i;
  }
  /* An edge is drawn when both its slices are held together: both are
   * then written with the flow, whatever pass each goes out in. */
  for (size_t e = 0; e < dev_edges_n; e++) {
    struct pt_dev_edge *x = &dev_edges[e];
    if (x->flow)
      continue;
    size_t src = dev_map_get(&dev_held_at, x->src_uid, x->src_inst);
    if (src == SIZE_MAX)
      continue;
    if (dev_map_get(&dev_held_at, x->dst_uid, x->dst_inst) != SIZE_MAX)
      x->flow = pt_flow_id(0, 0x80000000u + dev_flows++);
    else
      dev_held[src].waits = true;
  }
  bool all = final || dev_held_n > PT_DEV_HELD_MAX;
  size_t kept = 0;
  for (size_t i = 0; i < dev_held_n; i++) {
    struct pt_dev_slice *s = &dev_held[i];
    uint64_t age = now - s->drained;
    if (all || (age >= PT_DEV_HOLD_NS && (!s->waits || age >= PT_DEV_WAIT_NS)))
      dev_emit(out, enc, s);
    else
      dev_held[kept++] = *s;
  }
  dev_held_n = kept;
  if (final)
    dev_nest_close_all(out, enc);
}

void pt_dev_reset(void) {
  for (size_t i = 0; i < dev_tracks_n; i++) {
    for (uint32_t l = 0; dev_tracks[i].nest && l < dev_tracks[i].lanes; l++)
      free(dev_tracks[i].nest[l].end);
    free(dev_tracks[i].nest);
    free(dev_tracks[i].heap);
    free(dev_tracks[i].lane_end);
  }
  dev_held_n = dev_tracks_n = dev_edges_n = dev_track_last = 0;
  dev_map_free(&dev_by_src);
  dev_map_free(&dev_by_dst);
  dev_map_clear(&dev_held_at);
  dev_dropped = dev_flows = 0;
  pt_seq_reset(&dev_seq);
}
