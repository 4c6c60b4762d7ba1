/* libxpti_perfetto.so: records every notification into per-thread chunks
 * of a file-backed shared mapping (src/trace/xpt_rec.h), with no lock and
 * no wait.  Nothing is done at signal time: whoever finishes the run (this
 * process at exit, else `xptrace`, else `xptrace finish`) turns the
 * recording into the trace (src/trace/pt_finish.c).
 *
 * Only values are recorded (ids, times, copies of names), never a pointer
 * into the caller's event, payload or user data. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "pt_drain.h"
#include "xpt_collector.h"
#include "xpt_finish.h"
#include "xpti/xpti_trace_framework.h"
#include "xpt_rec.h"
#include "xptrace/xptrace_protocol.h"

/* ---- clock: raw TSC ticks when invariant, else MONOTONIC ns ------------- */

#if defined(__x86_64__)
#define PT_HAVE_TSC 1
static inline uint64_t pt_ticks(void) { return __rdtsc(); }
#else
#define PT_HAVE_TSC 0
static inline uint64_t pt_ticks(void) { return 0; } /* never chosen */
#endif

static inline uint64_t pt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* TSC ticks at a constant rate through frequency changes and idle states. */
static bool pt_tsc_invariant(void) {
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f)
    return false;
  char *line = NULL;
  size_t cap = 0;
  bool constant = false, nonstop = false;
  while (getline(&line, &cap, f) > 0) {
    if (strncmp(line, "flags", 5) != 0)
      continue;
    for (char *tok = strtok(line + 5, " \t\n:"); tok; tok = strtok(NULL, " \t\n"))
      constant |= !strcmp(tok, "constant_tsc"), nonstop |= !strcmp(tok, "nonstop_tsc");
    break; /* the first CPU speaks for all */
  }
  free(line);
  fclose(f);
  return constant && nonstop;
}

/* ---- configuration (read once) ------------------------------------------ */

static bool pt_use_tsc;
static uint32_t pt_format_kind;
static uint32_t pt_policy;
static bool pt_annotate;
static uint64_t pt_budget;
static uint32_t pt_chunk_size;
static bool pt_launcher_finishes; /* under `xptrace`: it finishes the run */
static pthread_once_t pt_once = PTHREAD_ONCE_INIT;
/* Types the hot path leaves to the slow one, by low byte: edge_create
 * (node instances are read), timed slices (inline times and names) and
 * user-defined types (their tool is named once). */
static uint8_t pt_slow_type[256];
static uint16_t pt_timed_type; /* 0: the framework gave none */
static _Atomic bool pt_timed_bad_reported;

/* ---- the recording file -------------------------------------------------- */

enum { PT_SEEN = 256 };
#define PT_SEEN_EMPTY UINT64_MAX

struct pt_rthread {
  /* hot: the current chunk's data, its capacity, the next offset */
  uint8_t *data;
  uint32_t cap, off;
  struct xpt_rec_chunk *cur; /* mapped; NULL: none yet */
  struct xpt_rec_chunk *prev; /* the chunk before, still mapped: an
                                 interrupted append may be writing into it */
  uint64_t cur_index;
  struct pt_owner *own; /* ring: what it holds */
  uint64_t seen[PT_SEEN]; /* uids described (direct-mapped) */
  pid_t pid, tid;
  uint64_t segment;  /* segment number of this thread */
  bool own_desc;     /* descriptions went into its own chunk: forget them with it */
  /* Set while this thread records: a signal handler recording on the
   * same thread meanwhile would write over the record being made, so its
   * event is counted as dropped instead (rare: a window of a few ns). */
  volatile bool busy;
  struct pt_rthread *next_all, *next_free;
};

static struct {
  int fd, spill_fd;
  uint8_t *base; /* the whole file, shared-mapped */
  size_t map_len;
  struct xpt_rec_header *h; /* at base */
  uint64_t max_chunks;      /* ring */
  struct pt_owner **owner;   /* ring: chunk -> owner (NULL: free or dictionary) */
  uint64_t *chunk_gen;       /* ring: when each chunk was taken */
  pid_t pid;                 /* the process the recording belongs to */
  char dir[4096], name[64];
  bool failed;
} pt_rec = {.fd = -1, .spill_fd = -1};

static pthread_mutex_t pt_open_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pt_ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pt_dict_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pt_free_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pt_rthread *_Atomic pt_all;
static struct pt_rthread *pt_free;
static pthread_key_t pt_key;
static _Atomic uint64_t pt_lost_early; /* before any recording could be made */
/* The shared dictionary chunk (descriptions), under pt_dict_lock. */
static struct xpt_rec_chunk *pt_dict;
static uint32_t pt_dict_off;

static __thread struct pt_rthread *pt_tls __attribute__((tls_model("initial-exec")));

static inline size_t pt_seen_slot(uint64_t uid) {
  return (size_t)((uid * 0x9e3779b97f4a7c15ull) >> 56);
}

static void pt_drop(uint64_t n) {
  if (pt_rec.h)
    atomic_fetch_add_explicit(&pt_rec.h->dropped, n, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&pt_lost_early, n, memory_order_relaxed);
}

static struct xpt_rec_chunk *pt_chunk_map(uint64_t index) {
  return (struct xpt_rec_chunk *)(pt_rec.base + XPT_REC_HEADER_SIZE + index * pt_chunk_size);
}

static void pt_chunk_start(struct xpt_rec_chunk *c, uint32_t kind) {
  atomic_store_explicit(&c->committed, 0, memory_order_relaxed);
  atomic_store_explicit(&c->state, XPT_REC_ACTIVE, memory_order_relaxed);
  c->kind = kind;
  atomic_store_explicit(&c->gen, atomic_fetch_add(&pt_rec.h->gen, 1) + 1, memory_order_relaxed);
  __atomic_store_n(&c->magic, XPT_REC_CHUNK_MAGIC, __ATOMIC_RELEASE);
}

/* A chunk to write into, or UINT64_MAX: flush, a free one from the
 * drainer; ring, one never used yet. */
static uint64_t pt_chunk_fresh(void) {
  if (pt_policy == XPT_REC_FLUSH)
    return pt_drain_take();
  uint64_t index = atomic_fetch_add(&pt_rec.h->chunks_used, 1);
  if (index < pt_rec.max_chunks)
    return index;
  atomic_fetch_sub(&pt_rec.h->chunks_used, 1);
  return UINT64_MAX;
}

/* Its writer has moved on: the drainer may copy it out and free it. */
static void pt_chunk_seal(struct xpt_rec_chunk *c) {
  atomic_store_explicit(&c->state, XPT_REC_SEALED, memory_order_release);
  if (pt_policy == XPT_REC_FLUSH)
    pt_drain_sealed((uint64_t)((uint8_t *)c - pt_rec.base - XPT_REC_HEADER_SIZE) / pt_chunk_size);
}

/* Ring: who holds which chunks.  An owner is one thread's life; when the
 * thread ends its chunks stay with the owner, marked dead, until taken. */
struct pt_owner {
  uint32_t nchunks;
  bool dead;
  uint64_t cur; /* its current chunk (never taken from a live owner) */
  struct pt_owner *next_all, *next_free;
};
static struct pt_owner *pt_owners, *pt_owners_free; /* under pt_ring_lock */

static struct pt_owner *pt_owner_new(void) {
  pthread_mutex_lock(&pt_ring_lock);
  struct pt_owner *o = pt_owners_free;
  if (o) {
    pt_owners_free = o->next_free;
  } else {
    void *m = mmap(NULL, sizeof *o, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    o = m == MAP_FAILED ? NULL : m;
    if (o) {
      o->next_all = pt_owners;
      pt_owners = o;
    }
  }
  if (o) {
    o->nchunks = 0;
    o->dead = false;
    o->cur = UINT64_MAX;
  }
  pthread_mutex_unlock(&pt_ring_lock);
  return o;
}

/* Under pt_ring_lock. */
static void pt_owner_lose(struct pt_owner *o) {
  if (--o->nchunks == 0 && o->dead) {
    o->dead = false;
    o->next_free = pt_owners_free;
    pt_owners_free = o;
  }
}

/* The oldest chunk of the owner holding the most (two or more), so that
 * every thread keeps its newest; else the last chunk of the thread that
 * ended first; else the caller's own current chunk, started again.  What
 * the chunk held is counted as dropped.  Signals are blocked (the caller
 * switches chunks): the lock cannot be this thread's own. */
static uint64_t pt_chunk_steal(struct pt_rthread *self) {
  pthread_mutex_lock(&pt_ring_lock);
  struct pt_owner *victim = NULL;
  for (struct pt_owner *o = pt_owners; o; o = o->next_all)
    if (o->nchunks > 1 && (!victim || o->nchunks > victim->nchunks))
      victim = o;
  uint64_t best = UINT64_MAX, best_gen = UINT64_MAX;
  for (uint64_t i = 0; i < pt_rec.max_chunks; i++) {
    struct pt_owner *o = pt_rec.owner[i];
    bool candidate = victim ? o == victim && i != o->cur : o && o->dead;
    if (candidate && pt_rec.chunk_gen[i] < best_gen) {
      best = i;
      best_gen = pt_rec.chunk_gen[i];
    }
  }
  if (best == UINT64_MAX && self->cur && self->own)
    best = self->cur_index; /* every thread holds one chunk: start its own again */
  if (best != UINT64_MAX) {
    pt_owner_lose(pt_rec.owner[best]);
    pt_rec.owner[best] = NULL;
    /* Count what is lost: the events of the chunk. */
    struct xpt_rec_chunk *c = pt_chunk_map(best);
    {
      const uint8_t *d = (const uint8_t *)(c + 1);
      uint32_t end = atomic_load(&c->committed), off = 0, n = 0;
      while (off + sizeof(struct xpt_rec_raw) <= end) {
        const struct xpt_rec_raw *r = (const struct xpt_rec_raw *)(d + off);
        n += r->kind <= XPT_REC_EDGE; /* events, not thread or description records */
        off += xpt_rec_size(r->len);
      }
      pt_drop(n);
      atomic_store(&c->committed, 0);
    }
  }
  pthread_mutex_unlock(&pt_ring_lock);
  return best;
}

static void pt_ring_own(struct pt_rthread *t, uint64_t index) {
  t->cur_index = index;
  if (pt_policy != XPT_REC_RING)
    return;
  if (!t->own && !(t->own = pt_owner_new()))
    return; /* out of memory: its chunks are nobody's, never taken */
  pthread_mutex_lock(&pt_ring_lock);
  pt_rec.owner[index] = t->own;
  pt_rec.chunk_gen[index] = atomic_load(&pt_rec.h->gen);
  t->own->nchunks++;
  t->own->cur = index;
  pthread_mutex_unlock(&pt_ring_lock);
}

/* Ring: a thread that ends leaves its chunks to be taken, oldest first. */
static void pt_ring_release(struct pt_rthread *t) {
  if (!t->own)
    return;
  pthread_mutex_lock(&pt_ring_lock);
  t->own->dead = true;
  t->own->cur = UINT64_MAX;
  if (t->own->nchunks == 0) {
    t->own->nchunks = 1; /* pt_owner_lose frees it */
    pt_owner_lose(t->own);
  }
  pthread_mutex_unlock(&pt_ring_lock);
  t->own = NULL;
}

static void pt_block_signals(sigset_t *old) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, old);
}

static void pt_restore_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

static void pt_append(uint8_t *data, uint32_t off, const struct xpt_rec_raw *r, const void *a,
                      uint32_t alen, const void *b, uint32_t blen, const void *c, uint32_t clen) {
  uint8_t *p = data + off;
  memcpy(p, r, sizeof *r);
  p += sizeof *r;
  if (alen)
    memcpy(p, a, alen);
  if (blen)
    memcpy(p + alen, b, blen);
  if (clen)
    memcpy(p + alen + blen, c, clen);
}

/* Opens a new segment of t in its (new) chunk. */
static void pt_segment_open(struct pt_rthread *t) {
  char name[16] = "";
  if (t->tid == t->pid)
    snprintf(name, sizeof name, "%s", xpt_program_name());
  else
    prctl(PR_GET_NAME, name, 0, 0, 0);
  uint32_t len = (uint32_t)strnlen(name, sizeof name);
  struct xpt_rec_raw r = {pt_use_tsc ? pt_ticks() : pt_now(),
                          (uint64_t)(uint32_t)t->pid << 32 | (uint32_t)t->tid,
                          t->segment++,
                          0,
                          0,
                          XPT_REC_THREAD,
                          len};
  pt_append(t->data, t->off, &r, name, len, NULL, 0, NULL, 0); /* signals are blocked */
  t->off += xpt_rec_size(len);
  atomic_store_explicit(&t->cur->committed, t->off, memory_order_release);
}

/* t's next chunk; false when none can be had (the event is dropped).
 * Signals are blocked meanwhile: a handler recording on this thread
 * never sees a half-switched state.  The chunk left is sealed only at the
 * next switch: an append this one interrupted may still be writing it. */
static bool pt_next_chunk_unblocked(struct pt_rthread *t) {
  uint64_t index = pt_chunk_fresh();
  if (index == UINT64_MAX && pt_policy == XPT_REC_RING)
    index = pt_chunk_steal(t);
  if (index == UINT64_MAX)
    return false;
  struct xpt_rec_chunk *c = pt_chunk_map(index);
  pt_chunk_start(c, XPT_REC_CHUNK_EVENTS);
  if (t->prev)
    pt_chunk_seal(t->prev);
  t->prev = t->cur;
  pt_ring_own(t, index);
  if (t->own_desc) {
    memset(t->seen, 0xff, sizeof t->seen);
    t->own_desc = false;
  }
  t->cur = c;
  t->data = (uint8_t *)(c + 1);
  t->cap = pt_chunk_size - (uint32_t)sizeof *c;
  t->off = 0;
  pt_segment_open(t);
  return true;
}

static bool pt_next_chunk(struct pt_rthread *t) {
  sigset_t old;
  pt_block_signals(&old);
  bool ok = pt_next_chunk_unblocked(t);
  pt_restore_signals(&old);
  return ok;
}

/* Space for `size` bytes, reserved before it is written, so that a
 * signal handler recording on this thread meanwhile appends after it. */
static uint8_t *pt_reserve(struct pt_rthread *t, uint32_t size, struct xpt_rec_chunk **chunk,
                           uint32_t *end) {
  if (t->cap - t->off < size && !pt_next_chunk(t))
    return NULL;
  uint8_t *p = t->data + t->off;
  *chunk = t->cur;
  t->off += size;
  *end = t->off;
  atomic_signal_fence(memory_order_seq_cst);
  return p;
}

/* Publishes a reserved record: in the current chunk, everything reserved
 * so far (an interrupting handler's records are complete); in a chunk a
 * handler has moved on from, up to this record unless it went further. */
static inline void pt_commit(struct pt_rthread *t, struct xpt_rec_chunk *c, uint32_t end) {
  atomic_signal_fence(memory_order_seq_cst);
  if (__builtin_expect(c == t->cur, 1))
    end = t->off;
  else if (end <= atomic_load_explicit(&c->committed, memory_order_relaxed))
    return;
  atomic_store_explicit(&c->committed, end, memory_order_release);
}

static void pt_thread_exit(void *p);

/* A thread's state: one that an ended thread left (its chunk goes on
 * being filled), else a new one.  Memory from mmap, not malloc, so that a
 * thread's first event may come from a signal handler. */
static struct pt_rthread *pt_thread_new_unblocked(void) {
  /* Signals are blocked: waiting for the lock cannot wait for ourselves. */
  pthread_mutex_lock(&pt_free_lock);
  struct pt_rthread *t = pt_free;
  if (t)
    pt_free = t->next_free;
  pthread_mutex_unlock(&pt_free_lock);
  if (!t) {
    void *m = mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      return NULL;
    t = m;
    memset(t->seen, 0xff, sizeof t->seen);
    struct pt_rthread *head = atomic_load_explicit(&pt_all, memory_order_relaxed);
    do
      t->next_all = head;
    while (!atomic_compare_exchange_weak(&pt_all, &head, t));
  }
  t->pid = getpid();
  t->tid = (pid_t)syscall(SYS_gettid);
  t->segment = 0;
  t->next_free = NULL;
  if (pt_policy == XPT_REC_RING && !(t->own = pt_owner_new()))
    return NULL;
  if (t->cur && t->cap - t->off >= xpt_rec_size(16))
    pt_segment_open(t);
  else if (t->cur)
    t->off = t->cap; /* full: the first record takes a new chunk */
  pt_tls = t;
  pthread_setspecific(pt_key, t);
  return t;
}

static struct pt_rthread *pt_thread_new(void) {
  sigset_t old;
  pt_block_signals(&old);
  struct pt_rthread *t = pt_thread_new_unblocked();
  pt_restore_signals(&old);
  return t;
}

static void pt_thread_exit(void *p) {
  struct pt_rthread *t = p;
  sigset_t old;
  pt_block_signals(&old);
  if (pt_tls == t)
    pt_tls = NULL; /* a later record (another destructor) starts afresh */
  if (t->prev)
    pt_chunk_seal(t->prev);
  t->prev = NULL;
  if (pt_policy == XPT_REC_RING) {
    /* Its chunks stay with its owner, to be taken oldest first; the
     * state starts the next thread on a chunk of its own. */
    if (t->cur)
      pt_chunk_seal(t->cur);
    t->cur = NULL;
    t->data = NULL;
    t->cap = t->off = 0;
    pt_ring_release(t);
  }
  pt_restore_signals(&old);
  pthread_mutex_lock(&pt_free_lock);
  t->next_free = pt_free;
  pt_free = t;
  pthread_mutex_unlock(&pt_free_lock);
}

/* ---- descriptions ---------------------------------------------------------- */

/* Writes the description of event (uid) into the shared dictionary chunk,
 * else (lock busy: a signal handler, or no chunk left) into t's own
 * chunk, which then forgets it when t moves to its next chunk.  Returns
 * whether it was written (then t remembers the uid as described). */
static bool pt_describe(struct pt_rthread *t, const xpti_trace_event_data_t *event, uint64_t uid) {
  struct xpt_rec_desc d;
  memset(&d, 0, sizeof d);
  const xpti_payload_t *p = event->reserved.payload;
  const char *name = p ? p->name : NULL, *file = p ? p->source_file : NULL;
  d.name_len = name ? (uint16_t)strnlen(name, XPT_REC_DESC_STR_MAX) : 0;
  d.file_len = file ? (uint16_t)strnlen(file, XPT_REC_DESC_STR_MAX) : 0;
  d.line = p ? p->line_no : XPTI_INVALID_LINE;
  d.column = p ? p->column_no : XPTI_INVALID_LINE;
  d.payload_flags = p ? p->flags : 0;
  d.source_id = event->source_id;
  d.target_id = event->target_id;
  d.event_type = event->event_type;
  d.activity_type = event->activity_type;
  d.event_flags = event->flags;
  uint8_t meta[XPT_REC_DESC_META_MAX];
  uint32_t count = xptiMetadataCount(event);
  for (uint32_t i = 0; i < count; i++) {
    uint32_t key_id;
    int32_t value_id;
    if (xptiMetadataAt(event, i, &key_id, &value_id) != XPTI_RESULT_SUCCESS)
      break;
    const char *key = xptiLookupString(key_id);
    xpti_object_data_t o = xptiLookupObject(value_id);
    if (!key || !o.data)
      continue;
    struct xpt_rec_meta m = {(uint16_t)strnlen(key, 255), o.type, 0, 0};
    m.value_len = o.size > 1024 ? 1024 : (uint32_t)o.size;
    size_t need = sizeof m + m.key_len + m.value_len;
    if (d.meta_len + need > sizeof meta)
      break;
    memcpy(meta + d.meta_len, &m, sizeof m);
    memcpy(meta + d.meta_len + sizeof m, key, m.key_len);
    memcpy(meta + d.meta_len + sizeof m + m.key_len, o.data, m.value_len);
    d.meta_len += (uint32_t)need;
    d.meta_count++;
  }
  uint32_t len = (uint32_t)sizeof d + d.name_len + d.file_len + d.meta_len;
  uint32_t size = xpt_rec_size(len);
  struct xpt_rec_raw r = {0, uid, 0, 0, 0, XPT_REC_DESC, len};
  uint32_t dcap = pt_chunk_size - (uint32_t)sizeof(struct xpt_rec_chunk);
  if (pthread_mutex_trylock(&pt_dict_lock) == 0) {
    bool ok = pt_dict && dcap - pt_dict_off >= size;
    if (!ok) {
      sigset_t old;
      pt_block_signals(&old);
      uint64_t index = pt_chunk_fresh();
      pt_restore_signals(&old);
      struct xpt_rec_chunk *c = index == UINT64_MAX ? NULL : pt_chunk_map(index);
      if (c) {
        pt_chunk_start(c, XPT_REC_CHUNK_DICT);
        if (pt_dict)
          pt_chunk_seal(pt_dict);
        pt_dict = c;
        pt_dict_off = 0;
        ok = true;
      }
    }
    if (ok) {
      pt_append((uint8_t *)(pt_dict + 1), pt_dict_off, &r, &d, sizeof d, name, d.name_len, file,
                d.file_len);
      memcpy((uint8_t *)(pt_dict + 1) + pt_dict_off + sizeof r + sizeof d + d.name_len +
                 d.file_len,
             meta, d.meta_len);
      pt_dict_off += size;
      atomic_store_explicit(&pt_dict->committed, pt_dict_off, memory_order_release);
    }
    pthread_mutex_unlock(&pt_dict_lock);
    if (ok)
      return true;
  }
  /* Into the thread's own chunk, just before the record that needs it. */
  struct xpt_rec_chunk *c;
  uint32_t end;
  uint8_t *at = pt_reserve(t, size, &c, &end);
  if (!at)
    return false;
  pt_append(at, 0, &r, &d, sizeof d, name, d.name_len, file, d.file_len);
  memcpy(at + sizeof r + sizeof d + d.name_len + d.file_len, meta, d.meta_len);
  pt_commit(t, c, end);
  t->own_desc = true;
  return true;
}

/* The tool of a user-defined type, named once per recording. */
static void pt_name_tool(uint16_t type) {
  uint8_t tool = (uint8_t)XPTI_TOOL_ID(type);
  if (atomic_load_explicit(&pt_rec.h->tool_named[tool], memory_order_relaxed))
    return;
  const char *name = xptiLookupToolName(tool);
  if (!name || atomic_exchange(&pt_rec.h->tool_named[tool], 1))
    return;
  char *dst = (char *)pt_rec.h + XPT_REC_TOOLS_OFF + (size_t)tool * XPT_REC_NAME_LEN;
  strncpy(dst, name, XPT_REC_NAME_LEN - 1);
}

/* ---- recording ------------------------------------------------------------- */

static bool pt_rec_ready(void);
static void pt_name_stream(uint8_t id, const char *name);
static _Atomic uint8_t pt_stream_on[256];

static void pt_record_slow_body(struct pt_rthread *t, bool tsc, uint8_t stream, uint16_t type,
                                const xpti_trace_event_data_t *event, uint64_t instance,
                                const void *user_data);

/* Everything but the common case: no thread state or chunk yet, a full
 * chunk, a trace point not yet described, a NULL event, the slow types. */
static __attribute__((noinline)) void pt_record_slow(bool tsc, uint8_t stream, uint16_t type,
                                                     const xpti_trace_event_data_t *event,
                                                     uint64_t instance, const void *user_data) {
  if (!pt_rec_ready()) {
    atomic_fetch_add_explicit(&pt_lost_early, 1, memory_order_relaxed);
    return;
  }
  struct pt_rthread *t = pt_tls;
  if (!t && !(t = pt_thread_new())) {
    pt_drop(1);
    return;
  }
  if (t->busy) {
    pt_drop(1); /* a signal handler interrupted this thread's recording */
    return;
  }
  t->busy = true;
  atomic_signal_fence(memory_order_seq_cst);
  pt_record_slow_body(t, tsc, stream, type, event, instance, user_data);
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = false;
}

static void pt_record_slow_body(struct pt_rthread *t, bool tsc, uint8_t stream, uint16_t type,
                                const xpti_trace_event_data_t *event, uint64_t instance,
                                const void *user_data) {
  uint8_t kind = XPT_REC_EVENT;
  const void *extra = NULL, *s1 = NULL, *s2 = NULL;
  uint32_t extra_len = 0, s1_len = 0, s2_len = 0;
  struct xpt_rec_timed timed = {0, 0, 0, 0, 0, 0};
  struct xpt_rec_edge edge = {0, 0};
  if (type & XPTI_TRACE_USER_DEFINED)
    pt_name_tool(type);
  if (type == pt_timed_type && pt_timed_type) {
    const xptrace_timed_slice_t *slice = user_data;
    if (!slice) {
      if (!atomic_exchange(&pt_timed_bad_reported, true))
        xpt_msg("xpti: perfetto collector: timed slice without user data ignored");
      return;
    }
    timed = (struct xpt_rec_timed){slice->begin_ns, slice->end_ns, slice->track_id, 0, 0, 0};
    if (slice->track_name)
      timed.track_name_len = (uint16_t)strnlen(slice->track_name, 255);
    if (slice->name)
      timed.name_len = (uint16_t)strnlen(slice->name, 255);
    kind = XPT_REC_TIMED;
    extra = &timed;
    extra_len = sizeof timed;
    s1 = slice->track_name, s1_len = timed.track_name_len;
    s2 = slice->name, s2_len = timed.name_len;
  } else if (type == XPTI_TRACE_EDGE_CREATE && event) {
    /* Which visits of the two nodes the edge joins: their latest. */
    const xpti_trace_event_data_t *from = xptiFindEvent(event->source_id);
    const xpti_trace_event_data_t *to = xptiFindEvent(event->target_id);
    edge.source_instance = from ? __atomic_load_n(&from->instance_id, __ATOMIC_RELAXED) : 0;
    edge.target_instance = to ? __atomic_load_n(&to->instance_id, __ATOMIC_RELAXED) : 0;
    kind = XPT_REC_EDGE;
    extra = &edge;
    extra_len = sizeof edge;
  }
  uint64_t uid = event ? event->unique_id : 0;
  bool named = uid != 0 && uid != PT_SEEN_EMPTY;
  if (!t->cur && !pt_next_chunk(t)) {
    pt_drop(1);
    return;
  }
  if (named && t->seen[pt_seen_slot(uid)] != uid && pt_describe(t, event, uid))
    t->seen[pt_seen_slot(uid)] = uid;
  if (!named && kind == XPT_REC_EVENT && !(type & 1)) {
    /* No trace point to describe: begins and instants carry their name
     * (an event's payload name, or the name in the user data). */
    const char *name = NULL;
    if (event && event->reserved.payload)
      name = event->reserved.payload->name;
    if (!name)
      name = xpti_user_data_name(type, user_data);
    if (name) {
      s1 = name;
      s1_len = (uint32_t)strnlen(name, 255);
    }
    uid = 0;
  }
  uint32_t len = extra_len + s1_len + s2_len;
  struct xpt_rec_chunk *c;
  uint32_t end;
  uint8_t *p = pt_reserve(t, xpt_rec_size(len), &c, &end);
  if (!p) {
    pt_drop(1);
    return;
  }
  struct xpt_rec_raw r = {tsc ? pt_ticks() : pt_now(), uid, instance, type, stream, kind, len};
  pt_append(p, 0, &r, extra, extra_len, s1, s1_len, s2, s2_len);
  pt_commit(t, c, end);
}

/* The common case: a TLS load, the described-check, a bounds check, the
 * timestamp, four stores of the record and the release store that
 * publishes it. */
static inline __attribute__((always_inline)) void
pt_record(bool tsc, uint8_t stream, uint16_t type, const xpti_trace_event_data_t *event,
          uint64_t instance, const void *user_data) {
  struct pt_rthread *t = pt_tls;
  if (__builtin_expect(t != NULL && event != NULL && !pt_slow_type[type & 0xff], 1)) {
    if (__builtin_expect(t->busy, 0)) {
      pt_drop(1); /* a signal handler interrupted this thread's recording */
      return;
    }
    t->busy = true; /* before t->off is read: see pt_rthread.busy */
    atomic_signal_fence(memory_order_seq_cst);
    uint64_t uid = event->unique_id;
    uint32_t off = t->off;
    if (__builtin_expect(t->seen[pt_seen_slot(uid)] == uid &&
                             t->cap - off >= (uint32_t)sizeof(struct xpt_rec_raw),
                         1)) {
      struct xpt_rec_raw *r = (struct xpt_rec_raw *)(t->data + off);
      r->ts = tsc ? pt_ticks() : pt_now();
      r->uid = uid;
      r->instance = instance;
      r->type = type;
      r->stream = stream;
      r->kind = XPT_REC_EVENT;
      r->len = 0;
      t->off = off + (uint32_t)sizeof *r;
      atomic_store_explicit(&t->cur->committed, t->off, memory_order_release);
      atomic_signal_fence(memory_order_seq_cst);
      t->busy = false;
      return;
    }
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = false;
  }
  pt_record_slow(tsc, stream, type, event, instance, user_data);
}

/* One callback per stream receives every trace type, user-defined ones
 * registered at any time included; the clock is chosen at set-up. */
static void pt_stream_cb_tsc(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                             xpti_trace_event_data_t *event, uint64_t instance,
                             const void *user_data) {
  (void)parent;
  pt_record(true, stream, type, event, instance, user_data);
}

static void pt_stream_cb_mono(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                              xpti_trace_event_data_t *event, uint64_t instance,
                              const void *user_data) {
  (void)parent;
  pt_record(false, stream, type, event, instance, user_data);
}

/* ---- opening the recording ---------------------------------------------- */

/* 256 chunks share the budget (fewer for small budgets), so that threads
 * share it fairly and the drainer frees them in small steps. */
static uint32_t pt_chunk_size_for(uint64_t budget) {
  uint64_t cap = budget / 256;
  cap = cap < XPT_REC_CHUNK_MIN ? XPT_REC_CHUNK_MIN : cap > (256u << 10) ? (256u << 10) : cap;
  return (uint32_t)(cap & ~(uint64_t)4095);
}

/* Creates the recording in the output folder (exclusively: a new name
 * when taken), sized and mapped.  Normal context only (stream set-up). */
static void pt_rec_open_locked(void) {
  if (pt_rec.h || pt_rec.failed)
    return;
  const char *dir = xpt_output_dir();
  if (!dir) {
    pt_rec.failed = true;
    return;
  }
  snprintf(pt_rec.dir, sizeof pt_rec.dir, "%s", dir);
  int fd = -1;
  for (int n = 0; n < 1000 && fd < 0; n++) {
    if (n == 0)
      snprintf(pt_rec.name, sizeof pt_rec.name, "%s", XPT_REC_FILE);
    else
      snprintf(pt_rec.name, sizeof pt_rec.name, "events.%d.xprec", n);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, pt_rec.name);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  uint64_t chunks = pt_budget / pt_chunk_size;
  size_t size = XPT_REC_HEADER_SIZE + (size_t)chunks * pt_chunk_size;
  bool shrunk = false;
  int err = fd < 0 ? errno : 0;
  /* Blocks reserved now: a full disk is a message here, never a SIGBUS
   * when a page is first written.  Short of room, a smaller budget. */
  while (!err && fallocate(fd, 0, 0, (off_t)size) != 0) {
    err = errno;
    if ((err == EOPNOTSUPP || err == ENOSYS) && ftruncate(fd, (off_t)size) == 0) {
      err = 0;
      break;
    }
    if (err != ENOSPC || pt_budget / 2 < XPT_BUFFER_MIN)
      break;
    pt_budget /= 2;
    pt_chunk_size = pt_chunk_size_for(pt_budget);
    chunks = pt_budget / pt_chunk_size;
    size = XPT_REC_HEADER_SIZE + (size_t)chunks * pt_chunk_size;
    err = 0;
    shrunk = true;
  }
  if (!err && shrunk)
    xpt_msg("xpti: perfetto collector: the disk is nearly full; recording in %llu KiB",
            (unsigned long long)(pt_budget >> 10));
  void *h = MAP_FAILED;
  if (!err && (h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
    err = errno;
  int spill = -1;
  if (!err && pt_policy == XPT_REC_FLUSH) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s%s", dir, pt_rec.name, XPT_REC_SPILL_SUFFIX);
    unlink(path); /* a stale one of a recording of this name that is gone */
    spill = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (spill < 0)
      err = errno;
  }
  if (!err && pt_policy == XPT_REC_RING) {
    pt_rec.owner = calloc(chunks, sizeof *pt_rec.owner);
    pt_rec.chunk_gen = calloc(chunks, sizeof *pt_rec.chunk_gen);
    if (!pt_rec.owner || !pt_rec.chunk_gen)
      err = ENOMEM;
  }
  if (err) {
    xpt_msg("xpti: perfetto collector cannot make its recording in '%s': %s", dir,
            strerror(err));
    if (h != MAP_FAILED)
      munmap(h, size);
    if (fd >= 0) {
      char path[4200];
      snprintf(path, sizeof path, "%s/%s", dir, pt_rec.name);
      unlink(path);
      close(fd);
    }
    pt_rec.failed = true;
    return;
  }
  /* Held while this process lives: a finisher knows it is still running. */
  flock(fd, LOCK_SH);
  struct xpt_rec_header *hd = h;
  hd->version = XPT_REC_VERSION;
  hd->header_size = XPT_REC_HEADER_SIZE;
  hd->chunk_size = pt_chunk_size;
  hd->policy = pt_policy;
  hd->clock = pt_use_tsc ? XPT_REC_CLOCK_TSC : XPT_REC_CLOCK_MONOTONIC;
  hd->format = pt_format_kind;
  hd->annotate_all = pt_annotate;
  hd->pid = getpid();
  hd->ppid = getppid();
  hd->forked = pt_rec.pid != 0 && pt_rec.pid != getpid();
  hd->max_chunks = chunks;
  hd->start_ns = pt_now();
  if (pt_use_tsc) {
    /* A (ticks, ns) pair read as close together as a few tries allow. */
    uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
      uint64_t t0 = pt_ticks(), ns = pt_now(), t1 = pt_ticks();
      if (t1 - t0 < best_gap) {
        best_gap = t1 - t0;
        hd->tsc_base = t0 + (t1 - t0) / 2;
        hd->tsc_base_ns = ns;
      }
    }
  }
  snprintf(hd->program, sizeof hd->program, "%s", xpt_program_name());
  atomic_store(&hd->dropped, atomic_exchange(&pt_lost_early, 0));
  atomic_store(&hd->state, XPT_REC_RECORDING);
  __atomic_store_n(&hd->magic, XPT_REC_MAGIC, __ATOMIC_RELEASE);
  pt_rec.max_chunks = chunks;
  pt_rec.fd = fd;
  pt_rec.spill_fd = spill;
  pt_rec.base = h;
  pt_rec.map_len = size;
  pt_rec.pid = getpid();
  if (pt_policy == XPT_REC_FLUSH)
    pt_drain_start(spill, pt_rec.base + XPT_REC_HEADER_SIZE, pt_chunk_size, chunks, hd);
  __atomic_store_n(&pt_rec.h, hd, __ATOMIC_RELEASE);
  for (unsigned id = 0; id < 256; id++) /* a forked child names them again */
    if (pt_stream_on[id] && xptiLookupStreamName((uint8_t)id))
      pt_name_stream((uint8_t)id, xptiLookupStreamName((uint8_t)id));
}

static bool pt_rec_ready(void) {
  if (__atomic_load_n(&pt_rec.h, __ATOMIC_ACQUIRE))
    return true;
  /* A forked child before its first stream call: make its own recording
   * (never from a signal handler that interrupted a holder). */
  if (pthread_mutex_trylock(&pt_open_lock) != 0)
    return false;
  pt_rec_open_locked();
  pthread_mutex_unlock(&pt_open_lock);
  return __atomic_load_n(&pt_rec.h, __ATOMIC_ACQUIRE) != NULL;
}

static void pt_name_stream(uint8_t id, const char *name) {
  if (!pt_rec.h || atomic_exchange(&pt_rec.h->stream_named[id], 1))
    return;
  char *dst = (char *)pt_rec.h + XPT_REC_STREAMS_OFF + (size_t)id * XPT_REC_NAME_LEN;
  strncpy(dst, name, XPT_REC_NAME_LEN - 1);
}

/* ---- the end of the run -------------------------------------------------- */

static _Atomic bool pt_finished;

/* Normal exit, not under `xptrace`: finish the recording here.  Runs as
 * late as a library destructor can, after the program's atexit handlers,
 * so that their events are in. */
static void pt_finish_here(void) {
  if (pt_launcher_finishes || !pt_rec.h || pt_rec.pid != getpid() ||
      atomic_exchange(&pt_finished, true))
    return;
  pt_drain_stop();
  flock(pt_rec.fd, LOCK_UN); /* the finisher takes it exclusively */
  struct xpt_finish_result res;
  if (xpt_finish_recording(pt_rec.dir, pt_rec.name, "xpti:", &res) == 0 && res.dropped)
    xpt_msg("xpti: perfetto collector dropped %" PRIu64 " events%s\n", res.dropped,
            res.disk_full == 1   ? " (the disk is full)"
            : res.disk_full == 2 ? " (the program closed the recording's descriptor)"
                                 : "");
}

__attribute__((destructor)) static void pt_at_unload(void) { pt_finish_here(); }


/* ---- fork: the child makes a recording of its own ------------------------- */

static void pt_fork_prepare(void) {
  pthread_mutex_lock(&pt_open_lock);
  pthread_mutex_lock(&pt_dict_lock);
  pthread_mutex_lock(&pt_ring_lock);
  pthread_mutex_lock(&pt_free_lock);
  pt_drain_fork_prepare();
}

static void pt_fork_parent(void) {
  pt_drain_fork_parent();
  pthread_mutex_unlock(&pt_free_lock);
  pthread_mutex_unlock(&pt_ring_lock);
  pthread_mutex_unlock(&pt_dict_lock);
  pthread_mutex_unlock(&pt_open_lock);
}

/* The parent's chunks and file are the parent's: unmap, never write. */
static void pt_fork_child(void) {
  pthread_mutex_init(&pt_free_lock, NULL);
  pthread_mutex_init(&pt_ring_lock, NULL);
  pthread_mutex_init(&pt_dict_lock, NULL);
  pthread_mutex_init(&pt_open_lock, NULL);
  pt_free = NULL;
  for (struct pt_rthread *t = atomic_load(&pt_all); t; t = t->next_all) {
    t->cur = t->prev = NULL; /* in the parent's mapping */
    t->own = NULL;
    t->data = NULL;
    t->cap = t->off = 0;
    memset(t->seen, 0xff, sizeof t->seen);
    if (t != pt_tls) { /* that thread does not exist here: reuse its state */
      t->next_free = pt_free;
      pt_free = t;
    } else {
      t->pid = getpid();
      t->tid = (pid_t)syscall(SYS_gettid);
      t->segment = 0;
    }
  }
  pt_dict = NULL;
  pt_dict_off = 0;
  pt_owners = pt_owners_free = NULL; /* the parent's threads' */
  if (pt_rec.base)
    munmap(pt_rec.base, pt_rec.map_len);
  pt_rec.base = NULL;
  if (pt_rec.fd >= 0)
    close(pt_rec.fd); /* the parent's shared lock stays with the parent */
  pt_drain_fork_child(); /* closes the spill file */
  pt_rec.spill_fd = -1;
  free(pt_rec.owner);
  free(pt_rec.chunk_gen);
  pt_rec.owner = NULL;
  pt_rec.chunk_gen = NULL;
  pt_rec.h = NULL;
  pt_rec.fd = -1;
  pt_rec.failed = false;
  atomic_store(&pt_finished, false);
  atomic_store(&pt_lost_early, 0);
  /* Stream names are known again from the framework at the child's
   * first record; pt_rec.pid still names the parent (forked flag). */
}

/* ---- set-up and the subscriber entry points --------------------------- */

static void pt_setup(void) {
  const char *mode = getenv("XPTRACE_CLOCK");
  bool want_tsc = true;
  if (mode && !strcmp(mode, "monotonic"))
    want_tsc = false;
  else if (mode && *mode && strcmp(mode, "auto"))
    xpt_msg("xpti: XPTRACE_CLOCK='%s' is not auto or monotonic; using auto", mode);
  pt_use_tsc = PT_HAVE_TSC && want_tsc && pt_tsc_invariant();
  const char *fmt = getenv("XPTRACE_TRACE_FORMAT");
  pt_format_kind = XPT_REC_FORMAT_PROTO;
  if (fmt && !strcmp(fmt, "json"))
    pt_format_kind = XPT_REC_FORMAT_JSON;
  else if (fmt && *fmt && strcmp(fmt, "perfetto"))
    xpt_msg("xpti: XPTRACE_TRACE_FORMAT='%s' is not perfetto or json; using perfetto",
            fmt);
  const char *policy = getenv("XPTRACE_BUFFER_POLICY");
  pt_policy = XPT_REC_FLUSH;
  if (policy && !strcmp(policy, "ring"))
    pt_policy = XPT_REC_RING;
  else if (policy && *policy && strcmp(policy, "flush"))
    xpt_msg("xpti: XPTRACE_BUFFER_POLICY='%s' is not flush or ring; using flush",
            policy);
  const char *annotate = getenv("XPTRACE_ANNOTATE");
  pt_annotate = annotate && !strcmp(annotate, "all");
  if (annotate && *annotate && !pt_annotate && strcmp(annotate, "minimal"))
    xpt_msg("xpti: XPTRACE_ANNOTATE='%s' is not minimal or all; using minimal",
            annotate);
  const char *finisher = getenv("XPTRACE_FINISHER");
  pt_launcher_finishes = finisher && !strcmp(finisher, "launcher");
  pt_budget = xpt_env_buffer_size(); /* at least 8 chunks of the smallest size */
  pt_chunk_size = pt_chunk_size_for(pt_budget);
  pt_slow_type[XPTI_TRACE_EDGE_CREATE] = 1;
  for (unsigned i = 0x80; i < 0x100; i++)
    pt_slow_type[i] = 1;
  pt_timed_type = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
  pthread_key_create(&pt_key, pt_thread_exit);
  pthread_atfork(pt_fork_prepare, pt_fork_parent, pt_fork_child);
}

static pthread_mutex_t pt_streams_lock = PTHREAD_MUTEX_INITIALIZER;

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  (void)major;
  (void)minor;
  (void)version;
  pthread_once(&pt_once, pt_setup);
  if (!stream || !*stream || !xpt_stream_selected(stream))
    return;
  uint8_t id = xptiRegisterStream(stream);
  if (id == XPTI_INVALID_STREAM_ID)
    return;
  pthread_mutex_lock(&pt_open_lock);
  pt_rec_open_locked();
  pthread_mutex_unlock(&pt_open_lock);
  pthread_mutex_lock(&pt_streams_lock);
  bool fresh = !atomic_exchange(&pt_stream_on[id], 1);
  pt_name_stream(id, stream);
  pthread_mutex_unlock(&pt_streams_lock);
  if (fresh)
    xptiRegisterStreamCallback(id, pt_use_tsc ? pt_stream_cb_tsc : pt_stream_cb_mono);
}

/* The recording holds everything already: nothing to do until the end. */
XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) { (void)stream; }
