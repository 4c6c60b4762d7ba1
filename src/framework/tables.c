/* Storage shared by the string, object and trace point tables. */
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
  pthread_mutex_lock(&g_retired_lock);
}

void tables_fork_unlock(void) {
  pthread_mutex_unlock(&g_retired_lock);
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

/* Big zeroed blocks are 2 MiB aligned with transparent huge pages
 * requested before the first touch: a probe into a large index then costs
 * a cache miss without a page walk, and filling an arena faults once per
 * 2 MiB instead of once per 4 KiB (a fault costs microseconds in a VM).
 * Heap memory, so leak checkers still see the pointers it holds. */
#define HUGE_PAGE ((size_t)2 << 20)
void *zeroed_block(size_t bytes) {
  if (bytes < HUGE_PAGE)
    return xcalloc(1, bytes);
  void *p = NULL;
  if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
    return xcalloc(1, bytes);
  madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* a hint: fine if refused */
  memset(p, 0, bytes);
  return p;
}

#define ARENA_CHUNK (64 * 1024)

/* Chunks double from 64 KiB up to 2 MiB (huge pages from there), so a
 * table that stays small costs little and a big one faults rarely. */
void *arena_alloc(arena_t *a, size_t size, size_t align) {
  uintptr_t p = ((uintptr_t)a->cur + align - 1) & ~(uintptr_t)(align - 1);
  if (!a->cur || p + size > (uintptr_t)a->end) {
    size_t chunk = a->next_chunk ? a->next_chunk : ARENA_CHUNK;
    if (size + align > chunk / 4) { /* oversized: keep the current chunk */
      char *block = xcalloc(1, size + align);
      if (!block)
        return NULL;
      retire(block);
      return (void *)(((uintptr_t)block + align - 1) & ~(uintptr_t)(align - 1));
    }
    char *block = zeroed_block(chunk);
    if (!block)
      return NULL;
    retire(block); /* arenas live for the process; keep them reachable */
    a->cur = block;
    a->end = block + chunk;
    a->next_chunk = chunk < HUGE_PAGE ? chunk * 2 : chunk;
    p = ((uintptr_t)a->cur + align - 1) & ~(uintptr_t)(align - 1);
  }
  a->cur = (char *)(p + size);
  return (void *)p;
}

bool idvec_set(idvec_t *v, uint64_t id, void *p) {
  uint64_t i = id + (1u << IDVEC_BASE_LOG);
  unsigned k = 63u - (unsigned)__builtin_clzll(i) - IDVEC_BASE_LOG;
  if (k >= IDVEC_SEGMENTS)
    return false;
  _Atomic(void *) *seg = atomic_load_explicit(&v->seg[k], memory_order_acquire);
  if (!seg) {
    seg = xcalloc((size_t)1 << (k + IDVEC_BASE_LOG), sizeof *seg);
    if (!seg)
      return false;
    retire((void *)seg);
    atomic_store_explicit(&v->seg[k], seg, memory_order_release);
  }
  atomic_store_explicit(&seg[i - ((uint64_t)1 << (k + IDVEC_BASE_LOG))], p, memory_order_release);
  return true;
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

hindex_t *hindex_new(uint64_t slots) {
  hindex_t *h = zeroed_block(sizeof *h + slots * (sizeof h->slot[0] + sizeof h->hash[0]));
  if (h) {
    h->mask = slots - 1;
    h->hash = (uint64_t *)&h->slot[slots];
  }
  return h;
}

void hindex_grow_if_needed(_Atomic(hindex_t *) *where, hindex_t *h, uint64_t count) {
  if (count * 2 <= h->mask + 1)
    return;
  hindex_t *bigger = hindex_new((h->mask + 1) * 2);
  if (!bigger)
    return; /* stays at this size: lookups still work, only slower */
  for (uint64_t i = 0; i <= h->mask; i++) {
    uint64_t v = atomic_load_explicit(&h->slot[i], memory_order_relaxed);
    if (!v)
      continue;
    uint64_t j = h->hash[i] & bigger->mask;
    while (atomic_load_explicit(&bigger->slot[j], memory_order_relaxed))
      j = (j + 1) & bigger->mask;
    bigger->hash[j] = h->hash[i];
    atomic_store_explicit(&bigger->slot[j], v, memory_order_relaxed);
  }
  atomic_store_explicit(where, bigger, memory_order_release);
  retire(h); /* readers may still be probing it */
}

#define INTERN_INITIAL_SLOTS 1024

void intern_init(intern_table_t *t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->lock, NULL);
}

/* Callers guarantee no concurrent use (xptiReset is for tests). */
void intern_reset(intern_table_t *t) {
  pthread_mutex_lock(&t->lock);
  hindex_t *old = atomic_exchange(&t->slots, NULL);
  if (old)
    retire(old);
  for (int k = 0; k < IDVEC_SEGMENTS; k++)
    atomic_store(&t->by_id.seg[k], NULL); /* segments are on the retired list */
  t->arena = (arena_t){0};
  atomic_store(&t->count, 0);
  pthread_mutex_unlock(&t->lock);
}

static inline bool entry_equals(const intern_entry_t *e, uint64_t hash, const void *data,
                                size_t len, uint8_t tag) {
  return e->hash == hash && e->len == len && e->tag == tag && memcmp(e->data, data, len) == 0;
}

static const intern_entry_t *slots_find(const hindex_t *h, uint64_t hash, const void *data,
                                        size_t len, uint8_t tag, uint64_t *free_slot) {
  for (uint64_t i = hash & h->mask;; i = (i + 1) & h->mask) {
    uint64_t v = atomic_load_explicit(&h->slot[i], memory_order_acquire);
    if (!v) {
      *free_slot = i;
      return NULL;
    }
    const intern_entry_t *e = hindex_ptr(v);
    if (hindex_tag_matches(v, hash) && entry_equals(e, hash, data, len, tag))
      return e;
  }
}

uint32_t intern(intern_table_t *t, const void *data, size_t len, uint8_t tag,
                const intern_entry_t **entry) {
  uint64_t hash = hash_bytes(data, len, tag);
  uint64_t free_slot;
  uint32_t seen_count = atomic_load_explicit(&t->count, memory_order_acquire);
  hindex_t *seen = atomic_load_explicit(&t->slots, memory_order_acquire), *s;
  const intern_entry_t *e;
  if (LIKELY(seen != NULL) && (e = slots_find(seen, hash, data, len, tag, &free_slot)) != NULL)
    goto found;

  pthread_mutex_lock(&t->lock);
  s = atomic_load_explicit(&t->slots, memory_order_relaxed);
  if (!s) {
    s = hindex_new(INTERN_INITIAL_SLOTS);
    if (!s)
      goto fail;
    atomic_store_explicit(&t->slots, s, memory_order_release);
  }
  uint32_t id = atomic_load_explicit(&t->count, memory_order_relaxed);
  /* Nothing inserted since the lock-free probe: its free slot still holds.
   * Otherwise probe again, now that no one else can insert. */
  if (s != seen || id != seen_count) {
    e = slots_find(s, hash, data, len, tag, &free_slot);
    if (e) {
      pthread_mutex_unlock(&t->lock);
      goto found;
    }
  }
  if (id == UINT32_MAX - 1 || len > UINT32_MAX)
    goto fail;
  intern_entry_t *fresh = arena_alloc(&t->arena, sizeof *fresh + len + 1, 8);
  if (!fresh || !idvec_set(&t->by_id, id, fresh))
    goto fail;
  fresh->hash = hash;
  fresh->len = (uint32_t)len;
  fresh->tag = tag;
  fresh->id = id;
  memcpy(fresh->data, data, len);
  fresh->data[len] = '\0';
  /* id and contents are visible before the slot that leads to them */
  atomic_store_explicit(&t->count, id + 1, memory_order_release);
  hindex_store(s, free_slot, fresh, hash);
  hindex_grow_if_needed(&t->slots, s, (uint64_t)id + 1);
  pthread_mutex_unlock(&t->lock);
  if (entry)
    *entry = fresh;
  return id;

fail:
  pthread_mutex_unlock(&t->lock);
  return UINT32_MAX;

found:
  if (entry)
    *entry = e;
  return e->id;
}
