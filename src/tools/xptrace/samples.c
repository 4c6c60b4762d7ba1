/* The launcher's sample session: what sampling methods learnt, turned
 * into samples.folded, samples.csv, the summary and the trace. */
#include "samples_internal.h"
#include "sample_kernel.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph.h"
#include "xpt_files.h"

bool xs_grow(void *v, size_t *cap, size_t n, size_t sz) {
  if (n < *cap)
    return true;
  size_t c = *cap ? 2 * *cap : 64;
  void *p = realloc(*(void **)v, c * sz);
  if (!p)
    return false;
  *(void **)v = p;
  *cap = c;
  return true;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

uint64_t xs_hash_mem(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return mix(h);
}

/* ---- index: find or insert by (hash, equality against a key) ---- */

bool xs_index_reserve(xs_index_t *t) {
  if (t->cap && (t->len + 1) * 4 < t->cap * 3)
    return true;
  size_t cap = t->cap ? t->cap * 2 : 256;
  uint32_t *slot = calloc(cap, sizeof *slot);
  uint64_t *hash = calloc(cap, sizeof *hash);
  if (!slot || !hash) {
    free(slot);
    free(hash);
    return false;
  }
  for (size_t i = 0; i < t->cap; ++i) {
    if (!t->slot[i])
      continue;
    size_t j = t->hash[i] & (cap - 1);
    while (slot[j])
      j = (j + 1) & (cap - 1);
    slot[j] = t->slot[i];
    hash[j] = t->hash[i];
  }
  free(t->slot);
  free(t->hash);
  t->slot = slot;
  t->hash = hash;
  t->cap = cap;
  return true;
}

/* The slot for key: *found set when it holds a matching index. */
size_t xs_index_find(const xs_session_t *s, const xs_index_t *t, uint64_t h, const void *key,
                     xs_eq_fn eq, bool *found) {
  size_t i = h & (t->cap - 1);
  while (t->slot[i] && !(t->hash[i] == h && eq(s, t->slot[i] - 1, key)))
    i = (i + 1) & (t->cap - 1);
  *found = t->slot[i] != 0;
  return i;
}

void xs_index_set(xs_index_t *t, size_t slot, uint64_t h, uint32_t index) {
  if (!t->slot[slot])
    t->len++;
  t->slot[slot] = index + 1;
  t->hash[slot] = h;
}

void xs_index_free(xs_index_t *t) {
  free(t->slot);
  free(t->hash);
}

/* ---- processes and threads ---- */

xs_session_t *xs_session_new(const xs_options_t *o) {
  xs_session_t *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->o = *o;
  s->xsym = xsym_new(o->demangle ? XSYM_DEMANGLE : 0);
  s->maps = xsym_maps_new();
  if (!s->xsym || !s->maps) {
    xs_session_free(s);
    return NULL;
  }
  return s;
}

void xs_root(xs_session_t *s, pid_t pid) { s->root = pid; }

static xs_proc_t *proc_get(xs_session_t *s, pid_t pid) {
  for (size_t i = s->nprocs; i-- > 0;)
    if (s->procs[i].pid == pid)
      return &s->procs[i];
  if (!xs_grow(&s->procs, &s->capprocs, s->nprocs, sizeof *s->procs))
    return NULL;
  xs_proc_t *p = &s->procs[s->nprocs++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  return p;
}

const xs_proc_t *xs_proc_of(const xs_session_t *s, pid_t pid) {
  for (size_t i = s->nprocs; i-- > 0;)
    if (s->procs[i].pid == pid)
      return &s->procs[i];
  return NULL;
}

const xs_thread_t *xs_thread_of(const xs_session_t *s, uint32_t index) { return &s->threads[index]; }

void xs_process(xs_session_t *s, pid_t pid, pid_t ppid, uint64_t t) {
  bool fresh = !xs_proc_of(s, pid);
  xs_proc_t *p = proc_get(s, pid);
  if (!p)
    return;
  if (fresh && ppid > 0) {
    p->ppid = ppid;
    const xs_proc_t *parent = xs_proc_of(s, ppid);
    if (parent)
      memcpy(p->name, parent->name, sizeof p->name);
    xsym_maps_fork(s->maps, ppid, pid, t);
  }
}

void xs_process_name(xs_session_t *s, pid_t pid, uint64_t t, const char *name, bool exec) {
  xs_proc_t *p = proc_get(s, pid);
  if (!p)
    return;
  snprintf(p->name, sizeof p->name, "%s", name);
  if (exec)
    xsym_maps_end_all(s->maps, pid, t);
}

static bool thread_eq(const xs_session_t *s, uint32_t index, const void *key) {
  const pid_t *k = key;
  return s->threads[index].pid == k[0] && s->threads[index].tid == k[1];
}

static uint32_t thread_get(xs_session_t *s, pid_t pid, pid_t tid) {
  pid_t key[2] = {pid, tid};
  uint64_t h = xs_hash_mem(key, sizeof key, 7);
  if (!xs_index_reserve(&s->thread_index))
    return UINT32_MAX;
  bool found;
  size_t slot = xs_index_find(s, &s->thread_index, h, key, thread_eq, &found);
  if (found)
    return s->thread_index.slot[slot] - 1;
  xs_proc_t *p = proc_get(s, pid);
  if (!p || !xs_grow(&s->threads, &s->capthreads, s->nthreads, sizeof *s->threads))
    return UINT32_MAX;
  xs_thread_t *t = &s->threads[s->nthreads];
  memset(t, 0, sizeof *t);
  t->pid = pid;
  t->tid = tid;
  t->cpu_ns = UINT64_MAX;
  t->sys_share = -1;
  t->index = tid == pid ? 0 : ++p->nthreads;
  xs_index_set(&s->thread_index, slot, h, (uint32_t)s->nthreads);
  return (uint32_t)s->nthreads++;
}

void xs_thread(xs_session_t *s, pid_t pid, pid_t tid, uint64_t t, const char *name) {
  (void)t;
  uint32_t i = thread_get(s, pid, tid);
  if (i != UINT32_MAX && name && *name)
    snprintf(s->threads[i].name, sizeof s->threads[i].name, "%s", name);
}

void xs_thread_exit(xs_session_t *s, pid_t pid, pid_t tid, uint64_t t, uint64_t cpu_ns) {
  (void)t;
  uint32_t i = thread_get(s, pid, tid);
  if (i == UINT32_MAX || cpu_ns == UINT64_MAX)
    return;
  xs_thread_t *th = &s->threads[i];
  th->cpu_ns = th->cpu_ns == UINT64_MAX ? cpu_ns : th->cpu_ns + cpu_ns;
}

void xs_thread_cpu(xs_session_t *s, pid_t pid, pid_t tid, uint64_t cpu_ns) {
  uint32_t i = thread_get(s, pid, tid);
  if (i == UINT32_MAX || cpu_ns == UINT64_MAX)
    return;
  xs_thread_t *th = &s->threads[i];
  if (th->cpu_ns == UINT64_MAX || cpu_ns > th->cpu_ns)
    th->cpu_ns = cpu_ns;
}

void xs_thread_system(xs_session_t *s, pid_t pid, pid_t tid, double share) {
  uint32_t i = thread_get(s, pid, tid);
  if (i != UINT32_MAX)
    s->threads[i].sys_share = share;
}

void xs_mapping(xs_session_t *s, pid_t pid, uint64_t t, uint64_t start, uint64_t end,
                uint64_t pgoff, const char *path, const uint8_t *build_id, size_t build_id_len) {
  xsym_module_t *m = path && *path ? xsym_module(s->xsym, path, build_id, build_id_len) : NULL;
  proc_get(s, pid);
  xsym_maps_add(s->maps, pid, t, start, end, pgoff, m);
}

/* ---- frames and stacks ---- */

static bool frame_eq(const xs_session_t *s, uint32_t index, const void *key) {
  const xs_frm_t *a = &s->frames[index], *b = key;
  return a->module == b->module && a->off == b->off && a->name == b->name &&
         a->modname == b->modname && a->map_start == b->map_start;
}

static uint32_t frame_get(xs_session_t *s, const xs_frm_t *f) {
  uint64_t key[5] = {(uint64_t)(uintptr_t)f->module, f->off, (uint64_t)(uintptr_t)f->name,
                     (uint64_t)(uintptr_t)f->modname, f->map_start};
  uint64_t h = xs_hash_mem(key, sizeof key, 11);
  if (!xs_index_reserve(&s->frame_index))
    return UINT32_MAX;
  bool found;
  size_t slot = xs_index_find(s, &s->frame_index, h, f, frame_eq, &found);
  if (found)
    return s->frame_index.slot[slot] - 1;
  if (!xs_grow(&s->frames, &s->capframes, s->nframes, sizeof *s->frames))
    return UINT32_MAX;
  s->frames[s->nframes] = *f;
  xs_index_set(&s->frame_index, slot, h, (uint32_t)s->nframes);
  return (uint32_t)s->nframes++;
}

typedef struct stack_key {
  const uint32_t *frame;
  uint32_t n;
  bool truncated;
} stack_key_t;

static bool stack_eq(const xs_session_t *s, uint32_t index, const void *key) {
  const xs_stack_t *a = s->stacks[index];
  const stack_key_t *k = key;
  return a->n == k->n && a->truncated == k->truncated &&
         memcmp(a->frame, k->frame, k->n * sizeof *k->frame) == 0;
}

static uint32_t stack_get(xs_session_t *s, const uint32_t *frame, uint32_t n, bool truncated) {
  stack_key_t key = {frame, n, truncated};
  uint64_t h = xs_hash_mem(frame, n * sizeof *frame, truncated ? 13 : 17);
  if (!xs_index_reserve(&s->stack_index))
    return UINT32_MAX;
  bool found;
  size_t slot = xs_index_find(s, &s->stack_index, h, &key, stack_eq, &found);
  if (found)
    return s->stack_index.slot[slot] - 1;
  xs_stack_t *st = malloc(sizeof *st + n * sizeof *frame);
  if (!st || !xs_grow(&s->stacks, &s->capstacks, s->nstacks, sizeof *s->stacks)) {
    free(st);
    return UINT32_MAX;
  }
  st->n = n;
  st->truncated = truncated;
  memcpy(st->frame, frame, n * sizeof *frame);
  s->stacks[s->nstacks] = st;
  xs_index_set(&s->stack_index, slot, h, (uint32_t)s->nstacks);
  return (uint32_t)s->nstacks++;
}

static void add_rec(xs_session_t *s, xs_clock_t clock, pid_t pid, pid_t tid, uint64_t t,
                    uint64_t weight, const uint32_t *frame, size_t n, bool truncated) {
  uint32_t th = thread_get(s, pid, tid);
  uint32_t st = stack_get(s, frame, (uint32_t)n, truncated);
  if (th == UINT32_MAX || st == UINT32_MAX ||
      !xs_grow(&s->recs, &s->caprecs, s->nrecs, sizeof *s->recs)) {
    s->dropped += weight;
    return;
  }
  s->recs[s->nrecs++] = (xs_rec_t){t, weight, pid, tid, st, th, (uint8_t)clock};
  xs_thread_t *x = &s->threads[th];
  x->samples[clock] += weight;
  if (!x->t_first || t < x->t_first)
    x->t_first = t;
  if (t > x->t_last)
    x->t_last = t;
  if (truncated)
    s->truncated += weight;
}

uint32_t *xs_scratch(xs_session_t *s, size_t n) {
  if (n > s->scratch_cap) {
    uint32_t *p = realloc(s->scratch, n * sizeof *p);
    if (!p)
      return NULL;
    s->scratch = p;
    s->scratch_cap = n;
  }
  return s->scratch;
}

void xs_sample(xs_session_t *s, xs_clock_t clock, pid_t pid, pid_t tid, uint64_t t,
               uint64_t weight, const uint64_t *pc, size_t n, bool truncated) {
  if (clock >= XS_NCLOCKS || weight == 0)
    return;
  uint32_t *ids = xs_scratch(s, n ? n : 1);
  if (!ids) {
    s->dropped += weight;
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    /* Return addresses point after the call: look up the call itself. */
    uint64_t a = pc[i] - (i > 0 && pc[i] > 0);
    const xsym_map_t *m = ksym_is_kernel(a) ? NULL : xsym_maps_find(s->maps, pid, t, a);
    xs_frm_t f = {0};
    if (ksym_is_kernel(a)) {
      f.name = ksym_name(a); /* one pointer per function: one frame */
      f.modname = "[kernel]";
    } else if (m && m->module) {
      f.module = m->module;
      f.off = a - m->start + m->pgoff;
      f.map_start = m->start;
      f.map_end = m->end;
      f.map_pgoff = m->pgoff;
    } else {
      f.off = a; /* anonymous or unknown: the address itself */
      f.map_start = m ? m->start : 0;
      f.map_end = m ? m->end : 0;
    }
    uint32_t id = frame_get(s, &f);
    if (id != UINT32_MAX)
      ids[k++] = id;
  }
  add_rec(s, clock, pid, tid, t, weight, ids, k, truncated);
}

static const char *own_string(xs_session_t *s, const char *text) {
  if (!text)
    return NULL;
  for (size_t i = s->nstrings; i-- > 0 && i + 64 >= s->nstrings;)
    if (strcmp(s->strings[i], text) == 0)
      return s->strings[i];
  char *c = strdup(text);
  if (!c || !xs_grow(&s->strings, &s->capstrings, s->nstrings, sizeof *s->strings)) {
    free(c);
    return NULL;
  }
  return s->strings[s->nstrings++] = c;
}

void xs_sample_named(xs_session_t *s, xs_clock_t clock, pid_t pid, pid_t tid, uint64_t t,
                     uint64_t weight, const xs_frame_t *frames, size_t n, bool truncated) {
  if (clock >= XS_NCLOCKS || weight == 0)
    return;
  uint32_t *ids = xs_scratch(s, n ? n : 1);
  if (!ids) {
    s->dropped += weight;
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    xs_frm_t f = {0};
    /* Names repeat: the same pointer makes the same frame. */
    f.name = own_string(s, frames[i].function ? frames[i].function : "[unknown]");
    f.modname = own_string(s, frames[i].module);
    uint32_t id = f.name ? frame_get(s, &f) : UINT32_MAX;
    if (id != UINT32_MAX)
      ids[k++] = id;
  }
  add_rec(s, clock, pid, tid, t, weight, ids, k, truncated);
}

void xs_session_free(xs_session_t *s) {
  if (!s)
    return;
  xsym_free(s->xsym);
  xsym_maps_free(s->maps);
  free(s->procs);
  free(s->threads);
  xs_index_free(&s->thread_index);
  free(s->frames);
  xs_index_free(&s->frame_index);
  for (size_t i = 0; i < s->nstacks; ++i)
    free(s->stacks[i]);
  free(s->stacks);
  xs_index_free(&s->stack_index);
  free(s->recs);
  free(s->syms);
  for (size_t i = 0; i < s->nstrings; ++i)
    free(s->strings[i]);
  free(s->strings);
  free(s->scratch);
  free(s);
}
