/* libxpti_perfetto.so: chunks of the recording, the states of the threads
 * writing them, and (policy ring) who holds which chunk. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pt_drain.h"
#include "pt_recorder.h"
#include "xpt_api.h"
#include "xpt_collector.h"

bool pt_use_tsc;
uint32_t pt_policy;
uint64_t pt_budget;
uint32_t pt_chunk_size;
struct pt_recording pt_rec = {.fd = -1, .spill_fd = -1};
pthread_mutex_t pt_ring_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t pt_free_lock = PTHREAD_MUTEX_INITIALIZER;
struct pt_rthread *_Atomic pt_all;
struct pt_rthread *pt_free;
pthread_key_t pt_key;
_Atomic uint64_t pt_lost_early;
__thread struct pt_rthread *pt_tls __attribute__((tls_model("initial-exec")));


void pt_drop(uint64_t n) {
  if (pt_rec.h)
    atomic_fetch_add_explicit(&pt_rec.h->dropped, n, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&pt_lost_early, n, memory_order_relaxed);
}

struct xpt_rec_chunk *pt_chunk_map(uint64_t index) {
  return (struct xpt_rec_chunk *)(pt_rec.base + XPT_REC_HEADER_SIZE + index * pt_chunk_size);
}

void pt_chunk_start(struct xpt_rec_chunk *c, uint32_t kind) {
  atomic_store_explicit(&c->committed, 0, memory_order_relaxed);
  atomic_store_explicit(&c->state, XPT_REC_ACTIVE, memory_order_relaxed);
  c->kind = kind;
  atomic_store_explicit(&c->gen, atomic_fetch_add(&pt_rec.h->gen, 1) + 1, memory_order_relaxed);
  __atomic_store_n(&c->magic, XPT_REC_CHUNK_MAGIC, __ATOMIC_RELEASE);
}

/* A chunk to write into, or UINT64_MAX: flush, a free one from the
 * drainer; ring, one never used yet. */
uint64_t pt_chunk_fresh(void) {
  if (pt_policy == XPT_REC_FLUSH)
    return pt_drain_take();
  uint64_t index = atomic_fetch_add(&pt_rec.h->chunks_used, 1);
  if (index < pt_rec.max_chunks)
    return index;
  atomic_fetch_sub(&pt_rec.h->chunks_used, 1);
  return UINT64_MAX;
}

/* Its writer has moved on: the drainer may copy it out and free it. */
void pt_chunk_seal(struct xpt_rec_chunk *c) {
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
  if (best == UINT64_MAX && self->w.cur && self->own)
    best = self->cur_index; /* every thread holds one chunk: start its own again */
  if (best != UINT64_MAX) {
    pt_owner_lose(pt_rec.owner[best]);
    pt_rec.owner[best] = NULL;
    /* Count what is lost: the events of the chunk. */
    struct xpt_rec_chunk *c = pt_chunk_map(best);
    {
      const uint8_t *d = (const uint8_t *)(c + 1);
      uint32_t end = atomic_load(&c->committed), off = 0, n = 0;
      while (off + XPT_REC_MIN_SIZE <= end) {
        struct xpt_rec_raw r;
        uint32_t size = xpt_rec_read(d + off, end - off, &r);
        if (size == 0)
          break;
        n += r.kind <= XPT_REC_EDGE; /* events, not thread or description records */
        off += size;
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

void pt_block_signals(sigset_t *old) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, old);
}

void pt_restore_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

void pt_append(uint8_t *data, uint32_t off, const struct xpt_rec_raw *r, const void *a,
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
  pt_append(t->w.data, t->w.off, &r, name, len, NULL, 0, NULL, 0); /* signals are blocked */
  t->w.off += xpt_rec_size(len);
  atomic_store_explicit(&t->w.cur->committed, t->w.off, memory_order_release);
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
  t->prev = t->w.cur;
  pt_ring_own(t, index);
  if (t->own_desc) {
    memset(t->w.seen, 0xff, sizeof t->w.seen);
    t->own_desc = false;
  }
  t->w.cur = c;
  t->w.data = (uint8_t *)(c + 1);
  t->w.cap = pt_chunk_size - (uint32_t)sizeof *c;
  t->w.off = 0;
  pt_segment_open(t);
  return true;
}

bool pt_next_chunk(struct pt_rthread *t) {
  sigset_t old;
  pt_block_signals(&old);
  bool ok = pt_next_chunk_unblocked(t);
  pt_restore_signals(&old);
  return ok;
}

/* Space for `size` bytes with `keep` more left free after them (the ends
 * of open slices), reserved before it is written, so that a signal
 * handler recording on this thread meanwhile appends after it. */
uint8_t *pt_reserve(struct pt_rthread *t, uint32_t size, uint32_t keep,
                    struct xpt_rec_chunk **chunk, uint32_t *end) {
  if (t->w.cap - t->w.off < size + keep && (!pt_next_chunk(t) || t->w.cap - t->w.off < size + keep))
    return NULL;
  uint8_t *p = t->w.data + t->w.off;
  *chunk = t->w.cur;
  t->w.off += size;
  *end = t->w.off;
  atomic_signal_fence(memory_order_seq_cst);
  return p;
}

/* Publishes a reserved record: in the current chunk, everything reserved
 * so far (an interrupting handler's records are complete); in a chunk a
 * handler has moved on from, up to this record unless it went further. */
void pt_commit(struct pt_rthread *t, struct xpt_rec_chunk *c, uint32_t end) {
  atomic_signal_fence(memory_order_seq_cst);
  if (__builtin_expect(c == t->w.cur, 1))
    end = t->w.off;
  else if (end <= atomic_load_explicit(&c->committed, memory_order_relaxed))
    return;
  atomic_store_explicit(&c->committed, end, memory_order_release);
}


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
    memset(t->w.seen, 0xff, sizeof t->w.seen);
    struct pt_rthread *head = atomic_load_explicit(&pt_all, memory_order_relaxed);
    do
      t->next_all = head;
    while (!atomic_compare_exchange_weak(&pt_all, &head, t));
  }
  t->pid = getpid();
  t->tid = (pid_t)syscall(SYS_gettid);
  t->stamp = xpt_api_thread_stamp();
  t->segment = 0;
  t->next_free = NULL;
  t->depth = t->w.hold = 0; /* the ended thread's open slices are not ours */
  if (pt_policy == XPT_REC_RING && !(t->own = pt_owner_new()))
    return NULL;
  if (t->w.cur && t->w.cap - t->w.off >= xpt_rec_size(16))
    pt_segment_open(t);
  else if (t->w.cur)
    t->w.off = t->w.cap; /* full: the first record takes a new chunk */
  pt_tls = t;
  pthread_setspecific(pt_key, t);
  return t;
}

struct pt_rthread *pt_thread_new(void) {
  sigset_t old;
  pt_block_signals(&old);
  struct pt_rthread *t = pt_thread_new_unblocked();
  pt_restore_signals(&old);
  return t;
}

void pt_thread_exit(void *p) {
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
    if (t->w.cur)
      pt_chunk_seal(t->w.cur);
    t->w.cur = NULL;
    t->w.data = NULL;
    t->w.cap = t->w.off = 0;
    pt_ring_release(t);
  }
  pt_restore_signals(&old);
  pthread_mutex_lock(&pt_free_lock);
  t->next_free = pt_free;
  pt_free = t;
  pthread_mutex_unlock(&pt_free_lock);
}

void pt_chunks_fork_child(void) {
  /* Held since pt_fork_prepare by this very thread: unlock, not re-init
   * (TSan would take a re-made mutex as still held, and every later
   * lock as nested in it). */
  pthread_mutex_unlock(&pt_free_lock);
  pthread_mutex_unlock(&pt_ring_lock);
  pt_owners = pt_owners_free = NULL; /* the parent's threads' */
}
