/* Internals of the dispatcher libxptifw.so; nothing here is exported. */
#ifndef XPTIFW_INTERNAL_H
#define XPTIFW_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xpti/xpti_trace_framework.h"

#define XPTIFW_HIDDEN __attribute__((visibility("hidden")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- memory that is never freed while the process may read it -------- */
/* Blocks replaced by growth or xptiReset are kept on a retired list, so a
 * lock-free reader holding an old pointer never touches freed memory; the
 * total stays within twice the live size. */
XPTIFW_HIDDEN void retire(void *block);
XPTIFW_HIDDEN void *xcalloc(size_t n, size_t size);
/* Zeroed, its pages faulted in now (huge pages from 1 MiB). */
XPTIFW_HIDDEN void *zeroed_block(size_t bytes);
/* The same in two steps: the allocation, then
 * the filling, which a caller may do outside its locks; huge_free gives
 * back a block of the same size never handed out. */
XPTIFW_HIDDEN void *huge_alloc(size_t bytes);
XPTIFW_HIDDEN void huge_fill(void *p, size_t bytes);
XPTIFW_HIDDEN void huge_free(void *p, size_t bytes);

/* The pool's lock (tables.c), taken in the fork order below. */
XPTIFW_HIDDEN void pool_fork_lock(void);
XPTIFW_HIDDEN void pool_fork_unlock(void);

/* Zeroed blocks made ahead by a background thread (reserve.c).  Sizes from
 * RESERVE_MIN up; want: keep count (at most 2) blocks of size ready; take:
 * a ready block of size or NULL, then keep keep ready from now on. */
#define RESERVE_MIN ((size_t)1 << 20) /* smaller ones: the pool */
XPTIFW_HIDDEN void reserve_want(size_t size, unsigned count);
XPTIFW_HIDDEN void *reserve_take(size_t size, unsigned keep);
/* fork: the lock, innermost; the child starts a new thread when needed. */
XPTIFW_HIDDEN void reserve_fork_lock(void);
XPTIFW_HIDDEN void reserve_fork_unlock(bool child);

/* Bump allocator for immutable copies (strings, objects, payloads). */
typedef struct arena {
  char *cur, *end;
} arena_t;
XPTIFW_HIDDEN void *arena_alloc_slow(arena_t *a, size_t size, size_t align);
static inline void *arena_alloc(arena_t *a, size_t size, size_t align) {
  uintptr_t p = ((uintptr_t)a->cur + align - 1) & ~(uintptr_t)(align - 1);
  if (UNLIKELY(p + size > (uintptr_t)a->end)) /* also when a->cur is NULL */
    return arena_alloc_slow(a, size, align);
  a->cur = (char *)(p + size);
  return (void *)p;
}
/* Give back the latest allocation (a lost insert race), when it still is. */
static inline void arena_unalloc(arena_t *a, void *p, size_t size) {
  if (a && a->cur == (char *)p + size) {
    __builtin_memset(p, 0, size); /* arenas hand out zeroed memory */
    a->cur = p;
  }
}
/* What a thread creates with: its arena (its records and strings: no
 * lock) and blocks of ids taken ID_BLOCK at a time from the shared
 * counters, so that threads creating at once neither bounce one counter's
 * cache line nor write neighbouring slots of the id vectors.  NULL before
 * the constructor or without memory: then allocate with shared_alloc,
 * which keeps the block for the process, and take ids one by one. */
#define ID_BLOCK 8
typedef struct id_block {
  uint64_t next, end;
} id_block_t;
typedef struct thread_alloc {
  arena_t arena;
  id_block_t strings, objects, tracepoints;
  uint64_t epoch; /* xptiReset: all of the above start again */
} thread_alloc_t;
XPTIFW_HIDDEN thread_alloc_t *thread_alloc(void);
XPTIFW_HIDDEN void *shared_alloc(size_t size, size_t align);

/* ---- ids -> pointers, growable without moving ------------------------ */
/* Segment k holds IDVEC_BASE << k slots, so 32 segments cover 2^42 ids. */
#define IDVEC_BASE_LOG 10
#define IDVEC_SEGMENTS 32
typedef struct idvec {
  _Atomic(_Atomic(void *) *) seg[IDVEC_SEGMENTS];
} idvec_t;

static inline _Atomic(void *) *idvec_slot(const idvec_t *v, uint64_t id, bool *present) {
  /* any id, a caller's garbage too: none past the segments, none wrapped */
  uint64_t i = id + (1u << IDVEC_BASE_LOG);
  unsigned k = 63u - (unsigned)__builtin_clzll(i | 1) - IDVEC_BASE_LOG;
  if (UNLIKELY(k >= IDVEC_SEGMENTS || i < id)) {
    *present = false;
    return NULL;
  }
  _Atomic(void *) *seg = atomic_load_explicit((_Atomic(_Atomic(void *) *) *)&v->seg[k],
                                              memory_order_acquire);
  *present = seg != NULL;
  return seg ? &seg[i - ((uint64_t)1 << (k + IDVEC_BASE_LOG))] : NULL;
}
static inline void *idvec_get(const idvec_t *v, uint64_t id) {
  bool present;
  _Atomic(void *) *slot = idvec_slot(v, id, &present);
  return present ? atomic_load_explicit(slot, memory_order_acquire) : NULL;
}
/* Lock-free: a missing segment is made and published with a CAS. */
XPTIFW_HIDDEN bool idvec_set_slow(idvec_t *v, uint64_t id, void *p);
static inline bool idvec_set(idvec_t *v, uint64_t id, void *p) {
  uint64_t i = id + (1u << IDVEC_BASE_LOG);
  unsigned k = 63u - (unsigned)__builtin_clzll(i) - IDVEC_BASE_LOG;
  uint64_t index = i - ((uint64_t)1 << (k + IDVEC_BASE_LOG));
  _Atomic(void *) *seg = k < IDVEC_SEGMENTS ? atomic_load_explicit(
                                                  (_Atomic(_Atomic(void *) *) *)&v->seg[k],
                                                  memory_order_acquire)
                                            : NULL;
  /* the slow path also asks, half way through a segment, for the next */
  if (UNLIKELY(!seg || index == (uint64_t)1 << (k + IDVEC_BASE_LOG - 1)))
    return idvec_set_slow(v, id, p);
  atomic_store_explicit(&seg[index], p, memory_order_release);
  return true;
}

/* ---- hashing --------------------------------------------------------- */
XPTIFW_HIDDEN uint64_t hash_bytes(const void *data, size_t len, uint64_t seed);
static inline uint64_t hash_mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

/* ---- open-addressing index of pointers ------------------------------- */
/* Each slot packs a pointer (x86-64/AArch64 user space: < 2^48) with the
 * low 16 bits of its hash, so a probe rejects non-matching slots without
 * touching the element: one cache miss for the slot, one for the match.
 * An element's home is the top bits of its hash, so the home in a twice as
 * large index is 2*home or 2*home+1: growth writes the new index in the
 * order it reads the old one, streaming through both.  The full hash sits
 * beside each slot for growth, which so never visits elements: an insert
 * writes one cache line, where a second array of hashes took two (with
 * threads creating at once, each a miss to the other core).
 *
 * Lock-free on both sides: an insert claims an empty slot with a CAS; no
 * slot is ever emptied.  Growth (one thread at a time, under the owner's
 * grow lock) freezes every empty slot of the old index (bit 0: elements
 * are 8-aligned) as it copies it, so a late insert cannot land in a copied
 * table: every probe ends at an empty slot, and an inserter that meets a
 * frozen one waits for the grow lock and retries in the new index; a
 * reader that meets one looks again in the newest index. */
#define HINDEX_TAG_BITS 0xffff000000000000ull
#define HINDEX_FROZEN 1ull
typedef struct hindex_entry {
  _Atomic uint64_t slot;
  _Atomic uint64_t hash; /* 0 until the inserter wrote it */
} hindex_entry_t;
typedef struct hindex {
  uint64_t mask;
  unsigned shift; /* 64 - log2(mask + 1): hash >> shift is the home */
  hindex_entry_t e[];
} hindex_t;
static inline uint64_t hindex_home(const hindex_t *h, uint64_t hash) {
  return hash >> h->shift;
}
static inline uint64_t hindex_tag(uint64_t hash) { return hash << 48; }
static inline void *hindex_ptr(uint64_t v) {
  return (void *)(uintptr_t)(v & ~(HINDEX_TAG_BITS | HINDEX_FROZEN));
}
static inline bool hindex_tag_matches(uint64_t v, uint64_t hash) {
  return ((v ^ hindex_tag(hash)) & HINDEX_TAG_BITS) == 0;
}
XPTIFW_HIDDEN hindex_t *hindex_new(uint64_t slots);
/* Growth reads an element's hash when the inserter had not yet written it. */
typedef uint64_t (*hindex_hash_fn)(const void *element);
/* Under *lock: publish a twice-as-large copy in *where when h (still the
 * current index) holds more than count * 2 slots' worth; the size after
 * that gets made ahead. */
XPTIFW_HIDDEN void hindex_grow_slow(_Atomic(hindex_t *) *where, hindex_t *h,
                                    pthread_mutex_t *lock, hindex_hash_fn element_hash);
static inline void hindex_grow_if_needed(_Atomic(hindex_t *) *where, hindex_t *h, uint64_t count,
                                         pthread_mutex_t *lock, hindex_hash_fn element_hash) {
  if (UNLIKELY(count * 2 > h->mask + 1)) /* half full: grow */
    hindex_grow_slow(where, h, lock, element_hash);
}
/* The current index, made (slots large) when there is none yet. */
XPTIFW_HIDDEN hindex_t *hindex_current(_Atomic(hindex_t *) *where, uint64_t slots,
                                       pthread_mutex_t *lock);

/* Insert element (hash) unless an equal one is there (eq(found, key));
 * returns the element now in the index: element or the equal one found. */
static inline void *hindex_insert(_Atomic(hindex_t *) *where, pthread_mutex_t *lock,
                                  void *element, uint64_t hash,
                                  bool (*eq)(const void *found, const void *key),
                                  const void *key, uint64_t initial_slots) {
  uint64_t packed = (uint64_t)(uintptr_t)element | hindex_tag(hash);
  for (;;) {
    hindex_t *h = hindex_current(where, initial_slots, lock);
    if (UNLIKELY(!h))
      return NULL;
    for (uint64_t i = hindex_home(h, hash);; i = (i + 1) & h->mask) {
      uint64_t v = atomic_load_explicit(&h->e[i].slot, memory_order_acquire);
      if (v == 0) {
        if (atomic_compare_exchange_strong_explicit(&h->e[i].slot, &v, packed,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire)) {
          atomic_store_explicit(&h->e[i].hash, hash, memory_order_relaxed);
          return element;
        }
        /* v is now what another thread stored there: look at it */
      }
      if (UNLIKELY(v & HINDEX_FROZEN))
        break;
      if (hindex_tag_matches(v, hash) && eq(hindex_ptr(v), key))
        return hindex_ptr(v);
    }
    /* growth under way: wait for it, then retry in the new index */
    pthread_mutex_lock(lock);
    pthread_mutex_unlock(lock);
  }
}

/* Starts the load of hash's home slot, so that its miss overlaps other
 * work: a caller about to look up several keys asks for all of them first. */
static inline void hindex_prefetch(_Atomic(hindex_t *) *where, uint64_t hash) {
  hindex_t *h = atomic_load_explicit(where, memory_order_acquire);
  if (h)
    __builtin_prefetch(&h->e[hindex_home(h, hash)], 0, 3);
}

/* Lock-free lookup: the equal element or NULL. */
static inline void *hindex_find(_Atomic(hindex_t *) *where, uint64_t hash,
                                bool (*eq)(const void *found, const void *key),
                                const void *key) {
  hindex_t *h = atomic_load_explicit(where, memory_order_acquire);
  while (h) {
    for (uint64_t i = hindex_home(h, hash);; i = (i + 1) & h->mask) {
      uint64_t v = atomic_load_explicit(&h->e[i].slot, memory_order_acquire);
      if (v == 0)
        return NULL;
      if (v == HINDEX_FROZEN) { /* copied: anything newer is in the new index */
        hindex_t *newer = atomic_load_explicit(where, memory_order_acquire);
        if (newer == h)
          return NULL; /* still copying: inserts wait for it */
        h = newer;
        break;
      }
      if (hindex_tag_matches(v, hash) && eq(hindex_ptr(v), key))
        return hindex_ptr(v);
    }
  }
  return NULL;
}

/* ---- interning tables: strings and objects --------------------------- */
typedef struct intern_entry {
  uint64_t hash;
  uint32_t len;
  uint32_t id;
  uint8_t tag;
  char data[]; /* len bytes, then a NUL */
} intern_entry_t;

typedef struct intern_table {
  _Atomic(hindex_t *) slots;
  idvec_t by_id;
  pthread_mutex_t lock; /* growth of slots */
  /* ids handed out: 0..count-1 (a lost race leaves a gap); on a line of
   * its own, away from what every lookup reads */
  _Alignas(64) _Atomic uint32_t count;
} intern_table_t;

/* Returns the id of (data,len,tag), inserting a copy when new;
 * UINT32_MAX when the table is full or memory runs out. */
XPTIFW_HIDDEN uint32_t intern(intern_table_t *t, const void *data, size_t len, uint8_t tag,
                              const intern_entry_t **entry);
/* The same, with hash = intern_hash(data, len, tag) already computed. */
XPTIFW_HIDDEN uint32_t intern_hashed(intern_table_t *t, const void *data, size_t len, uint8_t tag,
                                     uint64_t hash, const intern_entry_t **entry);
static inline uint64_t intern_hash(const void *data, size_t len, uint8_t tag) {
  return hash_bytes(data, len, tag);
}
static inline const intern_entry_t *intern_lookup(const intern_table_t *t, uint32_t id) {
  if (id >= atomic_load_explicit(&t->count, memory_order_acquire))
    return NULL;
  return (const intern_entry_t *)idvec_get(&t->by_id, id);
}
XPTIFW_HIDDEN void intern_init(intern_table_t *t);
XPTIFW_HIDDEN void intern_reset(intern_table_t *t);

#define STRING_TAG 0xff
XPTIFW_HIDDEN extern intern_table_t g_strings;
XPTIFW_HIDDEN extern intern_table_t g_objects;
/* Intern a NUL-terminated string; returns its id and the table's copy. */
XPTIFW_HIDDEN uint32_t string_intern(const char *s, const char **copy);

/* ---- trace points ------------------------------------------------------ */
typedef struct metadata_block {
  uint32_t cap;
  _Atomic uint32_t count;
  struct {
    uint32_t key;
    int32_t value;
  } item[];
} metadata_block_t;

/* The event comes first so that an event pointer is its trace point.
 * 256 bytes, allocated on cache lines: one trace point per 4 lines, so
 * visits from different threads never share a line. */
typedef struct tracepoint {
  xpti_trace_event_data_t event;
  xpti_payload_t payload; /* strings point into the string table */
  uint64_t hash;   /* of the content: see probe_make */
  uint32_t name_len, file_len;
  _Atomic uint64_t instances;
  _Atomic(metadata_block_t *) metadata;
  /* Intel's C++ views (compat.cpp), made on first use under md_lock. */
  _Atomic(void *) cxx_map;     /* xpti::metadata_t */
  _Atomic(void *) cxx_objects; /* the interface objects */
} tracepoint_t;

_Static_assert(sizeof(tracepoint_t) <= 256, "a trace point fits 4 cache lines");

XPTIFW_HIDDEN tracepoint_t *tracepoint_from_event(const xpti_trace_event_data_t *event);
XPTIFW_HIDDEN void registry_reset(void);
XPTIFW_HIDDEN void registry_init(void);

/* ---- Intel's C++-typed part (compat.cpp), called under md_lock ------ */
#include "compat.h"
/* The map of an event's trace point, made on first use from the C
 * metadata (tracepoint_cxx_objects likewise, in compat.h); NULL for an
 * unknown event or no memory. */
XPTIFW_HIDDEN void *tracepoint_cxx_map(const xpti_trace_event_data_t *event);

/* Back to Intel's defaults (xptiReset). */
XPTIFW_HIDDEN void interop_reset(void);

/* ---- fork: every lock taken in one fixed order, outermost first ------ */
/* dispatch g.lock -> registry (growth, metadata) -> objects -> strings
 * -> pool -> retired list -> reserve: the order in which the code nests
 * them. */
XPTIFW_HIDDEN void registry_fork_lock(void);
XPTIFW_HIDDEN void registry_fork_unlock(void);
XPTIFW_HIDDEN void tables_fork_lock(void);
XPTIFW_HIDDEN void tables_fork_unlock(bool child);

/* ---- configuration (config.c) ---------------------------------------- */
/* XPTI_TRACE_ENABLE: 1 on (unset, "1", "true"), 0 off ("0", "false"),
 * -1 anything else. */
XPTIFW_HIDDEN int config_trace_enable(const char *value);
/* Calls fn on each non-blank comma-separated item of list (modified in
 * place, items trimmed of spaces and tabs); returns how many. */
XPTIFW_HIDDEN size_t config_each_item(char *list, void (*fn)(char *item, void *ctx), void *ctx);

/* ---- dispatch --------------------------------------------------------- */
/* False only on the thread that is loading the subscribers (a call from
 * a constructor run by that load): the caller then answers its default. */
XPTIFW_HIDDEN bool framework_ensure_init(void);
XPTIFW_HIDDEN void report_once(_Atomic bool *said, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
