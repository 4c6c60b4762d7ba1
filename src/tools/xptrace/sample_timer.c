/* `xptrace sample --method timer`, the launcher's side: read the timer
 * sampler's recordings (src/sampler/sampler_rec.h) after the command
 * ended, feed the sample session, say what the timer method could not
 * see.  See docs/sampler.md, "The timer method". */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sample_timer.h"
#include "xptrace_cmds.h"
#include "sampler_rec.h"
#include "samples.h"

/* ---- static binaries ---------------------------------------------------- */

static int open_command(const char *cmd, char *path, size_t len) {
  if (strchr(cmd, '/')) {
    snprintf(path, len, "%s", cmd);
    return open(cmd, O_RDONLY | O_CLOEXEC);
  }
  const char *dirs = getenv("PATH");
  if (!dirs)
    dirs = "/bin:/usr/bin";
  while (*dirs) {
    const char *end = strchr(dirs, ':');
    size_t n = end ? (size_t)(end - dirs) : strlen(dirs);
    if (snprintf(path, len, "%.*s/%s", (int)n, n ? dirs : ".", cmd) < (int)len && access(path, X_OK) == 0) {
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0)
        return fd;
    }
    dirs += n + (end != NULL);
  }
  return -1;
}

bool sample_timer_static(const char *cmd, char *why, size_t len) {
  char path[PATH_MAX];
  int fd = open_command(cmd, path, sizeof path);
  if (fd < 0)
    return false;
  Elf64_Ehdr eh;
  bool result = false;
  if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN) &&
      eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 && eh.e_phnum < 256) {
    Elf64_Phdr ph[256];
    size_t n = eh.e_phnum;
    if (pread(fd, ph, n * sizeof ph[0], (off_t)eh.e_phoff) == (ssize_t)(n * sizeof ph[0])) {
      bool interp = false;
      for (size_t i = 0; i < n; ++i)
        interp |= ph[i].p_type == PT_INTERP;
      /* No interpreter, nobody reads LD_PRELOAD (static and static-pie). */
      result = !interp;
      if (result)
        snprintf(why, len, "%s is statically linked: the timer method's preloaded sampler cannot load into it; "
                 "use --method perf (it needs kernel.perf_event_paranoid <= 2)", path);
    }
  }
  close(fd);
  return result;
}

/* ---- one recording -------------------------------------------------------- */

typedef struct recording {
  char path[PATH_MAX];
  const unsigned char *map;
  size_t len;
  const srec_header_t *h;
  uint64_t start_ns;
} recording_t;

typedef struct map_entry {
  uint64_t start, end, offset, bias, unmapped;
  const char *path;
  const uint8_t *bid; /* build id, in the recording; NULL: unknown */
  size_t bid_len;
  bool ours; /* the sampler library itself */
} map_entry_t;

typedef struct thread_entry {
  int32_t tid;
  bool ended, blocked;
  uint64_t cpu_ns, weight[2];
  char name[16];
  uint32_t pool;                /* 1 + its start routine's pool; 0: none */
  const srec_sample_t *charged; /* periods the tick did not deliver */
} thread_entry_t;

typedef struct totals {
  uint64_t signals[2], weight[2], cpu_ns, lost;
  uint64_t charged; /* CPU-time weight of undelivered periods (in weight[0]) */
  unsigned processes, busy;
  uint32_t flags; /* of every recording */
  bool any_exited;
  bool any_blocked; /* a thread ended blocking SIGPROF */
} totals_t;

static const srec_chunk_t *chunk_of(const recording_t *r, uint32_t i) {
  return (const srec_chunk_t *)(const void *)(r->map + r->h->header_size + (size_t)i * r->h->chunk_size);
}

/* Calls fn on every whole record of the chunks of `owner`, in chunk order. */
static void each_record(const recording_t *r, uint32_t owner, void (*fn)(const srec_any_t *, void *),
                        void *ctx) {
  uint32_t n = atomic_load(&((srec_header_t *)(uintptr_t)r->h)->next_chunk);
  if (n > r->h->nchunks)
    n = r->h->nchunks;
  for (uint32_t i = 0; i < n; ++i) {
    const srec_chunk_t *c = chunk_of(r, i);
    if (c->owner != owner)
      continue;
    uint32_t used = atomic_load(&((srec_chunk_t *)(uintptr_t)c)->used);
    if (used > r->h->chunk_size - SREC_CHUNK_HEADER)
      continue; /* damaged */
    const unsigned char *p = (const unsigned char *)c + SREC_CHUNK_HEADER, *end = p + used;
    while (p + sizeof(srec_any_t) <= end) {
      const srec_any_t *a = (const void *)p;
      if (a->size < sizeof *a || (a->size & 7) || p + a->size > end)
        break;
      fn(a, ctx);
      p += a->size;
    }
  }
}

typedef struct meta {
  map_entry_t *maps;
  size_t nmaps, capmaps;
  thread_entry_t *threads; /* by index */
  size_t nthreads;
  bool oom;
} meta_t;

static thread_entry_t *thread_at(meta_t *m, uint32_t index) {
  if (index >= 1u << 20)
    return NULL;
  if (index >= m->nthreads) {
    size_t n = index + 64;
    thread_entry_t *t = realloc(m->threads, n * sizeof *t);
    if (!t) {
      m->oom = true;
      return NULL;
    }
    memset(t + m->nthreads, 0, (n - m->nthreads) * sizeof *t);
    m->threads = t;
    m->nthreads = n;
  }
  return &m->threads[index];
}

static void meta_record(const srec_any_t *a, void *ctx) {
  meta_t *m = ctx;
  if ((a->kind == SREC_THREAD || a->kind == SREC_THREAD_END) && a->size >= sizeof(srec_thread_t)) {
    const srec_thread_t *r = (const void *)a;
    thread_entry_t *t = thread_at(m, r->thread);
    if (!t)
      return;
    t->tid = r->tid;
    if (a->kind == SREC_THREAD_END) {
      t->ended = true;
      t->blocked = r->sigprof_blocked;
      t->cpu_ns = r->cpu_ns;
      t->weight[0] = r->weight[0];
      t->weight[1] = r->weight[1];
      memcpy(t->name, r->name, sizeof t->name);
      t->name[sizeof t->name - 1] = '\0';
    }
  } else if ((a->kind == SREC_MAP || a->kind == SREC_UNMAP) && a->size > sizeof(srec_map_t)) {
    const srec_map_t *r = (const void *)a;
    if (memchr(r->path, '\0', a->size - sizeof *r) == NULL)
      return;
    if (a->kind == SREC_UNMAP) {
      for (size_t i = 0; i < m->nmaps; ++i)
        if (m->maps[i].unmapped == UINT64_MAX && m->maps[i].bias == r->bias &&
            strcmp(m->maps[i].path, r->path) == 0)
          m->maps[i].unmapped = r->time_ns;
      return;
    }
    if (m->nmaps == m->capmaps) {
      size_t cap = m->capmaps ? 2 * m->capmaps : 64;
      map_entry_t *e = realloc(m->maps, cap * sizeof *e);
      if (!e) {
        m->oom = true;
        return;
      }
      m->maps = e;
      m->capmaps = cap;
    }
    const char *base = strrchr(r->path, '/');
    map_entry_t *e = &m->maps[m->nmaps++];
    e->start = r->start;
    e->end = r->end;
    e->offset = r->offset;
    e->bias = r->bias;
    e->unmapped = UINT64_MAX;
    e->path = r->path; /* points into the mapping of the recording */
    size_t after = a->size - sizeof *r - strlen(r->path) - 1; /* bytes after the path's NUL */
    const uint8_t *b = (const uint8_t *)r->path + strlen(r->path) + 1;
    e->bid_len = after >= 1 && b[0] && b[0] <= after - 1 ? b[0] : 0;
    e->bid = e->bid_len ? b + 1 : NULL;
    e->ours = strcmp(base ? base + 1 : r->path, "libxptrace_sampler.so") == 0;
  }
}

/* CPU time the kernel's tick did not deliver: the library charges each
 * thread's undelivered periods at its end to its start routine
 * (SREC_SAMPLE_CHARGED).  Where the time went is what the stacks really
 * captured in threads like it say: a thread of 4 periods or more, its
 * own; a shorter one, those of the short threads of the same routine
 * (500 threads of 1 ms in st -> short_work: the few captured are in
 * short_work, not st; a long thread sharing a generic `worker` routine
 * is not like them).  No capture at all: the routine keeps the charge. */
enum { POOL_KEEP = 1024 }; /* stacks kept per routine (uniform reservoir) */

typedef struct pool_stack {
  uint64_t *pc, weight;
  uint32_t n;
  bool truncated;
} pool_stack_t;

typedef struct pool {
  uint64_t routine, owner, seen, missing, given; /* owner: 1 + the thread; 0: short threads */
  pool_stack_t st[POOL_KEEP];
  size_t nst, next; /* next: the stack the following charge starts from */
  double weight, at, step;
} pool_t;

typedef struct sample_ctx {
  xs_session_t *s;
  const recording_t *r;
  meta_t *m;
  totals_t *tot;
  pool_t **pools;
  size_t npools;
  uint64_t rng;
  uint64_t pcs[SAMPLER_REC_MAX_DEPTH];
} sample_ctx_t;

/* The sampler's own frames (the thread start trampoline) are left out. */
static bool pc_is_ours(const meta_t *m, uint64_t pc) {
  for (size_t i = 0; i < m->nmaps; ++i)
    if (m->maps[i].ours && pc >= m->maps[i].start && pc < m->maps[i].end)
      return true;
  return false;
}

static const srec_sample_t *as_sample(const srec_any_t *a) {
  if (a->kind != SREC_SAMPLE || a->size < sizeof(srec_sample_t))
    return NULL;
  const srec_sample_t *r = (const void *)a;
  if (sizeof *r + (size_t)r->depth * sizeof(uint64_t) > a->size || r->clock > 1 ||
      r->depth > SAMPLER_REC_MAX_DEPTH)
    return NULL;
  return r;
}

static size_t own_frames_out(const sample_ctx_t *c, const srec_sample_t *r) {
  size_t n = 0;
  for (size_t i = 0; i < r->depth; ++i)
    if (!pc_is_ours(c->m, r->pc[i]))
      ((sample_ctx_t *)c)->pcs[n++] = r->pc[i];
  return n;
}

/* Meta chunks: each charge joins its routine's pool. */
static void charge_scan(const srec_any_t *a, void *ctx) {
  sample_ctx_t *c = ctx;
  const srec_sample_t *r = as_sample(a);
  if (!r || !(r->truncated & SREC_SAMPLE_CHARGED) || r->clock != 0 || r->depth == 0)
    return;
  thread_entry_t *t = r->thread < c->m->nthreads ? &c->m->threads[r->thread] : NULL;
  if (!t || !t->tid || t->charged)
    return;
  const srec_header_t *h = c->r->h;
  double period = h->freq[0] > 0 ? 1e9 / h->freq[0] : 1e7;
  uint64_t owner = t->ended && (double)t->cpu_ns >= 4 * period ? (uint64_t)r->thread + 1 : 0;
  size_t i = 0;
  while (i < c->npools && (c->pools[i]->routine != r->pc[0] || c->pools[i]->owner != owner))
    ++i;
  if (i == c->npools) {
    pool_t **grown = realloc(c->pools, (c->npools + 1) * sizeof *grown);
    pool_t *p = calloc(1, sizeof *p);
    if (grown)
      c->pools = grown;
    if (!grown || !p) {
      free(p);
      return;
    }
    p->routine = r->pc[0];
    p->owner = owner;
    c->pools[c->npools++] = p;
  }
  c->pools[i]->missing += r->weight;
  t->pool = (uint32_t)i + 1;
  t->charged = r;
}

static void pool_keep(sample_ctx_t *c, pool_t *p, size_t n, uint64_t weight, bool truncated) {
  size_t slot = p->nst;
  p->seen++;
  if (slot == POOL_KEEP) {
    c->rng = c->rng * 6364136223846793005ull + 1442695040888963407ull;
    slot = (size_t)((c->rng >> 33) % p->seen);
    if (slot >= POOL_KEEP)
      return;
  }
  uint64_t *pc = malloc((n ? n : 1) * sizeof *pc);
  if (!pc)
    return;
  memcpy(pc, c->pcs, n * sizeof *pc);
  if (slot == p->nst)
    p->nst++;
  else
    free(p->st[slot].pc);
  p->st[slot] = (pool_stack_t){pc, weight, (uint32_t)n, truncated};
}

static void sample_record(const srec_any_t *a, void *ctx) {
  sample_ctx_t *c = ctx;
  const srec_sample_t *r = as_sample(a);
  if (!r || (r->truncated & SREC_SAMPLE_CHARGED))
    return;
  thread_entry_t *t = r->thread < c->m->nthreads ? &c->m->threads[r->thread] : NULL;
  if (!t || !t->tid)
    return;
  size_t n = own_frames_out(c, r);
  c->tot->signals[r->clock]++;
  c->tot->weight[r->clock] += r->weight;
  xs_sample(c->s, r->clock ? XS_REALTIME : XS_CPUTIME, c->r->h->pid, t->tid, r->time_ns, r->weight,
            c->pcs, n, (r->truncated & 1) != 0);
  if (r->clock == 0 && t->pool)
    pool_keep(c, c->pools[t->pool - 1], n, r->weight, (r->truncated & 1) != 0);
}

/* Each thread's charge, in units of one period, goes to the pool's
 * stacks at evenly spaced points of their cumulated weight. */
static void charge_give(sample_ctx_t *c, thread_entry_t *t) {
  const srec_sample_t *r = t->charged;
  pool_t *p = c->pools[t->pool - 1];
  if (!r->weight)
    return;
  c->tot->weight[0] += r->weight;
  c->tot->charged += r->weight;
  if (p->nst == 0) {
    size_t n = own_frames_out(c, r);
    xs_sample(c->s, XS_CPUTIME, c->r->h->pid, t->tid, r->time_ns, r->weight, c->pcs, n, false);
    return;
  }
  if (p->step == 0) {
    for (size_t i = 0; i < p->nst; ++i)
      p->weight += (double)p->st[i].weight;
    p->step = p->weight / (double)p->missing;
    p->at = (double)p->st[0].weight;
  }
  for (uint64_t u = 0; u < r->weight;) {
    double pos = ((double)p->given + 0.5) * p->step;
    while (pos >= p->at && p->next + 1 < p->nst)
      p->at += (double)p->st[++p->next].weight;
    /* The units that fall on this stack, at most what is left. */
    uint64_t k = 1;
    while (u + k < r->weight && ((double)(p->given + k) + 0.5) * p->step < p->at)
      ++k;
    const pool_stack_t *st = &p->st[p->next];
    xs_sample(c->s, XS_CPUTIME, c->r->h->pid, t->tid, r->time_ns, k, st->pc, st->n, st->truncated);
    u += k;
    p->given += k;
  }
}

static void say_process(const recording_t *r, char *buf, size_t len) {
  snprintf(buf, len, "%.*s [%d]", (int)sizeof r->h->program, r->h->program, (int)r->h->pid);
}

/* Feed one recording; print its diagnostics. */
static void feed(xs_session_t *s, const recording_t *r, bool exec_of_known, totals_t *tot) {
  const srec_header_t *h = r->h;
  char who[128];
  say_process(r, who, sizeof who);
  if (exec_of_known) {
    xs_process_name(s, h->pid, h->start_ns, h->program, true);
  } else {
    xs_process(s, h->pid, (atomic_load(&((srec_header_t *)(uintptr_t)h)->flags) & SREC_FLAG_FORKED) ? h->ppid : 0,
               h->start_ns);
    xs_process_name(s, h->pid, h->start_ns, h->program, false);
  }
  meta_t m = {0};
  each_record(r, SREC_OWNER_META, meta_record, &m);
  /* A mapping counts from the later of the process's start and the
   * unloading of what it replaces (it was seen up to 50 ms after its
   * load; what it replaced was gone before). */
  for (size_t i = 0; i < m.nmaps; ++i) {
    uint64_t t = h->start_ns;
    for (size_t j = 0; j < i; ++j)
      if (m.maps[j].unmapped != UINT64_MAX && m.maps[j].unmapped > t && m.maps[j].start < m.maps[i].end &&
          m.maps[i].start < m.maps[j].end)
        t = m.maps[j].unmapped;
    xs_mapping(s, h->pid, t, m.maps[i].start, m.maps[i].end, m.maps[i].offset, m.maps[i].path, m.maps[i].bid,
               m.maps[i].bid_len);
  }
  for (size_t i = 0; i < m.nthreads; ++i) {
    thread_entry_t *t = &m.threads[i];
    if (!t->tid)
      continue;
    xs_thread(s, h->pid, t->tid, h->start_ns, t->name[0] ? t->name : NULL);
  }
  sample_ctx_t *c = calloc(1, sizeof *c);
  if (c) {
    c->s = s;
    c->r = r;
    c->m = &m;
    c->tot = tot;
    c->rng = h->pid;
    each_record(r, SREC_OWNER_META, charge_scan, c);
    each_record(r, SREC_OWNER_THREADS, sample_record, c);
    each_record(r, SREC_OWNER_META, sample_record, c); /* none today; kept for any to come */
    for (size_t i = 0; i < m.nthreads; ++i)
      if (m.threads[i].charged)
        charge_give(c, &m.threads[i]);
    for (size_t i = 0; i < c->npools; ++i) {
      for (size_t j = 0; j < c->pools[i]->nst; ++j)
        free(c->pools[i]->st[j].pc);
      free(c->pools[i]);
    }
    free(c->pools);
    free(c);
  }
  uint64_t end = atomic_load(&((srec_header_t *)(uintptr_t)h)->end_ns);
  uint32_t hflags = atomic_load(&((srec_header_t *)(uintptr_t)h)->flags);
  for (size_t i = 0; i < m.nthreads; ++i) {
    thread_entry_t *t = &m.threads[i];
    if (!t->tid || !t->ended)
      continue;
    tot->cpu_ns += t->cpu_ns;
    tot->any_blocked |= t->blocked;
    /* A thread with CPU time for 4 or more periods and under half of its
     * samples, that blocked SIGPROF: said here, with the cause (the
     * session tells of the others). */
    double expected = h->clock_on[0] ? (double)t->cpu_ns * 1e-9 * h->freq[0] : 0;
    bool told = false;
    if (expected >= 4 && (double)t->weight[0] < 0.5 * expected &&
        !(hflags & (SREC_FLAG_SIGPROF_TAKEN | SREC_FLAG_SIGPROF_HELD))) {
      if (t->blocked) {
        fprintf(stderr,
                "xptrace sample: %s: thread %d (%s) used %.3f CPU-s and got %llu of ~%.0f samples: "
                "it blocks SIGPROF; use --method perf (it samples threads that block signals)\n",
                who, (int)t->tid, t->name[0] ? t->name : "?", (double)t->cpu_ns * 1e-9,
                (unsigned long long)t->weight[0], expected);
        told = true;
      }
    }
    /* SIGPROF taken: one line for the process instead of one per thread. */
    if (hflags & (SREC_FLAG_SIGPROF_TAKEN | SREC_FLAG_SIGPROF_HELD))
      told = true;
    xs_thread_exit(s, h->pid, t->tid, end ? end : h->start_ns, told ? UINT64_MAX : t->cpu_ns);
  }
  uint32_t flags = atomic_load(&((srec_header_t *)(uintptr_t)h)->flags);
  if (flags & SREC_FLAG_SIGPROF_HELD)
    fprintf(stderr,
            "xptrace sample: %s: SIGPROF already had a handler when the sampler loaded: no CPU-time "
            "samples; use --method perf (it needs no signal)\n", who);
  if (flags & SREC_FLAG_SIGPROF_TAKEN)
    fprintf(stderr,
            "xptrace sample: %s: the program set its own SIGPROF action: it got it, and CPU-time "
            "sampling stopped there; use --method perf (it needs no signal)\n", who);
  if (flags & SREC_FLAG_RT_TAKEN)
    fprintf(stderr, "xptrace sample: %s: the program took the real-time sampler's signal: realtime "
                    "sampling stopped there\n", who);
  if (flags & SREC_FLAG_NO_TIMER)
    fprintf(stderr, "xptrace sample: %s: some threads could not get a timer (timer_create failed: "
                    "RLIMIT_SIGPENDING?): they were not sampled\n", who);
  tot->lost += atomic_load(&((srec_header_t *)(uintptr_t)h)->lost);
  tot->any_exited |= (flags & SREC_FLAG_EXITED) != 0;
  tot->flags |= flags;
  if (m.oom)
    fprintf(stderr, "xptrace sample: %s: out of memory reading its recording\n", who);
  free(m.maps);
  free(m.threads);
}

/* ---- the recordings under a folder ---------------------------------------------- */

typedef struct rec_list {
  recording_t *r;
  size_t n, cap;
} rec_list_t;

static bool is_recording_name(const char *name) {
  size_t n = strlen(name);
  return strncmp(name, "samples", 7) == 0 && n > 6 && strcmp(name + n - 6, ".xsamp") == 0;
}

static void rec_open(rec_list_t *l, const char *path, totals_t *tot) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return;
  /* A process still running holds a shared lock on its recording. */
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    srec_header_t h;
    if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h)
      fprintf(stderr, "xptrace sample: %.*s [%d] is still running; its samples so far are in %s\n",
              (int)sizeof h.program, h.program, (int)h.pid, path);
    tot->busy++;
    close(fd);
    return;
  }
  struct stat st;
  void *map = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= SREC_HEADER_SIZE)
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    fprintf(stderr, "xptrace sample: %s is not a sampler recording (too short)\n", path);
    return;
  }
  const srec_header_t *h = map;
  if (memcmp(h->magic, SREC_MAGIC, 8) != 0 || h->version != SREC_VERSION ||
      h->header_size != SREC_HEADER_SIZE || h->chunk_size < 4096 || h->chunk_size > (1u << 24) ||
      (uint64_t)h->header_size + (uint64_t)h->nchunks * h->chunk_size > (uint64_t)st.st_size) {
    fprintf(stderr, "xptrace sample: %s is not a sampler recording of this version\n", path);
    munmap(map, (size_t)st.st_size);
    return;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    recording_t *r = realloc(l->r, cap * sizeof *r);
    if (!r) {
      munmap(map, (size_t)st.st_size);
      return;
    }
    l->r = r;
    l->cap = cap;
  }
  recording_t *r = &l->r[l->n++];
  snprintf(r->path, sizeof r->path, "%s", path);
  r->map = map;
  r->len = (size_t)st.st_size;
  r->h = h;
  r->start_ns = h->start_ns;
}

/* Depth-first; our folders only (child-<pid>, <program>-<pid>). */
static void rec_find(rec_list_t *l, const char *dir, int level, totals_t *tot) {
  DIR *d = opendir(dir);
  if (!d || level > 32) {
    if (d)
      closedir(d);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
      continue;
    struct stat st;
    if (lstat(path, &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode))
      rec_find(l, path, level + 1, tot);
    else if (S_ISREG(st.st_mode) && is_recording_name(e->d_name))
      rec_open(l, path, tot);
  }
  closedir(d);
}

static int by_start(const void *a, const void *b) {
  const recording_t *x = a, *y = b;
  return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

int sample_timer_report(const sample_timer_opts_t *o) {
  totals_t tot;
  memset(&tot, 0, sizeof tot);
  rec_list_t l = {0};
  rec_find(&l, o->dir, 0, &tot);
  if (l.n == 0) {
    if (!tot.busy && !o->silent_if_none)
      fprintf(stderr,
              "xptrace sample: no samples: no process loaded the sampler (a static or setuid program, "
              "or LD_PRELOAD cleared); use --method perf\n");
    return 1;
  }
  qsort(l.r, l.n, sizeof *l.r, by_start);
  const srec_header_t *root = l.r[0].h;
  char program[sizeof root->program + 1];
  snprintf(program, sizeof program, "%.*s", (int)sizeof root->program, root->program);
  double hz = o->hz > 0 ? o->hz : root->freq[root->clock_on[0] ? 0 : 1];
  xs_options_t so = {.dir = o->dir, .command = o->command ? o->command : program, .method = "timer",
                     .hz = hz, .depth = o->depth ? o->depth : root->depth, .demangle = o->demangle,
                     .trace = true, .trace_path = o->trace_path,
                     .trace_path_len = o->trace_path_len,
                     .clock_hz = {root->clock_on[0] ? root->freq[0] : 0,
                                  root->clock_on[1] ? root->freq[1] : 0}};
  xs_session_t *s = xs_session_new(&so);
  if (!s) {
    fprintf(stderr, "xptrace sample: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < l.n; ++i) {
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j)
      seen = l.r[j].h->pid == l.r[i].h->pid;
    if (i == 0)
      xs_root(s, l.r[i].h->pid);
    feed(s, &l.r[i], seen, &tot);
  }
  /* CPU time: the command's tree as the kernel counted it when we
   * waited for it (killed processes included), else the threads'. */
  double cpu = (double)tot.cpu_ns * 1e-9;
  struct rusage ru;
  if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
    double children = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
                      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    if (children > 0)
      cpu = children;
  }
  xs_method_stats_t st = {.cpu_seconds = cpu > 0 ? cpu : -1, .effective_hz = -1,
                          .unwinder = "libunwind in the signal handler"};
  xs_session_finish(s, &st);
  xs_session_free(s);
  if (!tot.weight[0] && !tot.weight[1]) {
    /* Never "no samples" without a reason. */
    const char *why = (tot.flags & SREC_FLAG_PERIODS) ? "no sampling window opened before the program ended (--periods)"
                      : (tot.flags & (SREC_FLAG_SIGPROF_TAKEN | SREC_FLAG_SIGPROF_HELD))
                          ? "the program took SIGPROF (above)"
                      /* Blocked only when a thread said so: the CPU time
                       * counted includes the start-up before the sampler
                       * was loaded (13 ms of `true` on a slow guest). */
                      : tot.any_blocked || cpu >= 20.0 / hz
                          ? "its threads blocked the sampling signals (use --method perf)"
                          : "the program used less CPU time than one sampling period (raise -f)";
    fprintf(stderr, "xptrace sample: no samples: %s\n", why);
  }
  if (tot.lost)
    fprintf(stderr,
            "xptrace sample: %llu sample(s) lost: the recording was full (XPTRACE_SAMPLE_BUFFER_SIZE), the "
            "disk refused room, or a stack could not be read\n", (unsigned long long)tot.lost);
  /* Timer signals arrive at the kernel's tick at most; each one counts
   * for the periods it stands for. */
  if (cpu > 0.05 && tot.signals[0])
    fprintf(stderr,
            "xptrace sample: method timer: %g Hz asked; timer signals came %.0f times per CPU-second "
            "(the kernel's tick at most), each counting 1 + its overruns: %.0f per CPU-second\n",
            hz, (double)tot.signals[0] / cpu, (double)tot.weight[0] / cpu);
  /* Counts that are not captures: said, with where they come from. */
  if (tot.weight[0] > tot.signals[0])
    fprintf(stderr,
            "xptrace sample: method timer: %llu stack captures stand for the %llu cputime samples counted: "
            "%llu more for timer overruns, %llu for periods of ended threads the tick never delivered "
            "(given the stacks captured in threads of the same start routine)\n",
            (unsigned long long)tot.signals[0], (unsigned long long)tot.weight[0],
            (unsigned long long)(tot.weight[0] - tot.signals[0] - tot.charged), (unsigned long long)tot.charged);
  for (size_t i = 0; i < l.n; ++i) {
    unlink(l.r[i].path);
    munmap((void *)(uintptr_t)l.r[i].map, l.r[i].len);
  }
  /* The folders of forked and exec'd processes that held nothing else
   * (sample: one report; run --sample keeps their traces there). */
  size_t top = strlen(o->dir);
  for (size_t i = 0; i < l.n; ++i) {
    char *slash;
    while ((slash = strrchr(l.r[i].path, '/')) != NULL && (size_t)(slash - l.r[i].path) > top &&
           strncmp(l.r[i].path, o->dir, top) == 0) {
      *slash = '\0';
      if (rmdir(l.r[i].path) != 0)
        break;
    }
  }
  free(l.r);
  return 0;
}

void sample_timer_after(const void *ctx) {
  const sample_timer_opts_t *o = ctx;
  sample_timer_report(o);
  fprintf(stderr, "xptrace: output in %s\n", o->dir);
  print_sample_outputs(o->dir, false);
}
