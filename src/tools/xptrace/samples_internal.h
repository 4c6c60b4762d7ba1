/* Inside the sample session (samples.h): the model (samples.c) and the
 * Perfetto writer (samples_trace.c). */
#ifndef XPTRACE_SAMPLES_INTERNAL_H
#define XPTRACE_SAMPLES_INTERNAL_H

#include "samples.h"
#include "xsym.h"

typedef struct xs_proc {
  pid_t pid, ppid;
  char name[64];
  unsigned nthreads; /* for thread numbers */
} xs_proc_t;

typedef struct xs_thread {
  pid_t pid, tid;
  unsigned index; /* 0: the process's first thread */
  char name[32];
  uint64_t samples[XS_NCLOCKS]; /* weights */
  uint64_t cpu_ns;              /* UINT64_MAX: unknown */
  double sys_share;             /* of its CPU time in the kernel; < 0 unknown */
  uint64_t t_first, t_last;     /* of its samples */
} xs_thread_t;

/* A frame as fed: a code address resolved to (module, lookup offset),
 * or a name a method gave. */
typedef struct xs_frm {
  xsym_module_t *module; /* NULL: see name */
  uint64_t off;          /* file offset looked up (already one byte back for returns) */
  uint64_t map_start, map_pgoff, map_end; /* for the trace's mappings */
  const char *name;      /* named frames; NULL for addresses */
  const char *modname;
  uint32_t sym, nsym; /* after symbolizing: the expanded frames (inlined first) */
} xs_frm_t;

typedef struct xs_stack {
  uint32_t n;
  bool truncated;
  uint32_t frame[]; /* frame ids, innermost first */
} xs_stack_t;

typedef struct xs_rec {
  uint64_t t, weight;
  pid_t pid, tid;
  uint32_t stack;
  uint32_t thread;
  uint8_t clock;
} xs_rec_t;

/* An open-addressing set of indices; the owner hashes and compares. */
typedef struct xs_index {
  uint32_t *slot; /* index + 1, 0 empty */
  uint64_t *hash;
  size_t cap, len;
} xs_index_t;

/* Expanded frame (after symbolizing). */
typedef struct xs_sym {
  const char *function, *module, *file;
  unsigned line;
  bool inlined;
} xs_sym_t;

struct xs_session {
  xs_options_t o;
  pid_t root;
  xsym_t *xsym;
  xsym_maps_t *maps;
  xs_proc_t *procs;
  size_t nprocs, capprocs;
  xs_thread_t *threads;
  size_t nthreads, capthreads;
  xs_index_t thread_index; /* by (pid, tid): the latest thread */
  xs_frm_t *frames;
  size_t nframes, capframes;
  xs_index_t frame_index;
  xs_stack_t **stacks;
  size_t nstacks, capstacks;
  xs_index_t stack_index;
  xs_rec_t *recs;
  size_t nrecs, caprecs;
  xs_sym_t *syms;
  size_t nsyms, capsyms;
  char **strings; /* names fed by methods, owned */
  size_t nstrings, capstrings;
  uint64_t truncated, dropped;
  uint32_t *scratch;
  size_t scratch_cap;
};

/* Grows *v (element size sz) to hold n+1; false when out of memory. */
bool xs_grow(void *v, size_t *cap, size_t n, size_t sz);
uint64_t xs_hash_mem(const void *p, size_t n, uint64_t h);
/* The index (samples.c): whether entry `index` equals `key`. */
typedef bool (*xs_eq_fn)(const xs_session_t *s, uint32_t index, const void *key);
bool xs_index_reserve(xs_index_t *t);
/* The slot of `key` (hash h): *found, or the empty slot to set. */
size_t xs_index_find(const xs_session_t *s, const xs_index_t *t, uint64_t h, const void *key, xs_eq_fn eq,
                     bool *found);
void xs_index_set(xs_index_t *t, size_t slot, uint64_t h, uint32_t index);
void xs_index_free(xs_index_t *t);
/* Room for n frame ids, reused from sample to sample; NULL: out of memory. */
uint32_t *xs_scratch(xs_session_t *s, size_t n);
const xs_thread_t *xs_thread_of(const xs_session_t *s, uint32_t index);
const xs_proc_t *xs_proc_of(const xs_session_t *s, pid_t pid);

/* samples_trace.c: writes <dir>/samples.perfetto-trace; false with errno. */
bool xs_write_trace(xs_session_t *s, char *path, size_t len);

#endif /* XPTRACE_SAMPLES_INTERNAL_H */
