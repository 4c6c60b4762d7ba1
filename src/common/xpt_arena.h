/* A bump allocator over mmap for memory a signal handler may need: no
 * malloc (the handler may have interrupted it), no lock.  One owner at a
 * time (a thread's state); memory is given back all at once. */
#ifndef XPT_ARENA_H
#define XPT_ARENA_H

#include <stddef.h>

typedef struct xpt_arena {
  struct xpt_arena_chunk *chunks; /* newest first */
  char *cur, *end;
} xpt_arena_t;

/* size zeroed bytes, 16-aligned; NULL when the kernel refuses memory. */
void *xpt_arena_alloc(xpt_arena_t *a, size_t size);
/* Forgets every allocation; keeps one ordinary chunk for the next owner. */
void xpt_arena_reset(xpt_arena_t *a);
/* Whole pages from the kernel, zeroed (the arena's chunks, or a struct
 * that outlives its arena); NULL on failure. */
void *xpt_pages_alloc(size_t size);

#endif /* XPT_ARENA_H */
