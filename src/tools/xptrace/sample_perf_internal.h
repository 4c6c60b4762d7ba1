/* Inside `xptrace sample --method perf`: what the recording side
 * (sample_perf.c) hands to the report side (sample_perf_report.c). */
#ifndef XPTRACE_SAMPLE_PERF_INTERNAL_H
#define XPTRACE_SAMPLE_PERF_INTERNAL_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "sample_perf.h"

/* ---- a small hash table (open addressing, caller-owned entries) ------- */

typedef struct htab {
  void **slot;
  uint64_t *hash;
  size_t cap, len;
} htab_t;

static inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

static inline uint64_t hash_mem(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return mix(h);
}

/* Slot of the entry matching `key`, or of the empty slot where it goes. */
static inline size_t ht_find(const htab_t *t, uint64_t h, const void *key,
                      int (*eq)(const void *entry, const void *key)) {
  size_t i = h & (t->cap - 1);
  while (t->slot[i] && !(t->hash[i] == h && eq(t->slot[i], key)))
    i = (i + 1) & (t->cap - 1);
  return i;
}

static inline int ht_reserve(htab_t *t) {
  if (t->cap && (t->len + 1) * 4 < t->cap * 3)
    return 0;
  size_t cap = t->cap ? t->cap * 2 : 256;
  void **slot = calloc(cap, sizeof *slot);
  uint64_t *hash = calloc(cap, sizeof *hash);
  if (!slot || !hash) {
    free(slot);
    free(hash);
    return -1;
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
  return 0;
}

static inline void ht_free(htab_t *t) {
  for (size_t i = 0; i < t->cap; ++i)
    free(t->slot[i]);
  free(t->slot);
  free(t->hash);
  memset(t, 0, sizeof *t);
}

/* ---- what the kernel told us ------------------------------------------ */

typedef struct mapping {
  uint64_t start, end, pgoff;
  uint32_t module; /* index into modules */
} mapping_t;

typedef struct proc {
  int pid;
  char comm[32];
  mapping_t *maps;
  size_t nmaps, capmaps;
  unsigned nthreads; /* threads seen, for thread indexes */
} proc_t;

typedef struct thread {
  int tid, pid;
  unsigned index; /* 0: the main thread */
  char comm[32];
  uint64_t samples;
} thread_t;

typedef struct module {
  char *path;
  Dwfl *dwfl;
  Dwfl_Module *mod;
  bool opened;
} module_t;

/* One distinct stack of one thread: frames innermost first, each as
 * (module + 1, file offset); module 0 is an address nothing maps. */
typedef struct stack {
  int tid;
  uint32_t n;
  uint64_t count;
  uint64_t frame[][2];
} stack_t_;

typedef struct state {
  proc_t *procs;
  size_t nprocs;
  thread_t *threads;
  size_t nthreads;
  module_t *modules;
  size_t nmodules;
  htab_t stacks;
  uint64_t samples, lost, throttled;
  unsigned depth;
  bool truncated;
} state_t;


/* Symbolize every stack, write samples.folded and samples.csv into o->dir,
 * print the summary and top table; `hz` is the rate asked of the kernel,
 * `cpu` the CPU-seconds of the command (for the delivered rate). */
void sample_perf_report(state_t *s, const sample_perf_opts_t *o, const char *command, pid_t root,
                        double hz, double cpu);
void sample_perf_state_free(state_t *s);

#endif /* XPTRACE_SAMPLE_PERF_INTERNAL_H */
