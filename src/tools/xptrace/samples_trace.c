/* The session's samples as a Perfetto trace: PerfSample packets (pid,
 * tid, MONOTONIC time, callstack), one trusted sequence per process (its
 * own descriptors and interned callstacks, frames, function names and
 * mappings: per-CPU events sample a whole process tree, and Perfetto
 * binds a sequence's interned data to one process). */
#include "samples_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pt_internal.h"
#include "pt_read.h"
#include "xpt_files.h"

/* Field numbers of the Perfetto format (protos/perfetto/trace/...). */
enum {
  TRACE_PACKET = 1,
  TP_TIMESTAMP = 8,
  TP_SEQ = 10,
  TP_INTERNED = 12,
  TP_SEQ_FLAGS = 13,
  TP_CLOCK_SNAPSHOT = 6,
  TP_TS_CLOCK = 58,
  TP_TRACK_DESCRIPTOR = 60,
  TP_PERF_SAMPLE = 66,
  SEQ_CLEARED = 1,
  SEQ_NEEDS_STATE = 2,
  CS_CLOCKS = 1,
  CS_PRIMARY = 2,
  CLK_ID = 1,
  CLK_TS = 2,
  CLOCK_MONOTONIC_ID = 3,
  CLOCK_BOOTTIME_ID = 6,
  TD_UUID = 1,
  TD_PROCESS = 3,
  TD_THREAD = 4,
  TD_PARENT = 5,
  PD_PID = 1,
  PD_NAME = 6,
  THD_PID = 1,
  THD_TID = 2,
  THD_NAME = 5,
  /* InternedData */
  ID_FUNCTION_NAMES = 5,
  ID_FRAMES = 6,
  ID_CALLSTACKS = 7,
  ID_BUILD_IDS = 16,
  ID_MAPPING_PATHS = 17,
  ID_MAPPINGS = 19,
  IS_IID = 1,
  IS_STR = 2,
  MAP_IID = 1,
  MAP_BUILD_ID = 2,
  MAP_START_OFFSET = 3,
  MAP_START = 4,
  MAP_END = 5,
  MAP_PATH_IDS = 7,
  MAP_EXACT_OFFSET = 8,
  FR_IID = 1,
  FR_FUNCTION = 2,
  FR_MAPPING = 3,
  FR_REL_PC = 4,
  CSK_IID = 1,
  CSK_FRAMES = 2,
  PS_CPU = 1,
  PS_PID = 2,
  PS_TID = 3,
  PS_CALLSTACK = 4,
  PS_CPU_MODE = 5,
  CPU_MODE_USER = 2,
  /* TracePacketDefaults.perf_sample_defaults.timebase: the rate */
  TP_DEFAULTS = 59,
  DEF_PERF_SAMPLE = 12,
  PSD_TIMEBASE = 1,
  TB_FREQUENCY = 2,
  TB_NAME = 10,
  /* TrackEvent: the off-CPU slices */
  TP_TRACK_EVENT = 11,
  TE_TYPE = 9,
  TE_TRACK = 11,
  TE_NAME = 23,
  TE_CATEGORY = 22,
  TE_ANNOTATION = 4,
  TE_SLICE_BEGIN = 1,
  TE_SLICE_END = 2,
  DA_NAME = 10,
  DA_UINT = 3,
  DA_STRING = 6,
};

/* Sequence ids of the events trace are 1..127 and ((pid & 0x7fff) + 1)
 * << 16 | index (at most 0x8000ffff): the samples' sequences lie above,
 * one per process (pids are below 2^22). */
static uint32_t samples_seq(pid_t pid) { return 0x90000000u | ((uint32_t)pid & 0x0fffffffu); }

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Strings interned by pointer (the session's and xsym's are unique). */
typedef struct ptrmap {
  const void **key;
  uint64_t *val;
  size_t cap, len;
} ptrmap_t;

static uint64_t ptr_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

/* The iid of p; 0 and *fresh when new (then ptrmap_set it). */
static size_t ptrmap_slot(ptrmap_t *m, const void *p) {
  if ((m->len + 1) * 2 > m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 1024;
    const void **key = calloc(cap, sizeof *key);
    uint64_t *val = calloc(cap, sizeof *val);
    if (!key || !val) {
      free(key);
      free(val);
      return SIZE_MAX;
    }
    for (size_t i = 0; i < m->cap; ++i) {
      if (!m->key[i])
        continue;
      size_t j = ptr_hash(m->key[i]) & (cap - 1);
      while (key[j])
        j = (j + 1) & (cap - 1);
      key[j] = m->key[i];
      val[j] = m->val[i];
    }
    free(m->key);
    free(m->val);
    m->key = key;
    m->val = val;
    m->cap = cap;
  }
  size_t i = ptr_hash(p) & (m->cap - 1);
  while (m->key[i] && m->key[i] != p)
    i = (i + 1) & (m->cap - 1);
  return i;
}

typedef struct writer {
  struct pt_buf b;
  uint32_t seq;
  int fd;
  bool failed;
  ptrmap_t names, paths;
  char **parts; /* path components, interned by text */
  size_t nparts, capparts;
  uint64_t nnames, npaths, nmappings;
  size_t interned; /* open InternedData of the current packet, or 0 */
  size_t packet;
} writer_t;

static void flush(writer_t *w, bool force) {
  if (w->b.failed)
    w->failed = true;
  if (!force && w->b.len < (1u << 20))
    return;
  for (size_t off = 0; off < w->b.len && !w->failed;) {
    ssize_t n = write(w->fd, w->b.data + off, w->b.len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      w->failed = true;
    else
      off += (size_t)n;
  }
  w->b.len = 0;
}

/* A packet of interned data: entries go into the current one until it
 * grows large, so that no packet gets huge. */
static void interned_open(writer_t *w) {
  if (w->interned && w->b.len - w->packet < (64u << 10))
    return;
  if (w->interned) {
    pb_close(&w->b, w->interned);
    pb_close(&w->b, w->packet);
    flush(w, false);
  }
  w->packet = pb_open(&w->b, TRACE_PACKET);
  pb_uint(&w->b, TP_SEQ, w->seq);
  pb_uint(&w->b, TP_SEQ_FLAGS, SEQ_NEEDS_STATE);
  w->interned = pb_open(&w->b, TP_INTERNED);
}

static void interned_close(writer_t *w) {
  if (!w->interned)
    return;
  pb_close(&w->b, w->interned);
  pb_close(&w->b, w->packet);
  w->interned = 0;
  flush(w, false);
}

static uint64_t intern_string(writer_t *w, ptrmap_t *m, uint64_t *next, uint32_t field, const char *s) {
  size_t i = ptrmap_slot(m, s);
  if (i == SIZE_MAX)
    return 0;
  if (m->key[i])
    return m->val[i];
  m->key[i] = s;
  m->val[i] = ++*next;
  m->len++;
  interned_open(w);
  size_t e = pb_open(&w->b, field);
  pb_uint(&w->b, IS_IID, m->val[i]);
  pb_string(&w->b, IS_STR, s);
  pb_close(&w->b, e);
  return m->val[i];
}

/* One Mapping per (module, start): its iid. */
static uint64_t intern_mapping(writer_t *w, const xs_frm_t *f) {
  if (!f->module)
    return 0;
  /* Key: the first frame seen of this mapping stands for it. */
  const char *path = xsym_module_path(f->module);
  uint64_t ids[16];
  size_t n = 0;
  char part[PATH_MAX];
  for (const char *p = path; *p && n < 16;) {
    while (*p == '/')
      ++p;
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (!len || len >= sizeof part)
      break;
    memcpy(part, p, len);
    part[len] = '\0';
    const char *k = NULL;
    for (size_t i = 0; i < w->nparts && !k; ++i)
      if (strcmp(w->parts[i], part) == 0)
        k = w->parts[i];
    if (!k && xs_grow(&w->parts, &w->capparts, w->nparts, sizeof *w->parts) &&
        (w->parts[w->nparts] = strdup(part)))
      k = w->parts[w->nparts++];
    if (k)
      ids[n++] = intern_string(w, &w->paths, &w->npaths, ID_MAPPING_PATHS, k);
    p += len;
  }
  interned_open(w);
  uint64_t iid = ++w->nmappings;
  size_t e = pb_open(&w->b, ID_MAPPINGS);
  pb_uint(&w->b, MAP_IID, iid);
  pb_uint(&w->b, MAP_START_OFFSET, f->map_pgoff);
  pb_uint(&w->b, MAP_EXACT_OFFSET, f->map_pgoff);
  pb_uint(&w->b, MAP_START, f->map_start);
  pb_uint(&w->b, MAP_END, f->map_end);
  for (size_t i = 0; i < n; ++i)
    pb_uint(&w->b, MAP_PATH_IDS, ids[i]);
  pb_close(&w->b, e);
  return iid;
}

static void descriptors(writer_t *w, const xs_session_t *s, pid_t pid) {
  const xs_proc_t *p = xs_proc_of(s, pid);
  size_t pk = pb_open(&w->b, TRACE_PACKET);
  pb_uint(&w->b, TP_SEQ, w->seq);
  size_t td = pb_open(&w->b, TP_TRACK_DESCRIPTOR);
  pb_uint(&w->b, TD_UUID, (uint64_t)pid << 32);
  size_t pd = pb_open(&w->b, TD_PROCESS);
  pb_uint(&w->b, PD_PID, (uint64_t)pid);
  pb_string(&w->b, PD_NAME, p && p->name[0] ? p->name : "process");
  pb_close(&w->b, pd);
  pb_close(&w->b, td);
  pb_close(&w->b, pk);
  for (size_t i = 0; i < s->nthreads; ++i) {
    const xs_thread_t *t = &s->threads[i];
    if (t->pid != pid)
      continue;
    pk = pb_open(&w->b, TRACE_PACKET);
    pb_uint(&w->b, TP_SEQ, w->seq);
    td = pb_open(&w->b, TP_TRACK_DESCRIPTOR);
    pb_uint(&w->b, TD_UUID, ((uint64_t)t->pid << 32) | (uint32_t)t->tid);
    pb_uint(&w->b, TD_PARENT, (uint64_t)t->pid << 32);
    size_t th = pb_open(&w->b, TD_THREAD);
    pb_uint(&w->b, THD_PID, (uint64_t)t->pid);
    pb_uint(&w->b, THD_TID, (uint64_t)t->tid);
    /* Every thread named: the main thread after its program. */
    pb_string(&w->b, THD_NAME, t->name[0] ? t->name : p && p->name[0] ? p->name : "thread");
    pb_close(&w->b, th);
    pb_close(&w->b, td);
    pb_close(&w->b, pk);
    flush(w, false);
  }
}

/* The records written: samples, not microseconds of off-CPU intervals. */
static bool is_sample(const xs_session_t *s, const xs_rec_t *r) {
  return !(r->clock == XS_OFFCPU || (r->clock == XS_REALTIME && s->o.realtime_us));
}

static const xs_session_t *sort_session;
/* Records by process, then in the order they came. */
static int rec_cmp(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  pid_t px = sort_session->recs[x].pid, py = sort_session->recs[y].pid;
  return px != py ? (px < py ? -1 : 1) : (x > y) - (x < y);
}

/* A new sequence: its first packet clears the incremental state (and
 * anchors MONOTONIC to BOOTTIME, the same snapshot on each). */
/* The rate the samples were taken at and of which clock, for readers
 * that turn samples into time (report --format pprof). */
static void sample_rate(const xs_session_t *s, uint64_t *hz, const char **clock) {
  *hz = (uint64_t)(s->o.hz + 0.5), *clock = "cputime";
  if (s->o.clock_hz[XS_CPUTIME] > 0)
    *hz = (uint64_t)(s->o.clock_hz[XS_CPUTIME] + 0.5);
  else if (s->o.clock_hz[XS_REALTIME] > 0 && !s->o.realtime_us)
    *hz = (uint64_t)(s->o.clock_hz[XS_REALTIME] + 0.5), *clock = "realtime";
}

static void sequence_start(writer_t *w, const xs_session_t *s, pid_t pid, uint64_t mono, uint64_t boot) {
  interned_close(w);
  w->seq = samples_seq(pid);
  free(w->names.key);
  free(w->names.val);
  free(w->paths.key);
  free(w->paths.val);
  memset(&w->names, 0, sizeof w->names);
  memset(&w->paths, 0, sizeof w->paths);
  w->nnames = w->npaths = w->nmappings = 0;
  size_t p = pb_open(&w->b, TRACE_PACKET);
  pb_uint(&w->b, TP_TIMESTAMP, mono);
  pb_uint(&w->b, TP_TS_CLOCK, CLOCK_MONOTONIC_ID);
  pb_uint(&w->b, TP_SEQ, w->seq);
  pb_uint(&w->b, TP_SEQ_FLAGS, SEQ_CLEARED);
  uint64_t hz;
  const char *clock;
  sample_rate(s, &hz, &clock);
  if (hz) {
    size_t d = pb_open(&w->b, TP_DEFAULTS);
    size_t psd = pb_open(&w->b, DEF_PERF_SAMPLE);
    size_t tb = pb_open(&w->b, PSD_TIMEBASE);
    pb_uint(&w->b, TB_FREQUENCY, hz);
    pb_string(&w->b, TB_NAME, clock);
    pb_close(&w->b, tb);
    pb_close(&w->b, psd);
    pb_close(&w->b, d);
  }
  size_t cs = pb_open(&w->b, TP_CLOCK_SNAPSHOT);
  size_t c = pb_open(&w->b, CS_CLOCKS);
  pb_uint(&w->b, CLK_ID, CLOCK_BOOTTIME_ID);
  pb_uint(&w->b, CLK_TS, boot);
  pb_close(&w->b, c);
  c = pb_open(&w->b, CS_CLOCKS);
  pb_uint(&w->b, CLK_ID, CLOCK_MONOTONIC_ID);
  pb_uint(&w->b, CLK_TS, mono);
  pb_close(&w->b, c);
  pb_uint(&w->b, CS_PRIMARY, CLOCK_MONOTONIC_ID);
  pb_close(&w->b, cs);
  pb_close(&w->b, p);
}

/* The interned data of one process's records (recs[idx[0..n)]): the
 * frames, mappings and callstacks they use, marked with `stamp`. */
static void intern_used(writer_t *w, const xs_session_t *s, const uint32_t *idx, size_t n, uint32_t stamp,
                        uint32_t *stack_mark, uint32_t *frame_mark, uint64_t *mapping_of, size_t *first) {
  for (size_t r = 0; r < n; ++r) {
    uint32_t st = s->recs[idx[r]].stack;
    if (stack_mark[st] == stamp)
      continue;
    stack_mark[st] = stamp;
    for (uint32_t d = 0; d < s->stacks[st]->n; ++d)
      frame_mark[s->stacks[st]->frame[d]] = stamp;
  }
  /* Frames: one per expanded symbol (an inlined call is a frame of its
   * own, at the same address); iid = symbol index + 1.  Mappings are
   * distinct by (module, start): the first frame seen of each stands for
   * it (few mappings: a linear search). */
  size_t nfirst = 0;
  for (size_t i = 0; i < s->nframes; ++i) {
    if (frame_mark[i] != stamp)
      continue;
    const xs_frm_t *f = &s->frames[i];
    mapping_of[i] = 0;
    if (f->module) {
      for (size_t j = 0; j < nfirst && !mapping_of[i]; ++j) {
        const xs_frm_t *g = &s->frames[first[j]];
        if (g->module == f->module && g->map_start == f->map_start)
          mapping_of[i] = mapping_of[first[j]];
      }
      if (!mapping_of[i]) {
        mapping_of[i] = intern_mapping(w, f);
        first[nfirst++] = i;
      }
    }
    for (uint32_t k = 0; k < f->nsym; ++k) {
      const xs_sym_t *y = &s->syms[f->sym + k];
      uint64_t name = intern_string(w, &w->names, &w->nnames, ID_FUNCTION_NAMES, y->function);
      interned_open(w);
      size_t e = pb_open(&w->b, ID_FRAMES);
      pb_uint(&w->b, FR_IID, f->sym + k + 1);
      pb_uint(&w->b, FR_FUNCTION, name);
      if (mapping_of[i]) {
        pb_uint(&w->b, FR_MAPPING, mapping_of[i]);
        pb_uint(&w->b, FR_REL_PC, f->off);
      }
      pb_close(&w->b, e);
    }
  }
  /* Callstacks: outermost frame first, as Perfetto wants. */
  for (size_t i = 0; i < s->nstacks; ++i) {
    if (stack_mark[i] != stamp)
      continue;
    const xs_stack_t *st = s->stacks[i];
    interned_open(w);
    size_t e = pb_open(&w->b, ID_CALLSTACKS);
    pb_uint(&w->b, CSK_IID, i + 1);
    for (uint32_t d = st->n; d-- > 0;) {
      const xs_frm_t *f = &s->frames[st->frame[d]];
      for (uint32_t k = f->nsym; k-- > 0;)
        pb_uint(&w->b, CSK_FRAMES, f->sym + k + 1);
    }
    pb_close(&w->b, e);
  }
  interned_close(w);
}

/* Off-CPU records by process, thread, then time: one thread's slices in
 * order, so that each can be clipped at the next one's begin. */
static int off_cmp(const void *a, const void *b) {
  const xs_rec_t *x = &sort_session->recs[*(const uint32_t *)a], *y = &sort_session->recs[*(const uint32_t *)b];
  if (x->pid != y->pid)
    return x->pid < y->pid ? -1 : 1;
  if (x->tid != y->tid)
    return x->tid < y->tid ? -1 : 1;
  return (x->t > y->t) - (x->t < y->t);
}

/* Opens a packet of a slice's begin or end on `track`: its TrackEvent's
 * mark in *te, the packet's returned (close both). */
static size_t slice_event(writer_t *w, uint64_t ts, uint64_t track, int type, size_t *te) {
  size_t pk = pb_open(&w->b, TRACE_PACKET);
  pb_uint(&w->b, TP_TIMESTAMP, ts);
  pb_uint(&w->b, TP_TS_CLOCK, CLOCK_MONOTONIC_ID);
  pb_uint(&w->b, TP_SEQ, w->seq);
  pb_uint(&w->b, TP_SEQ_FLAGS, SEQ_NEEDS_STATE);
  *te = pb_open(&w->b, TP_TRACK_EVENT);
  pb_uint(&w->b, TE_TYPE, (uint64_t)type);
  pb_uint(&w->b, TE_TRACK, track);
  /* On the end too (as the SDK's TRACE_EVENT_END does): readers know
   * which ends close an off-CPU slice without pairing them. */
  pb_string(&w->b, TE_CATEGORY, PT_OFFCPU_CATEGORY);
  return pk;
}

/* Appends `name` and a newline to the growing text; false when out of memory. */
static bool text_add(char **text, size_t *cap, size_t *len, const char *name) {
  size_t n = strlen(name);
  if (*len + n + 2 > *cap) {
    size_t c = 2 * (*len + n + 2);
    char *t = realloc(*text, c);
    if (!t)
      return false;
    *text = t, *cap = c;
  }
  if (*len)
    (*text)[(*len)++] = '\n';
  memcpy(*text + *len, name, n + 1);
  *len += n;
  return true;
}

/* One slice per off-CPU interval (recs[off[0..n)], one process, sorted by
 * off_cmp) on its thread's track: from the switch-out for the time it was
 * blocked, named after the innermost user frame ("off-CPU: nanosleep"),
 * its stack innermost first as the annotation "stack", one frame a line.
 * The microseconds are rounded: a slice ending after the thread's next
 * switch-out is cut there, so that a track's slices never overlap. */
static void offcpu_slices(writer_t *w, const xs_session_t *s, const uint32_t *off, size_t n) {
  char *text = NULL;
  size_t cap = 0;
  for (size_t i = 0; i < n && !w->failed; ++i) {
    const xs_rec_t *r = &s->recs[off[i]];
    uint64_t end = r->t + r->weight * 1000u;
    if (i + 1 < n && s->recs[off[i + 1]].tid == r->tid && s->recs[off[i + 1]].t < end)
      end = s->recs[off[i + 1]].t;
    if (end <= r->t)
      continue; /* nothing left of it */
    const xs_stack_t *st = s->stacks[r->stack];
    const char *inner = NULL;
    size_t len = 0;
    bool ok = true;
    for (uint32_t d = 0; d < st->n && ok; ++d) {
      const xs_frm_t *f = &s->frames[st->frame[d]];
      for (uint32_t k = 0; k < f->nsym && ok; ++k) {
        const xs_sym_t *y = &s->syms[f->sym + k];
        if (!inner && !(y->module && strcmp(y->module, "[kernel]") == 0))
          inner = y->function;
        ok = text_add(&text, &cap, &len, y->function);
      }
    }
    if (ok && st->truncated)
      ok = text_add(&text, &cap, &len, "[truncated]");
    char name[160];
    snprintf(name, sizeof name, "off-CPU: %s", inner ? inner : "[unknown]");
    uint64_t track = ((uint64_t)r->pid << 32) | (uint32_t)r->tid;
    size_t te, pk = slice_event(w, r->t, track, TE_SLICE_BEGIN, &te);
    pb_string(&w->b, TE_NAME, name);
    size_t da = pb_open(&w->b, TE_ANNOTATION);
    pb_string(&w->b, DA_NAME, "blocked_us");
    pb_uint(&w->b, DA_UINT, (end - r->t + 500) / 1000);
    pb_close(&w->b, da);
    if (ok && len) {
      da = pb_open(&w->b, TE_ANNOTATION);
      pb_string(&w->b, DA_NAME, "stack");
      pb_string(&w->b, DA_STRING, text);
      pb_close(&w->b, da);
    }
    pb_close(&w->b, te);
    pb_close(&w->b, pk);
    pk = slice_event(w, end, track, TE_SLICE_END, &te);
    pb_close(&w->b, te);
    pb_close(&w->b, pk);
    flush(w, false);
  }
  free(text);
}

bool xs_write_trace(xs_session_t *s, char *path, size_t len) {
  writer_t w = {.seq = samples_seq(s->root)};
  w.fd = xpt_create_file(s->o.dir, "samples.perfetto-trace", path, len);
  if (w.fd < 0)
    return false;
  uint64_t mono = clock_ns(CLOCK_MONOTONIC), boot = clock_ns(CLOCK_BOOTTIME);
  /* The records by process; the processes known without records too. */
  uint32_t *idx = malloc((s->nrecs + 1) * sizeof *idx);
  uint32_t *stack_mark = calloc(s->nstacks + 1, sizeof *stack_mark);
  uint32_t *frame_mark = calloc(s->nframes + 1, sizeof *frame_mark);
  uint64_t *mapping_of = calloc(s->nframes + 1, sizeof *mapping_of);
  size_t *first = calloc(s->nframes + 1, sizeof *first);
  pid_t *pids = malloc((s->nprocs + 1) * sizeof *pids);
  uint32_t *off = malloc((s->nrecs + 1) * sizeof *off);
  if (!idx || !stack_mark || !frame_mark || !mapping_of || !first || !pids || !off) {
    w.failed = true;
    errno = ENOMEM;
  }
  size_t n = 0, noff = 0;
  for (size_t i = 0; !w.failed && i < s->nrecs; ++i) {
    if (is_sample(s, &s->recs[i]))
      idx[n++] = (uint32_t)i;
    else if (s->recs[i].clock == XS_OFFCPU)
      off[noff++] = (uint32_t)i;
  }
  sort_session = s;
  if (n)
    qsort(idx, n, sizeof *idx, rec_cmp);
  if (noff)
    qsort(off, noff, sizeof *off, off_cmp);
  size_t npids = 0;
  for (size_t i = 0; !w.failed && i < s->nprocs; ++i) {
    size_t lo = 0, hi = n; /* idx is sorted by pid */
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (s->recs[idx[mid]].pid < s->procs[i].pid)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == n || s->recs[idx[lo]].pid != s->procs[i].pid) /* descriptors only */
      pids[npids++] = s->procs[i].pid;
  }
  uint32_t stamp = 0;
  /* Each process with records (in pid order), then those without. */
  for (size_t at = 0; !w.failed && (at < n || npids);) {
    pid_t pid;
    size_t end = at;
    if (at < n) {
      pid = s->recs[idx[at]].pid;
      while (end < n && s->recs[idx[end]].pid == pid)
        ++end;
    } else {
      pid = pids[--npids];
    }
    sequence_start(&w, s, pid, mono, boot);
    descriptors(&w, s, pid);
    intern_used(&w, s, idx + at, end - at, ++stamp, stack_mark, frame_mark, mapping_of, first);
    for (; at < end; ++at) {
      const xs_rec_t *r = &s->recs[idx[at]];
      size_t pk = pb_open(&w.b, TRACE_PACKET);
      pb_uint(&w.b, TP_TIMESTAMP, r->t);
      pb_uint(&w.b, TP_TS_CLOCK, CLOCK_MONOTONIC_ID);
      pb_uint(&w.b, TP_SEQ, w.seq);
      size_t ps = pb_open(&w.b, TP_PERF_SAMPLE);
      pb_uint(&w.b, PS_PID, (uint64_t)r->pid);
      pb_uint(&w.b, PS_TID, (uint64_t)r->tid);
      pb_uint(&w.b, PS_CALLSTACK, r->stack + 1);
      pb_uint(&w.b, PS_CPU_MODE, CPU_MODE_USER);
      pb_close(&w.b, ps);
      pb_close(&w.b, pk);
      flush(&w, false);
    }
    size_t lo = 0, hi = noff; /* this process's off-CPU intervals */
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (s->recs[off[mid]].pid < pid)
        lo = mid + 1;
      else
        hi = mid;
    }
    for (hi = lo; hi < noff && s->recs[off[hi]].pid == pid;)
      ++hi;
    offcpu_slices(&w, s, off + lo, hi - lo);
  }
  free(off);
  free(idx);
  free(stack_mark);
  free(frame_mark);
  free(mapping_of);
  free(first);
  free(pids);
  flush(&w, true);
  free(w.b.data);
  free(w.names.key);
  free(w.names.val);
  free(w.paths.key);
  free(w.paths.val);
  for (size_t i = 0; i < w.nparts; ++i)
    free(w.parts[i]);
  free(w.parts);
  int err = w.failed ? (errno ? errno : EIO) : 0;
  if (close(w.fd) != 0 && !err)
    err = errno;
  errno = err;
  return err == 0;
}
