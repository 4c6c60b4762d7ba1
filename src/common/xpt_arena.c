/* Signal-safe bump allocation (xpt_arena.h): mmap and munmap are system
 * calls, safe in a handler; nothing here takes a lock. */
#include "xpt_arena.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

struct xpt_arena_chunk {
  struct xpt_arena_chunk *next;
  size_t size; /* mapped bytes, this header included */
};

enum { ARENA_CHUNK = 64 * 1024, ARENA_ALIGN = 16 };

#define ARENA_HEADER                                                                       \
  ((sizeof(struct xpt_arena_chunk) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

void *xpt_pages_alloc(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void *xpt_arena_alloc(xpt_arena_t *a, size_t size) {
  size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  if (size == 0 || (size_t)(a->end - a->cur) < size) {
    size_t want = ARENA_HEADER + size;
    size_t mapped = want <= ARENA_CHUNK ? ARENA_CHUNK : (want + 4095) & ~(size_t)4095;
    struct xpt_arena_chunk *c = xpt_pages_alloc(mapped);
    if (!c)
      return NULL;
    c->size = mapped;
    c->next = a->chunks;
    a->chunks = c;
    a->cur = (char *)c + ARENA_HEADER;
    a->end = (char *)c + mapped;
  }
  void *p = a->cur;
  a->cur += size;
  return p;
}

void xpt_arena_reset(xpt_arena_t *a) {
  /* What the next owner may find dirty in the kept chunk: up to cur if
   * it is the newest, else all of it. */
  struct xpt_arena_chunk *keep = NULL;
  for (struct xpt_arena_chunk *c = a->chunks, *next; c; c = next) {
    next = c->next;
    if (!keep && c->size == ARENA_CHUNK)
      keep = c;
    else
      munmap(c, c->size);
  }
  size_t used = keep && keep == a->chunks ? (size_t)(a->cur - (char *)keep)
                                          : (size_t)ARENA_CHUNK;
  a->chunks = keep;
  a->cur = a->end = NULL;
  if (keep) {
    memset((char *)keep + ARENA_HEADER, 0, used - ARENA_HEADER);
    keep->next = NULL;
    a->cur = (char *)keep + ARENA_HEADER;
    a->end = (char *)keep + ARENA_CHUNK;
  }
}
