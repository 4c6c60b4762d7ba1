/* xptrace report: the model (report_model.h).  Input is appended as it
 * comes; rp_model_finish sorts each track's events by time, pairs slices
 * innermost first and aggregates. */
#include <stdlib.h>
#include <string.h>

#include "report_model.h"

#define GROW(ptr, n, cap, m)                                                                       \
  do {                                                                                             \
    if ((n) == (cap)) {                                                                            \
      size_t nc_ = (cap) ? (cap)*2 : 64;                                                           \
      void *np_ = realloc((ptr), nc_ * sizeof(*(ptr)));                                            \
      if (!np_) {                                                                                  \
        (m)->oom = true;                                                                           \
        break;                                                                                     \
      }                                                                                            \
      (ptr) = np_;                                                                                 \
      (cap) = nc_;                                                                                 \
    }                                                                                              \
  } while (0)

/* ---- strings ---- */
static uint64_t hash_bytes(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static bool str_rehash(struct rp_strtab *t) {
  uint32_t cap = t->slot_cap ? t->slot_cap * 2 : 256;
  uint32_t *slot = calloc(cap, sizeof(*slot));
  if (!slot)
    return false;
  for (uint32_t id = 1; id <= t->n; id++) {
    uint32_t i = (uint32_t)hash_bytes(t->str[id - 1]) & (cap - 1);
    while (slot[i])
      i = (i + 1) & (cap - 1);
    slot[i] = id;
  }
  free(t->slot);
  t->slot = slot;
  t->slot_cap = cap;
  return true;
}

uint32_t rp_str(struct rp_strtab *t, const char *s) {
  if (!s)
    return 0;
  if ((t->n + 1) * 2 > t->slot_cap && !str_rehash(t))
    return 0;
  uint32_t i = (uint32_t)hash_bytes(s) & (t->slot_cap - 1);
  for (; t->slot[i]; i = (i + 1) & (t->slot_cap - 1))
    if (strcmp(t->str[t->slot[i] - 1], s) == 0)
      return t->slot[i];
  if (t->n == t->cap) {
    uint32_t nc = t->cap ? t->cap * 2 : 256;
    char **ns = realloc(t->str, nc * sizeof(*ns));
    if (!ns)
      return 0;
    t->str = ns;
    t->cap = nc;
  }
  char *copy = strdup(s);
  if (!copy)
    return 0;
  t->str[t->n++] = copy;
  t->slot[i] = t->n;
  return t->n;
}

static void str_free(struct rp_strtab *t) {
  for (uint32_t i = 0; i < t->n; i++)
    free(t->str[i]);
  free(t->str);
  free(t->slot);
}

/* ---- a map of 64-bit keys to indices ---- */
struct rp_map {
  uint64_t *key;
  size_t *idx; /* index + 1; 0 = free */
  size_t cap, n;
};

static uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

/* The slot of key: *found tells whether it holds it. */
static size_t map_slot(const struct rp_map *mp, uint64_t key, bool *found) {
  size_t i = mix64(key) & (mp->cap - 1);
  while (mp->idx[i] && mp->key[i] != key)
    i = (i + 1) & (mp->cap - 1);
  *found = mp->idx[i] != 0;
  return i;
}

static bool map_grow(struct rp_map *mp) {
  size_t cap = mp->cap ? mp->cap * 2 : 64;
  uint64_t *key = calloc(cap, sizeof(*key));
  size_t *idx = calloc(cap, sizeof(*idx));
  if (!key || !idx) {
    free(key);
    free(idx);
    return false;
  }
  struct rp_map nm = {key, idx, cap, mp->n};
  for (size_t i = 0; i < mp->cap; i++)
    if (mp->idx[i]) {
      bool f;
      size_t s = map_slot(&nm, mp->key[i], &f);
      nm.key[s] = mp->key[i];
      nm.idx[s] = mp->idx[i];
    }
  free(mp->key);
  free(mp->idx);
  *mp = nm;
  return true;
}

/* Index of key, or SIZE_MAX when absent and *n is full-out... : adds
 * `next` (the caller's new row index) when absent. */
static size_t map_get(struct rp_map *mp, uint64_t key, size_t next, bool *added) {
  *added = false;
  if ((mp->n + 1) * 2 > mp->cap && !map_grow(mp))
    return SIZE_MAX;
  bool found;
  size_t s = map_slot(mp, key, &found);
  if (found)
    return mp->idx[s] - 1;
  mp->key[s] = key;
  mp->idx[s] = next + 1;
  mp->n++;
  *added = true;
  return next;
}

static void map_free(struct rp_map *mp) {
  free(mp->key);
  free(mp->idx);
}

/* ---- input ---- */
void rp_model_init(struct rp_model *m) { memset(m, 0, sizeof(*m)); }

static void durs_add(struct rp_model *m, struct rp_durs *d, uint64_t v) {
  GROW(d->v, d->n, d->cap, m);
  if (d->n < d->cap)
    d->v[d->n++] = v;
}

void rp_model_free(struct rp_model *m) {
  for (size_t i = 0; i < m->npoints; i++)
    free(m->points[i].d.v);
  for (size_t i = 0; i < m->ndevices; i++)
    free(m->devices[i].d.v);
  free(m->points);
  free(m->devices);
  free(m->funcs);
  free(m->counters);
  free(m->threads);
  free(m->procs);
  free(m->windows);
  free(m->tracks);
  free(m->ev);
  free(m->samples);
  free(m->offcpu);
  free(m->framepool);
  free(m->locpool);
  free(m->cnodes);
  str_free(&m->s);
  memset(m, 0, sizeof(*m));
}

static struct rp_track *track_add(struct rp_model *m, uint64_t uuid) {
  GROW(m->tracks, m->ntracks, m->tracks_cap, m);
  if (m->ntracks == m->tracks_cap)
    return NULL;
  struct rp_track *t = &m->tracks[m->ntracks++];
  memset(t, 0, sizeof(*t));
  t->uuid = uuid;
  t->pid = t->tid = -1;
  return t;
}

void rp_track_process(struct rp_model *m, uint64_t uuid, int32_t pid, const char *name) {
  struct rp_track *t = track_add(m, uuid);
  if (!t)
    return;
  t->kind = RP_TRACK_PROCESS;
  t->pid = pid;
  t->name = rp_str(&m->s, name);
}

void rp_track_thread(struct rp_model *m, uint64_t uuid, uint64_t parent, int32_t pid, int32_t tid,
                     const char *name) {
  struct rp_track *t = track_add(m, uuid);
  if (!t)
    return;
  t->kind = RP_TRACK_THREAD;
  t->parent = parent;
  t->pid = pid;
  t->tid = tid;
  t->name = rp_str(&m->s, name);
}

void rp_track_other(struct rp_model *m, uint64_t uuid, uint64_t parent, const char *name,
                    bool counter, bool incremental, const char *unit) {
  struct rp_track *t = track_add(m, uuid);
  if (!t)
    return;
  t->kind = counter ? RP_TRACK_COUNTER : RP_TRACK_OTHER;
  t->parent = parent;
  t->name = rp_str(&m->s, name);
  t->counter_incremental = incremental;
  t->unit = unit && *unit ? rp_str(&m->s, unit) : 0;
}

static void ev_add(struct rp_model *m, uint64_t uuid, uint64_t ts, uint8_t type, uint32_t name,
                   uint32_t cat, double value) {
  GROW(m->ev, m->nev, m->ev_cap, m);
  if (m->nev == m->ev_cap)
    return;
  m->ev[m->nev++] = (struct rp_ev){uuid, ts, m->order++, name, cat, type, value};
}

void rp_event(struct rp_model *m, uint64_t uuid, uint64_t ts, enum rp_ev_type type,
              const char *name, const char *cat) {
  ev_add(m, uuid, ts, (uint8_t)type, rp_str(&m->s, name), rp_str(&m->s, cat), 0);
}

void rp_counter_value(struct rp_model *m, uint64_t uuid, uint64_t ts, double value) {
  ev_add(m, uuid, ts, RP_COUNTER, 0, 0, value);
}

/* Room for n more frames in the pool (and its locations). */
static bool pool_reserve(struct rp_model *m, size_t n) {
  while (m->nframepool + n > m->framepool_cap) {
    size_t nc = m->framepool_cap ? m->framepool_cap * 2 : 1024;
    uint32_t *np = realloc(m->framepool, nc * sizeof(*np));
    if (!np) {
      m->oom = true;
      return false;
    }
    m->framepool = np;
    m->framepool_cap = nc;
    struct rp_frame_loc *nl = realloc(m->locpool, nc * sizeof(*nl));
    if (!nl) {
      m->oom = true;
      return false;
    }
    m->locpool = nl;
  }
  return true;
}

void rp_sample(struct rp_model *m, int32_t pid, int32_t tid, uint64_t ts,
               const char *const *frames, const struct rp_frame_loc *locs, size_t nframes) {
  GROW(m->samples, m->nsamples, m->samples_cap, m);
  if (m->nsamples == m->samples_cap || !pool_reserve(m, nframes))
    return;
  struct rp_sample *s = &m->samples[m->nsamples++];
  *s = (struct rp_sample){pid, tid, ts, (uint32_t)m->nframepool, (uint32_t)nframes};
  for (size_t i = 0; i < nframes; i++) {
    m->locpool[m->nframepool] = locs ? locs[i] : (struct rp_frame_loc){0, 0, 0};
    m->framepool[m->nframepool++] = rp_str(&m->s, frames[i]);
  }
}

void rp_offcpu_add(struct rp_model *m, const char *thread, const char *const *frames, size_t nframes,
                   uint64_t us) {
  GROW(m->offcpu, m->noffcpu, m->offcpu_cap, m);
  if (m->noffcpu == m->offcpu_cap || !pool_reserve(m, nframes))
    return;
  m->offcpu[m->noffcpu++] =
      (struct rp_offcpu){rp_str(&m->s, thread), (uint32_t)m->nframepool, (uint32_t)nframes, us};
  for (size_t i = 0; i < nframes; i++) {
    m->locpool[m->nframepool] = (struct rp_frame_loc){0, 0, 0}; /* names only in the file */
    m->framepool[m->nframepool++] = rp_str(&m->s, frames[i]);
  }
}

/* ---- finishing ---- */
static int track_cmp(const void *a, const void *b) {
  const struct rp_track *x = a, *y = b;
  return x->uuid < y->uuid ? -1 : x->uuid > y->uuid;
}

static int ev_cmp(const void *a, const void *b) {
  const struct rp_ev *x = a, *y = b;
  if (x->uuid != y->uuid)
    return x->uuid < y->uuid ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

const struct rp_track *rp_track_find(const struct rp_model *m, uint64_t uuid) {
  struct rp_track key = {.uuid = uuid};
  return m->ntracks ? bsearch(&key, m->tracks, m->ntracks, sizeof(key), track_cmp) : NULL;
}

/* Sort by uuid; a track described twice keeps the later description
 * (qsort is not stable: keep the one with a name, else a kind). */
static void tracks_settle(struct rp_model *m) {
  if (m->ntracks > 1) /* NULL with none */
    qsort(m->tracks, m->ntracks, sizeof(*m->tracks), track_cmp);
  size_t w = 0;
  for (size_t i = 0; i < m->ntracks; i++) {
    if (w && m->tracks[w - 1].uuid == m->tracks[i].uuid) {
      struct rp_track *k = &m->tracks[w - 1], *t = &m->tracks[i];
      if (!k->name)
        k->name = t->name;
      if (k->kind == RP_TRACK_NONE)
        *k = *t;
      continue;
    }
    m->tracks[w++] = m->tracks[i];
  }
  m->ntracks = w;
  /* Tracks below a process take its pid, below a thread its tid too
   * (a few levels at most). */
  for (size_t i = 0; i < m->ntracks; i++) {
    struct rp_track *t = &m->tracks[i];
    if (t->kind == RP_TRACK_THREAD || t->kind == RP_TRACK_PROCESS)
      continue;
    const struct rp_track *p = t;
    for (int hop = 0; t->pid < 0 && p && p->parent && hop < 8; hop++) {
      p = rp_track_find(m, p->parent);
      if (p && p->kind == RP_TRACK_THREAD && t->tid < 0)
        t->tid = p->tid;
      if (p && p->pid >= 0)
        t->pid = p->pid;
    }
  }
}

bool rp_select_name(const struct rp_select *sel, const char *name) {
  return !sel || !sel->have_regex || regexec(&sel->regex, name, 0, NULL, 0) == 0;
}

struct rp_build {
  struct rp_map points, devices, funcs, threads, procs, windows, cpath;
  uint32_t windows_cat; /* RP_WINDOWS_STREAM */
  /* Slices of each (name, category) open on the track being walked: a
   * recursive call's time is in its outermost call's total already. */
  struct rp_map opened;
  uint32_t *open_n;
  size_t nopen, open_cap;
};

/* The row of key in the array *arr of *n rows (added as *init when new). */
static void *row_get(struct rp_model *m, void *arrp, size_t *n, size_t size, struct rp_map *mp,
                     uint64_t key, const void *init) {
  void **arr = arrp;
  bool added;
  size_t i = map_get(mp, key, *n, &added);
  if (i == SIZE_MAX) {
    m->oom = true;
    return NULL;
  }
  if (added) {
    void *np = realloc(*arr, (*n + 1) * size);
    if (!np) { /* the key stays mapped to a row never made: stop there */
      m->oom = true;
      return NULL;
    }
    *arr = np;
    memcpy((char *)np + *n * size, init, size);
    ++*n;
  }
  return (char *)*arr + i * size;
}
#define ROW(m, arr, n, mapp, key, ...)                                                             \
  row_get((m), &(arr), &(n), sizeof(*(arr)), (mapp), (key), &(__typeof__(*(arr)))__VA_ARGS__)

static struct rp_thread *thread_row(struct rp_model *m, struct rp_build *b, int32_t pid,
                                    int32_t tid) {
  uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
  return ROW(m, m->threads, m->nthreads, &b->threads, key,
             {.pid = pid, .tid = tid, .first = UINT64_MAX});
}

static struct rp_process *proc_row(struct rp_model *m, struct rp_build *b, int32_t pid) {
  return ROW(m, m->procs, m->nprocs, &b->procs, (uint64_t)(uint32_t)pid,
             {.pid = pid, .first = UINT64_MAX});
}

static void span(uint64_t *first, uint64_t *last, uint64_t ts) {
  if (ts < *first)
    *first = ts;
  if (ts > *last)
    *last = ts;
}

/* Open slices of the track being walked. */
struct rp_open {
  uint64_t ts, child;
  uint32_t name, cat;
  uint32_t node; /* its call path (rp_cnode), UINT32_MAX: none */
  size_t key;    /* its open_n slot, SIZE_MAX: none */
};

/* The open_n slot of (name, cat), SIZE_MAX when out of memory. */
static size_t open_slot(struct rp_model *m, struct rp_build *b, uint32_t name, uint32_t cat) {
  bool added;
  size_t i = map_get(&b->opened, (uint64_t)name << 32 | cat, b->nopen, &added);
  if (i != SIZE_MAX && added) {
    GROW(b->open_n, b->nopen, b->open_cap, m);
    if (b->nopen == b->open_cap)
      return SIZE_MAX; /* the key maps to a slot never made: always SIZE_MAX after */
    b->open_n[b->nopen++] = 0;
  }
  if (i == SIZE_MAX || i >= b->nopen) {
    m->oom = true;
    return SIZE_MAX;
  }
  return i;
}

/* The call path of name under parent (added when new). */
static uint32_t cpath_node(struct rp_model *m, struct rp_build *b, uint32_t parent,
                           uint32_t name) {
  if (parent == UINT32_MAX)
    return UINT32_MAX;
  bool added;
  size_t i = map_get(&b->cpath, (uint64_t)parent << 32 | name, m->ncnodes, &added);
  if (i == SIZE_MAX) {
    m->oom = true;
    return UINT32_MAX;
  }
  if (added) {
    GROW(m->cnodes, m->ncnodes, m->cnodes_cap, m);
    if (m->ncnodes == m->cnodes_cap)
      return UINT32_MAX; /* out of memory: the key maps to no node, never asked again */
    m->cnodes[m->ncnodes++] = (struct rp_cnode){.name = name, .parent = parent};
  }
  return (uint32_t)i;
}

static bool selected_track(const struct rp_track *t, const struct rp_select *sel) {
  if (sel->pid >= 0 && t->pid != sel->pid)
    return false;
  if (sel->tid >= 0 && t->tid != sel->tid)
    return false;
  return true;
}

/* " #k" lane suffixes name the same queue. */
#define RP_HANDED_SUFFIX " (ended on another thread)"

static uint32_t queue_name(struct rp_model *m, uint32_t name) {
  const char *s = rp_str_get(&m->s, name);
  const char *h = strrchr(s, '#');
  if (!h || h < s + 1 || h[-1] != ' ' || !h[1] || strspn(h + 1, "0123456789") != strlen(h + 1))
    return name;
  char buf[512];
  size_t n = (size_t)(h - 1 - s);
  if (n >= sizeof(buf))
    return name;
  memcpy(buf, s, n);
  buf[n] = 0;
  return rp_str(&m->s, buf);
}

static void slice_done(struct rp_model *m, struct rp_build *b, const struct rp_track *t,
                       const struct rp_open *o, uint64_t end, size_t depth) {
  /* As uftrace: the total counts a (name, category) nested in itself on
   * its thread (recursion) once, in its outermost call; self and count
   * take every call, the mean every call's duration. */
  bool outer = o->key == SIZE_MAX || b->open_n[o->key] == 0;
  uint64_t dur = end - o->ts;
  uint64_t self = dur > o->child ? dur - o->child : 0;
  if (t->kind == RP_TRACK_THREAD && o->cat && o->cat == b->windows_cat) { /* not a trace point */
    struct rp_window *w = ROW(m, m->windows, m->nwindows, &b->windows, (uint64_t)(uint32_t)t->pid,
                              {.pid = t->pid, .min = UINT64_MAX});
    if (w) {
      w->n++;
      w->total += dur;
      w->min = dur < w->min ? dur : w->min;
      w->max = dur > w->max ? dur : w->max;
    }
    return;
  }
  /* Slices begun on one thread and ended on another (the finisher draws
   * them on "<stream> (ended on another thread)"): trace points, not
   * device work. */
  const char *qn = t->kind == RP_TRACK_THREAD ? NULL : rp_str_get(&m->s, queue_name(m, t->name));
  size_t ql = qn ? strlen(qn) : 0, hl = strlen(RP_HANDED_SUFFIX);
  bool handed = ql >= hl && strcmp(qn + ql - hl, RP_HANDED_SUFFIX) == 0;
  if (t->kind == RP_TRACK_THREAD || handed) {
    struct rp_thread *th = handed ? NULL : thread_row(m, b, t->pid, t->tid);
    if (th) {
      th->slices++;
      if (depth == 0)
        th->busy += dur;
    }
    struct rp_point *p =
        ROW(m, m->points, m->npoints, &b->points, (uint64_t)o->name << 32 | o->cat,
            {.name = o->name, .cat = o->cat});
    if (p) {
      durs_add(m, &p->d, dur);
      p->total += outer ? dur : 0;
      p->sum += dur;
      p->self += handed ? dur : self; /* nested on their lane to be drawn, not called */
    }
    return;
  }
  uint32_t q = queue_name(m, t->name);
  struct rp_device *d = ROW(m, m->devices, m->ndevices, &b->devices, (uint64_t)o->name << 32 | q,
                            {.name = o->name, .queue = q});
  if (d) {
    durs_add(m, &d->d, dur);
    d->total += dur;
  }
  struct rp_process *pr = t->pid >= 0 ? proc_row(m, b, t->pid) : NULL;
  if (pr) {
    pr->device++;
    pr->device_time += dur;
  }
}

/* Events [i, j) of one track, in time order. */
static void walk_track(struct rp_model *m, struct rp_build *b, const struct rp_track *t,
                       const struct rp_ev *ev, size_t n, const struct rp_select *sel) {
  if (!t || !selected_track(t, sel))
    return;
  if (t->kind == RP_TRACK_COUNTER) {
    struct rp_counter c = {.name = t->name, .unit = t->unit, .pid = t->pid, .tid = t->tid};
    double acc = 0;
    for (size_t i = 0; i < n; i++) {
      if (ev[i].type != RP_COUNTER)
        continue;
      double v = t->counter_incremental ? (acc += ev[i].value) : ev[i].value;
      if (c.n == 0)
        c.first = c.min = c.max = v;
      c.min = v < c.min ? v : c.min;
      c.max = v > c.max ? v : c.max;
      c.last = v;
      c.n++;
    }
    if (c.n == 0)
      return;
    void *np = realloc(m->counters, (m->ncounters + 1) * sizeof(*m->counters));
    if (!np) {
      m->oom = true;
      return;
    }
    m->counters = np;
    m->counters[m->ncounters++] = c;
    return;
  }
  if (t->kind == RP_TRACK_PROCESS)
    return; /* process-wide instants (dropped events) */
  struct rp_thread *th = t->kind == RP_TRACK_THREAD ? thread_row(m, b, t->pid, t->tid) : NULL;
  if (th && !th->name)
    th->name = t->name;
  struct rp_open *stack = NULL;
  size_t depth = 0, cap = 0;
  for (size_t i = 0; i < n; i++) {
    const struct rp_ev *e = &ev[i];
    if (th)
      span(&th->first, &th->last, e->ts);
    if (e->type == RP_INSTANT) {
      if (th)
        th->instants++;
    } else if (e->type == RP_BEGIN) {
      GROW(stack, depth, cap, m);
      if (depth == cap)
        break;
      uint32_t up = depth ? stack[depth - 1].node : 0, node = UINT32_MAX;
      size_t key = SIZE_MAX;
      if (t->kind == RP_TRACK_THREAD) {
        bool window = e->cat && e->cat == b->windows_cat;
        node = window ? up : cpath_node(m, b, up, e->name);
        key = window ? SIZE_MAX : open_slot(m, b, e->name, e->cat);
        if (key != SIZE_MAX)
          b->open_n[key]++;
      }
      stack[depth++] = (struct rp_open){e->ts, 0, e->name, e->cat, node, key};
    } else if (e->type == RP_END) {
      if (depth == 0) {
        m->unmatched_ends++;
        continue;
      }
      struct rp_open *o = &stack[--depth];
      if (o->key != SIZE_MAX)
        b->open_n[o->key]--;
      slice_done(m, b, t, o, e->ts, depth);
      uint32_t up = depth ? stack[depth - 1].node : 0;
      if (o->node != UINT32_MAX && o->node != up) { /* a window is no call */
        struct rp_cnode *c = &m->cnodes[o->node];
        uint64_t dur = e->ts - o->ts;
        c->count++;
        c->total += dur;
        c->self += dur > o->child ? dur - o->child : 0;
      }
      if (depth)
        stack[depth - 1].child += e->ts - o->ts;
    }
  }
  m->unclosed += depth;
  while (depth--) /* the next track starts with nothing open */
    if (stack[depth].key != SIZE_MAX)
      b->open_n[stack[depth].key]--;
  free(stack);
}

static void samples_aggregate(struct rp_model *m, struct rp_build *b, const struct rp_select *sel) {
  uint64_t *seen = NULL; /* per function row: the last sample counted (index + 1) */
  size_t seen_n = 0;
  for (size_t k = 0; k < m->nsamples; k++) {
    const struct rp_sample *s = &m->samples[k];
    if ((sel->pid >= 0 && s->pid != sel->pid) || (sel->tid >= 0 && s->tid != sel->tid))
      continue;
    m->total_samples++;
    struct rp_thread *th = thread_row(m, b, s->pid, s->tid);
    if (th) {
      th->samples++;
      span(&th->first, &th->last, s->ts);
    }
    for (uint32_t i = 0; i < s->nframes; i++) {
      uint32_t name = m->framepool[s->frames + i];
      struct rp_func *f = ROW(m, m->funcs, m->nfuncs, &b->funcs, name,
                              {.name = name});
      if (!f)
        continue;
      size_t fi = (size_t)(f - m->funcs);
      if (fi >= seen_n) {
        size_t nn = m->nfuncs * 2;
        uint64_t *ns = realloc(seen, nn * sizeof(*ns));
        if (!ns) {
          m->oom = true;
          continue;
        }
        memset(ns + seen_n, 0, (nn - seen_n) * sizeof(*ns));
        seen = ns;
        seen_n = nn;
      }
      if (seen[fi] != k + 1) { /* recursion counts once */
        seen[fi] = k + 1;
        f->incl++;
      }
      if (i + 1 == s->nframes)
        f->self++;
    }
  }
  free(seen);
}

bool rp_model_finish(struct rp_model *m, const struct rp_select *sel) {
  struct rp_build b;
  memset(&b, 0, sizeof(b));
  b.windows_cat = rp_str(&m->s, RP_WINDOWS_STREAM);
  tracks_settle(m);
  GROW(m->cnodes, m->ncnodes, m->cnodes_cap, m);
  if (m->ncnodes < m->cnodes_cap && m->ncnodes == 0)
    m->cnodes[m->ncnodes++] = (struct rp_cnode){0}; /* the root */
  if (m->nev > 1)
    qsort(m->ev, m->nev, sizeof(*m->ev), ev_cmp);
  m->first_ts = UINT64_MAX;
  for (size_t i = 0; i < m->nev;) {
    size_t j = i;
    while (j < m->nev && m->ev[j].uuid == m->ev[i].uuid)
      j++;
    span(&m->first_ts, &m->last_ts, m->ev[i].ts);
    span(&m->first_ts, &m->last_ts, m->ev[j - 1].ts);
    walk_track(m, &b, rp_track_find(m, m->ev[i].uuid), m->ev + i, j - i, sel);
    i = j;
  }
  samples_aggregate(m, &b, sel);
  for (size_t i = 0; i < m->nsamples; i++)
    span(&m->first_ts, &m->last_ts, m->samples[i].ts);
  if (m->first_ts == UINT64_MAX)
    m->first_ts = 0;
  /* Thread names and processes from the descriptors (threads that only
   * have a track, no event, are listed too). */
  for (size_t i = 0; i < m->ntracks; i++) {
    const struct rp_track *t = &m->tracks[i];
    if (t->kind == RP_TRACK_THREAD && selected_track(t, sel)) {
      struct rp_thread *th = thread_row(m, &b, t->pid, t->tid);
      if (th && !th->name)
        th->name = t->name;
    }
  }
  for (size_t i = 0; i < m->nthreads; i++) {
    struct rp_thread *th = &m->threads[i];
    struct rp_process *p = proc_row(m, &b, th->pid);
    if (!p)
      continue;
    p->threads++;
    p->slices += th->slices;
    p->samples += th->samples;
    if (th->first != UINT64_MAX) {
      span(&p->first, &p->last, th->first);
      span(&p->first, &p->last, th->last);
    }
    if (!p->name && th->tid == th->pid)
      p->name = th->name;
  }
  for (size_t i = 0; i < m->ntracks; i++) { /* process names, selected or not */
    const struct rp_track *t = &m->tracks[i];
    if (t->kind != RP_TRACK_PROCESS || !t->name)
      continue;
    bool found;
    if (b.procs.cap && (map_slot(&b.procs, (uint64_t)(uint32_t)t->pid, &found), found))
      proc_row(m, &b, t->pid)->name = t->name;
    else if (sel->pid < 0 && sel->tid < 0) { /* a process with nothing recorded */
      struct rp_process *p = proc_row(m, &b, t->pid);
      if (p)
        p->name = t->name;
    }
  }
  for (size_t i = 0; i < m->npoints; i++)
    if (m->points[i].d.n > 1)
      qsort(m->points[i].d.v, m->points[i].d.n, sizeof(uint64_t), u64_cmp);
  for (size_t i = 0; i < m->ndevices; i++)
    if (m->devices[i].d.n > 1)
      qsort(m->devices[i].d.v, m->devices[i].d.n, sizeof(uint64_t), u64_cmp);
  map_free(&b.points);
  map_free(&b.devices);
  map_free(&b.funcs);
  map_free(&b.threads);
  map_free(&b.procs);
  map_free(&b.windows);
  map_free(&b.cpath);
  map_free(&b.opened);
  free(b.open_n);
  return !m->oom;
}

uint64_t rp_percentile(const struct rp_durs *d, double p) {
  if (d->n == 0)
    return 0;
  double r = p / 100.0 * (double)d->n;
  size_t rank = (size_t)r;
  if ((double)rank < r)
    rank++;
  if (rank < 1)
    rank = 1;
  return d->v[rank - 1];
}
