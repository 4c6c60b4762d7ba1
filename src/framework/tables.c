/* Storage shared by the string, object and trace point tables. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

typedef struct retired {
  struct retired *next;
  void *block;
} retired_t;

static retired_t *g_retired;
static pthread_mutex_t g_retired_lock = PTHREAD_MUTEX_INITIALIZER;

void retire(void *block) {
  retired_t *r = malloc(sizeof *r);
  if (!r)
    return; /* leaked outright: still never freed under a reader */
  r->block = block;
  pthread_mutex_lock(&g_retired_lock);
  r->next = g_retired;
  g_retired = r;
  pthread_mutex_unlock(&g_retired_lock);
}

void tables_fork_lock(void) {
  pthread_mutex_lock(&g_objects.lock);
  pthread_mutex_lock(&g_strings.lock);
  pool_fork_lock();
  pthread_mutex_lock(&g_retired_lock);
  reserve_fork_lock();
}

void tables_fork_unlock(bool child) {
  reserve_fork_unlock(child);
  pthread_mutex_unlock(&g_retired_lock);
  pool_fork_unlock();
  pthread_mutex_unlock(&g_strings.lock);
  pthread_mutex_unlock(&g_objects.lock);
}

void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (!p) {
    static _Atomic bool said;
    report_once(&said, "xpti: out of memory");
  }
  return p;
}

/* Faults in the pages of [p, p + bytes) with one call rather than one
 * fault each as first written.  Rounded outward: it writes nothing, so a
 * page shared with the allocator's other memory is safe.  An older kernel
 * refuses: the pages then fault as used. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
static void populate(void *p, size_t bytes) {
  uintptr_t first = (uintptr_t)p & ~(uintptr_t)4095;
  uintptr_t end = ((uintptr_t)p + bytes + 4095) & ~(uintptr_t)4095;
  if (bytes)
    madvise((void *)first, end - first, MADV_POPULATE_WRITE);
}

/* Fresh memory is what creation pays for in a VM.  On this machine kind (a
 * guest whose page tables the host shadows) 16 MiB cost 65-82 ms written
 * page by page, 41-50 ms populated on 4 KiB pages (each page still traps
 * at its first write) and 1.7-2.2 ms populated on transparent huge pages.
 * So blocks of 1 MiB and more are 2 MiB-aligned huge pages, asked for
 * before the first touch and populated in one call.  Heap memory, so leak
 * checkers see the pointers it holds: a program run under LeakSanitizer
 * with this library uninstrumented (the fuzz build) reported the records
 * held only by mapped blocks as leaks. */
#define HUGE_PAGE ((size_t)2 << 20)
void *huge_alloc(size_t bytes) {
  size_t rounded = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  void *p = NULL;
  if (bytes < HUGE_PAGE / 2 || posix_memalign(&p, HUGE_PAGE, rounded) != 0)
    return malloc(bytes);
  madvise(p, rounded, MADV_HUGEPAGE); /* a hint: fine if refused */
  return p;
}

void huge_fill(void *p, size_t bytes) {
  populate(p, bytes);   /* then cleared without a fault */
  memset(p, 0, bytes); /* not always fresh memory: the allocator's to choose */
}

void huge_free(void *p, size_t bytes) {
  (void)bytes;
  free(p);
}

void *zeroed_block(size_t bytes) {
  void *p = huge_alloc(bytes);
  if (!p) {
    static _Atomic bool said;
    report_once(&said, "xpti: out of memory");
    return NULL;
  }
  huge_fill(p, bytes);
  return p;
}

/* The pool: the tables' blocks below RESERVE_MIN (arena chunks, indexes and
 * id segments) carved from shared 2 MiB huge-page blocks.  The first is
 * made by the first caller (0.2-0.4 ms here, against ~2 ms for 256 KiB
 * faulted page by page); the reserve's thread keeps the next two ready
 * (asked when a block is a quarter used: its thread may take a millisecond
 * to be scheduled, and 10,000 trace points fill a block in ~0.6 ms), so a
 * program that makes a few hundred trace points never starts it.  When
 * none is ready the caller makes its own, outside the lock (a huge page
 * takes 4-8 ms in some runs here), and a block made while another thread's
 * came first is the next one.  Blocks live for the process. */
#define POOL_BLOCK HUGE_PAGE
static struct {
  pthread_mutex_t lock;
  char *cur, *mark, *end; /* mark: where the next block is asked for */
  char *spare;            /* a block made while another thread's came first */
} g_pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *pool_alloc(size_t bytes) {
  bytes = (bytes + 63) & ~(size_t)63;
  pthread_mutex_lock(&g_pool.lock);
  while ((size_t)(g_pool.end - g_pool.cur) < bytes) { /* the rest of the block is left */
    char *block = g_pool.spare;
    g_pool.spare = NULL;
    if (!block && g_pool.end && (block = reserve_take(POOL_BLOCK, 2)) != NULL)
      retire(block);
    if (!block) { /* made outside the lock: other threads go on meanwhile */
      pthread_mutex_unlock(&g_pool.lock);
      block = zeroed_block(POOL_BLOCK);
      pthread_mutex_lock(&g_pool.lock);
      if (!block) {
        pthread_mutex_unlock(&g_pool.lock);
        return NULL;
      }
      retire(block);
      if ((size_t)(g_pool.end - g_pool.cur) >= bytes && !g_pool.spare) {
        g_pool.spare = block; /* another thread's block came first: ours is next */
        break;
      }
    }
    g_pool.cur = block;
    g_pool.end = block + POOL_BLOCK;
    g_pool.mark = block + POOL_BLOCK / 4;
  }
  char *p = g_pool.cur;
  g_pool.cur += bytes;
  if (g_pool.cur >= g_pool.mark && p < g_pool.mark)
    reserve_want(POOL_BLOCK, 2);
  pthread_mutex_unlock(&g_pool.lock);
  return p;
}

void pool_fork_lock(void) { pthread_mutex_lock(&g_pool.lock); }
void pool_fork_unlock(void) { pthread_mutex_unlock(&g_pool.lock); }

/* A zeroed block kept for the process: from the pool when small, else from
 * the reserve when one is ready (asked ahead by the caller), else made here. */
static void *kept_block(size_t bytes) {
  if (bytes < RESERVE_MIN)
    return pool_alloc(bytes);
  void *p = reserve_take(bytes, 0);
  if (!p && (p = zeroed_block(bytes)) == NULL)
    return NULL;
  retire(p);
  return p;
}

#define ARENA_FIRST_CHUNK ((size_t)16 << 10)
#define ARENA_CHUNK ((size_t)64 << 10)

/* A thread's records and strings go in chunks of the pool: 16 KiB first,
 * so a thread that makes a few trace points costs little, 64 KiB after. */
void *arena_alloc_slow(arena_t *a, size_t size, size_t align) {
  size_t chunk = a->cur ? ARENA_CHUNK : ARENA_FIRST_CHUNK;
  if (size + align > ARENA_CHUNK / 4) /* oversized: keep the current chunk */
    return shared_alloc(size, align);
  char *block = pool_alloc(chunk);
  if (!block)
    return NULL;
  a->cur = block;
  a->end = block + chunk;
  uintptr_t p = ((uintptr_t)a->cur + align - 1) & ~(uintptr_t)(align - 1);
  a->cur = (char *)(p + size);
  return (void *)p;
}

bool idvec_set_slow(idvec_t *v, uint64_t id, void *p) {
  uint64_t i = id + (1u << IDVEC_BASE_LOG);
  unsigned k = 63u - (unsigned)__builtin_clzll(i) - IDVEC_BASE_LOG;
  if (k >= IDVEC_SEGMENTS)
    return false;
  uint64_t index = i - ((uint64_t)1 << (k + IDVEC_BASE_LOG));
  size_t next_bytes = ((size_t)2 << (k + IDVEC_BASE_LOG)) * sizeof(void *);
  if (index == (uint64_t)1 << (k + IDVEC_BASE_LOG - 1) && next_bytes >= RESERVE_MIN)
    reserve_want(next_bytes, 1); /* half way: the next segment gets made ahead */
  _Atomic(void *) *seg = atomic_load_explicit(&v->seg[k], memory_order_acquire);
  if (!seg) {
    _Atomic(void *) *fresh = kept_block(((size_t)1 << (k + IDVEC_BASE_LOG)) * sizeof *seg);
    if (!fresh)
      return false;
    /* a segment that loses the race to another thread's stays unused */
    if (atomic_compare_exchange_strong_explicit(&v->seg[k], &seg, fresh, memory_order_acq_rel,
                                                memory_order_acquire))
      seg = fresh;
  }
  atomic_store_explicit(&seg[index], p, memory_order_release);
  return true;
}

void *shared_alloc(size_t size, size_t align) {
  char *block = xcalloc(1, size + align);
  if (!block)
    return NULL;
  retire(block);
  return (void *)(((uintptr_t)block + align - 1) & ~(uintptr_t)(align - 1));
}

static inline uint64_t read64(const unsigned char *p) {
  uint64_t w;
  memcpy(&w, p, sizeof w);
  return w;
}
static inline uint64_t read32(const unsigned char *p) {
  uint32_t w;
  memcpy(&w, p, sizeof w);
  return w;
}

/* 16 bytes per step in two independent lanes, the last 1..16 bytes read
 * with overlapping loads: strings here are paths and symbol names, where a
 * byte-at-a-time hash would cost more than the whole lookup.  Not
 * collision-resistant: callers compare contents. */
uint64_t hash_bytes(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  size_t n = len;
  uint64_t a = seed ^ (len * 0x9e3779b97f4a7c15ull), b = 0x2545f4914f6cdd1dull;
  while (n > 16) {
    a = (a ^ read64(p)) * 0xff51afd7ed558ccdull;
    b = (b ^ read64(p + 8)) * 0xc4ceb9fe1a85ec53ull;
    a ^= a >> 32;
    b ^= b >> 29;
    p += 16;
    n -= 16;
  }
  uint64_t w0 = 0, w1 = 0;
  if (n >= 8) {
    w0 = read64(p);
    w1 = read64(p + n - 8);
  } else if (n >= 4) {
    w0 = read32(p);
    w1 = read32(p + n - 4);
  } else if (n > 0) {
    w0 = (uint64_t)p[0] | (uint64_t)p[n / 2] << 8 | (uint64_t)p[n - 1] << 16;
  }
  a = (a ^ w0) * 0xff51afd7ed558ccdull;
  b = (b ^ w1) * 0xc4ceb9fe1a85ec53ull;
  return hash_mix(a ^ (b >> 7) ^ (b << 57));
}

static size_t hindex_bytes(uint64_t slots) {
  return sizeof(hindex_t) + slots * sizeof(hindex_entry_t);
}

hindex_t *hindex_new(uint64_t slots) {
  hindex_t *h = kept_block(hindex_bytes(slots));
  if (h) {
    h->mask = slots - 1;
    h->shift = 64u - (unsigned)__builtin_ctzll(slots);
  }
  return h;
}

hindex_t *hindex_current(_Atomic(hindex_t *) *where, uint64_t slots, pthread_mutex_t *lock) {
  hindex_t *h = atomic_load_explicit(where, memory_order_acquire);
  if (LIKELY(h != NULL))
    return h;
  pthread_mutex_lock(lock);
  h = atomic_load_explicit(where, memory_order_relaxed);
  if (!h && (h = hindex_new(slots)) != NULL)
    atomic_store_explicit(where, h, memory_order_release);
  pthread_mutex_unlock(lock);
  return h;
}

void hindex_grow_slow(_Atomic(hindex_t *) *where, hindex_t *h, pthread_mutex_t *lock,
                      hindex_hash_fn element_hash) {
  pthread_mutex_lock(lock);
  if (atomic_load_explicit(where, memory_order_relaxed) != h) { /* grown meanwhile */
    pthread_mutex_unlock(lock);
    return;
  }
  hindex_t *bigger = hindex_new((h->mask + 1) * 2);
  if (!bigger) { /* stays at this size: still works while it has room */
    pthread_mutex_unlock(lock);
    return;
  }
  for (uint64_t i = 0; i <= h->mask; i++) {
    /* A filled slot never changes (inserts only CAS an empty one), so only
     * empty slots are frozen, and every probe ends at one: no insert lands
     * in this index any more.  Half the locked operations of freezing all. */
    uint64_t v = atomic_load_explicit(&h->e[i].slot, memory_order_acquire);
    if (!v && atomic_compare_exchange_strong_explicit(&h->e[i].slot, &v, HINDEX_FROZEN,
                                                      memory_order_acq_rel, memory_order_acquire))
      continue;
    /* v: the element there, or the one an inserter put there first */
    uint64_t hash = atomic_load_explicit(&h->e[i].hash, memory_order_relaxed);
    if (!hash) /* its inserter has not written it yet (or it is 0) */
      hash = element_hash(hindex_ptr(v));
    uint64_t j = hindex_home(bigger, hash);
    while (atomic_load_explicit(&bigger->e[j].slot, memory_order_relaxed))
      j = (j + 1) & bigger->mask;
    atomic_store_explicit(&bigger->e[j].hash, hash, memory_order_relaxed);
    atomic_store_explicit(&bigger->e[j].slot, v, memory_order_relaxed);
  }
  atomic_store_explicit(where, bigger, memory_order_release);
  pthread_mutex_unlock(lock); /* h stays: readers may still be probing it */
  /* The next size, made ahead: the new index starts a quarter full. */
  size_t next = hindex_bytes(4 * (h->mask + 1));
  if (next >= RESERVE_MIN)
    reserve_want(next, 1);
}

#define INTERN_INITIAL_SLOTS 1024

void intern_init(intern_table_t *t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->lock, NULL);
}

/* Callers guarantee no concurrent use (xptiReset is for tests). */
void intern_reset(intern_table_t *t) {
  pthread_mutex_lock(&t->lock);
  atomic_store(&t->slots, NULL); /* kept: blocks live for the process */
  for (int k = 0; k < IDVEC_SEGMENTS; k++)
    atomic_store(&t->by_id.seg[k], NULL); /* segments are on the retired list */
  atomic_store(&t->count, 0);
  pthread_mutex_unlock(&t->lock);
}

typedef struct intern_key {
  uint64_t hash;
  const void *data;
  size_t len;
  uint8_t tag;
} intern_key_t;

static bool entry_equals(const void *found, const void *key) {
  const intern_entry_t *e = found;
  const intern_key_t *k = key;
  return e->hash == k->hash && e->len == k->len && e->tag == k->tag &&
         memcmp(e->data, k->data, k->len) == 0;
}

static uint64_t entry_hash(const void *element) { return ((const intern_entry_t *)element)->hash; }

/* Lock-free: the entry is built in the calling thread's arena, given an id,
 * made findable by id, then offered to the index; a thread that loses the
 * race to an equal entry takes the winner's and unpublishes its own id. */
uint32_t intern(intern_table_t *t, const void *data, size_t len, uint8_t tag,
                const intern_entry_t **entry) {
  return intern_hashed(t, data, len, tag, intern_hash(data, len, tag), entry);
}

uint32_t intern_hashed(intern_table_t *t, const void *data, size_t len, uint8_t tag, uint64_t hash,
                       const intern_entry_t **entry) {
  intern_key_t key = {hash, data, len, tag};
  const intern_entry_t *e = hindex_find(&t->slots, key.hash, entry_equals, &key);
  if (LIKELY(e != NULL))
    goto found;
  if (len >= UINT32_MAX)
    return UINT32_MAX;
  size_t size = (sizeof(intern_entry_t) + len + 1 + 7) & ~(size_t)7;
  thread_alloc_t *ta = thread_alloc();
  arena_t *a = ta ? &ta->arena : NULL;
  intern_entry_t *fresh = a ? arena_alloc(a, size, 8) : shared_alloc(size, 8);
  if (!fresh)
    return UINT32_MAX;
  uint64_t id;
  id_block_t *b = ta ? (t == &g_strings ? &ta->strings : &ta->objects) : NULL;
  if (LIKELY(b != NULL)) {
    if (UNLIKELY(b->next == b->end)) {
      b->next = atomic_fetch_add_explicit(&t->count, ID_BLOCK, memory_order_relaxed);
      b->end = b->next + ID_BLOCK;
    }
    id = b->next++;
  } else {
    id = atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed);
  }
  if (id >= UINT32_MAX - 2 * ID_BLOCK) { /* the table is full */
    atomic_store_explicit(&t->count, UINT32_MAX - 2 * ID_BLOCK, memory_order_relaxed);
    if (b)
      b->next = b->end;
    arena_unalloc(a, fresh, size);
    return UINT32_MAX;
  }
  fresh->hash = key.hash;
  fresh->len = (uint32_t)len;
  fresh->tag = tag;
  fresh->id = (uint32_t)id;
  memcpy(fresh->data, data, len);
  fresh->data[len] = '\0';
  /* findable by id before anyone can learn the id from the index */
  if (!idvec_set(&t->by_id, id, fresh)) {
    arena_unalloc(a, fresh, size);
    return UINT32_MAX;
  }
  e = hindex_insert(&t->slots, &t->lock, fresh, key.hash, entry_equals, &key, INTERN_INITIAL_SLOTS);
  if (e != fresh) { /* an equal entry won, or no memory for the index */
    idvec_set(&t->by_id, id, NULL);
    arena_unalloc(a, fresh, size);
    if (!e)
      return UINT32_MAX;
    goto found;
  }
  hindex_t *h = atomic_load_explicit(&t->slots, memory_order_acquire);
  if (h)
    hindex_grow_if_needed(&t->slots, h, (uint64_t)id + 1, &t->lock, entry_hash);
  if (entry)
    *entry = fresh;
  return (uint32_t)id;

found:
  if (entry)
    *entry = e;
  return e->id;
}
