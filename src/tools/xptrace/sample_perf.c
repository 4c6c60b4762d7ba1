/* xptrace sample --method perf: kernel cpu-clock sampling of a child
 * process tree, read and symbolized by the launcher (docs/sampler.md). */
#include "sample_perf.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xpt_files.h"

#include "sample_perf_internal.h"

static proc_t *proc_get(state_t *s, int pid) {
  for (size_t i = 0; i < s->nprocs; ++i)
    if (s->procs[i].pid == pid)
      return &s->procs[i];
  proc_t *p = realloc(s->procs, (s->nprocs + 1) * sizeof *p);
  if (!p)
    return NULL;
  s->procs = p;
  p = &s->procs[s->nprocs++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  return p;
}

static thread_t *thread_get(state_t *s, int pid, int tid) {
  for (size_t i = s->nthreads; i-- > 0;)
    if (s->threads[i].tid == tid && s->threads[i].pid == pid)
      return &s->threads[i];
  proc_t *p = proc_get(s, pid);
  thread_t *t = realloc(s->threads, (s->nthreads + 1) * sizeof *t);
  if (!p || !t)
    return NULL;
  s->threads = t;
  t = &s->threads[s->nthreads++];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  t->pid = pid;
  t->index = tid == pid ? 0 : ++p->nthreads;
  return t;
}

static uint32_t module_get(state_t *s, const char *path) {
  for (size_t i = 0; i < s->nmodules; ++i)
    if (strcmp(s->modules[i].path, path) == 0)
      return (uint32_t)i;
  module_t *m = realloc(s->modules, (s->nmodules + 1) * sizeof *m);
  if (!m)
    return UINT32_MAX;
  s->modules = m;
  m = &s->modules[s->nmodules];
  memset(m, 0, sizeof *m);
  if (!(m->path = strdup(path)))
    return UINT32_MAX;
  return (uint32_t)s->nmodules++;
}

static void map_add(proc_t *p, const mapping_t *m) {
  if (p->nmaps == p->capmaps) {
    size_t cap = p->capmaps ? 2 * p->capmaps : 32;
    mapping_t *maps = realloc(p->maps, cap * sizeof *maps);
    if (!maps)
      return;
    p->maps = maps;
    p->capmaps = cap;
  }
  p->maps[p->nmaps++] = *m;
}

/* The latest mapping holding `addr` wins: a later mmap replaced it. */
static const mapping_t *map_find(const proc_t *p, uint64_t addr) {
  for (size_t i = p->nmaps; i-- > 0;)
    if (addr >= p->maps[i].start && addr < p->maps[i].end)
      return &p->maps[i];
  return NULL;
}

static int stack_eq(const void *entry, const void *key) {
  const stack_t_ *a = entry, *b = key;
  return a->tid == b->tid && a->n == b->n && memcmp(a->frame, b->frame, b->n * sizeof a->frame[0]) == 0;
}

/* ---- records ------------------------------------------------------------ */

/* Non-sample records end with sample_id_all's {pid, tid, time}. */
static uint64_t record_time(const struct perf_event_header *h) {
  const unsigned char *p = (const unsigned char *)h;
  if (h->type == PERF_RECORD_SAMPLE) {
    uint64_t t;
    memcpy(&t, p + sizeof *h + 16, 8);
    return t;
  }
  if (h->size < sizeof *h + 16)
    return 0;
  uint64_t t;
  memcpy(&t, p + h->size - 8, 8);
  return t;
}

static void on_sample(state_t *s, const unsigned char *p, const unsigned char *end) {
  struct {
    uint64_t ip;
    uint32_t pid, tid;
    uint64_t time, nr;
  } h;
  if (end - p < (ptrdiff_t)sizeof h)
    return;
  memcpy(&h, p, sizeof h);
  const unsigned char *ips = p + sizeof h;
  if (h.nr > (uint64_t)(end - ips) / 8)
    return;
  ++s->samples;
  thread_t *t = thread_get(s, (int)h.pid, (int)h.tid);
  proc_t *proc = proc_get(s, (int)h.pid);
  if (!t || !proc)
    return;
  ++t->samples;
  size_t cap = s->depth;
  stack_t_ *st = malloc(sizeof *st + cap * sizeof st->frame[0]);
  if (!st)
    return;
  st->tid = t->tid;
  st->n = 0;
  st->count = 1;
  for (uint64_t i = 0; i < h.nr || (h.nr == 0 && i == 0); ++i) {
    uint64_t pc = h.ip;
    if (h.nr) {
      memcpy(&pc, ips + 8 * i, 8);
      if (pc >= (uint64_t)PERF_CONTEXT_MAX)
        continue; /* PERF_CONTEXT_USER and its kin mark, not frames */
    }
    if (st->n == cap) {
      s->truncated = true;
      break;
    }
    /* Resolved now: the mapping may be gone by the end of the run. */
    const mapping_t *m = map_find(proc, pc);
    st->frame[st->n][0] = m ? m->module + 1u : 0;
    st->frame[st->n][1] = m ? pc - m->start + m->pgoff : pc;
    ++st->n;
  }
  uint64_t hh = hash_mem(st->frame, st->n * sizeof st->frame[0], (uint64_t)st->tid);
  if (ht_reserve(&s->stacks) != 0) {
    free(st);
    return;
  }
  size_t i = ht_find(&s->stacks, hh, st, stack_eq);
  if (s->stacks.slot[i]) {
    ((stack_t_ *)s->stacks.slot[i])->count++;
    free(st);
    return;
  }
  s->stacks.slot[i] = st;
  s->stacks.hash[i] = hh;
  s->stacks.len++;
}

static void on_record(state_t *s, const struct perf_event_header *hdr) {
  const unsigned char *p = (const unsigned char *)(hdr + 1);
  const unsigned char *end = (const unsigned char *)hdr + hdr->size;
  uint32_t ids[4];
  switch (hdr->type) {
  case PERF_RECORD_SAMPLE: on_sample(s, p, end); break;
  case PERF_RECORD_MMAP2: {
    struct {
      uint32_t pid, tid;
      uint64_t addr, len, pgoff;
      unsigned char ids[24];
      uint32_t prot, flags;
    } m;
    if (end - p <= (ptrdiff_t)sizeof m + 16)
      return;
    memcpy(&m, p, sizeof m);
    char name[PATH_MAX];
    size_t room = (size_t)(end - 16 - (p + sizeof m));
    snprintf(name, sizeof name, "%.*s", (int)(room < sizeof name ? room : sizeof name - 1),
             (const char *)(p + sizeof m));
    proc_t *proc = proc_get(s, (int)m.pid);
    uint32_t mod = module_get(s, name);
    if (proc && mod != UINT32_MAX)
      map_add(proc, &(mapping_t){m.addr, m.addr + m.len, m.pgoff, mod});
    break;
  }
  case PERF_RECORD_COMM: {
    if (end - p <= 8 + 16)
      return;
    memcpy(ids, p, 8);
    char comm[32];
    snprintf(comm, sizeof comm, "%.*s", (int)(end - 16 - (p + 8)), (const char *)(p + 8));
    proc_t *proc = proc_get(s, (int)ids[0]);
    thread_t *t = thread_get(s, (int)ids[0], (int)ids[1]);
    if (t)
      snprintf(t->comm, sizeof t->comm, "%s", comm);
    if (proc && ids[0] == ids[1])
      snprintf(proc->comm, sizeof proc->comm, "%s", comm);
    if (proc && (hdr->misc & PERF_RECORD_MISC_COMM_EXEC))
      proc->nmaps = 0; /* a new program image: the old mappings are gone */
    break;
  }
  case PERF_RECORD_FORK: {
    if (end - p < 16)
      return;
    memcpy(ids, p, 16); /* pid, ppid, tid, ptid */
    if (ids[0] != ids[1]) {
      /* A new process starts with a copy of its parent's mappings. */
      proc_t *parent = proc_get(s, (int)ids[1]);
      size_t pi = parent ? (size_t)(parent - s->procs) : 0;
      proc_t *child = proc_get(s, (int)ids[0]);
      if (parent && child) {
        parent = &s->procs[pi];
        snprintf(child->comm, sizeof child->comm, "%s", parent->comm);
        for (size_t i = 0; i < parent->nmaps; ++i)
          map_add(child, &parent->maps[i]);
      }
    }
    thread_get(s, (int)ids[0], (int)ids[2]); /* thread numbers in creation order */
    break;
  }
  case PERF_RECORD_LOST:
    if (end - p >= 16) {
      uint64_t lost[2];
      memcpy(lost, p, 16);
      s->lost += lost[1];
    }
    break;
  case PERF_RECORD_THROTTLE: ++s->throttled; break;
  default: break;
  }
}

/* ---- ring buffers --------------------------------------------------------- */

typedef struct ring {
  int fd;
  struct perf_event_mmap_page *meta;
  unsigned char *data;
  size_t size, map_size;
} ring_t;

typedef struct batch {
  struct perf_event_header **rec;
  size_t n, cap;
} batch_t;

/* Copy every record out of a ring (they may wrap) and free its space. */
static void ring_drain(ring_t *r, batch_t *b) {
  uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = r->meta->data_tail;
  while (tail + sizeof(struct perf_event_header) <= head) {
    struct perf_event_header hdr;
    size_t off = tail & (r->size - 1);
    memcpy(&hdr, r->data + off, sizeof hdr); /* 8-aligned: never split */
    if (hdr.size < sizeof hdr || tail + hdr.size > head)
      break;
    struct perf_event_header *copy = malloc(hdr.size);
    if (copy) {
      size_t first = r->size - off < hdr.size ? r->size - off : hdr.size;
      memcpy(copy, r->data + off, first);
      memcpy((unsigned char *)copy + first, r->data, hdr.size - first);
      if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        void *rec = realloc(b->rec, cap * sizeof *b->rec);
        if (rec) {
          b->rec = rec;
          b->cap = cap;
        }
      }
      if (b->n < b->cap)
        b->rec[b->n++] = copy;
      else
        free(copy);
    }
    tail += hdr.size;
  }
  __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

static int record_cmp(const void *a, const void *b) {
  uint64_t x = record_time(*(struct perf_event_header *const *)a);
  uint64_t y = record_time(*(struct perf_event_header *const *)b);
  return x < y ? -1 : x > y;
}

/* One round: all rings, then the records in time order, so that a FORK or
 * MMAP2 seen on one CPU comes before the samples that need it on another. */
static void drain_all(state_t *s, ring_t *rings, size_t n) {
  batch_t b = {0};
  for (size_t i = 0; i < n; ++i)
    ring_drain(&rings[i], &b);
  qsort(b.rec, b.n, sizeof *b.rec, record_cmp);
  for (size_t i = 0; i < b.n; ++i) {
    on_record(s, b.rec[i]);
    free(b.rec[i]);
  }
  free(b.rec);
}

/* ---- opening the events ----------------------------------------------------- */

static long read_sysctl(const char *name, long fallback) {
  char path[128];
  snprintf(path, sizeof path, "/proc/sys/kernel/%s", name);
  FILE *f = fopen(path, "r");
  long v = fallback;
  if (f) {
    if (fscanf(f, "%ld", &v) != 1)
      v = fallback;
    fclose(f);
  }
  return v;
}

static void make_attr(const sample_perf_opts_t *o, struct perf_event_attr *a) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = PERF_TYPE_SOFTWARE;
  a->config = PERF_COUNT_SW_CPU_CLOCK;
  long max_rate = read_sysctl("perf_event_max_sample_rate", 100000);
  a->sample_freq = (uint64_t)(o->hz < (double)max_rate ? o->hz : (double)max_rate);
  if (a->sample_freq == 0)
    a->sample_freq = 1;
  a->freq = 1;
  a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  long max_stack = read_sysctl("perf_event_max_stack", 127);
  a->sample_max_stack = (uint16_t)((long)o->depth + 1 < max_stack ? (long)o->depth + 1 : max_stack);
  a->disabled = 1;
  a->inherit = 1;
  a->enable_on_exec = 1;
  a->exclude_kernel = 1; /* what perf_event_paranoid 2 allows; user time only */
  a->exclude_hv = 1;
  a->exclude_callchain_kernel = 1;
  a->mmap = 1; /* counted by the kernel only with mmap set; mmap2 picks the record */
  a->mmap2 = 1;
  a->comm = 1;
  a->task = 1;
  a->sample_id_all = 1;
  a->use_clockid = 1;
  a->clockid = CLOCK_MONOTONIC;
  a->watermark = 1;
}

static int perf_open(struct perf_event_attr *a, pid_t pid, int cpu) {
  return (int)syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

bool sample_perf_available(const sample_perf_opts_t *o, char *why, size_t len) {
  struct perf_event_attr a;
  make_attr(o, &a);
  int fd = perf_open(&a, 0, -1);
  if (fd >= 0) {
    close(fd);
    return true;
  }
  int err = errno;
  snprintf(why, len, "perf_event_open refused (%s; kernel.perf_event_paranoid=%ld)", strerror(err),
           read_sysctl("perf_event_paranoid", -9));
  return false;
}

/* One event per CPU: inherit with a ring buffer needs per-CPU events. */
static size_t open_rings(const sample_perf_opts_t *o, pid_t pid, ring_t **out, int *err) {
  struct perf_event_attr a;
  make_attr(o, &a);
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = 128;
  ring_t *rings = calloc(ncpu > 0 ? (size_t)ncpu : 1, sizeof *rings);
  size_t n = 0;
  *err = 0;
  for (long cpu = 0; rings && cpu < ncpu; ++cpu) {
    int fd = perf_open(&a, pid, (int)cpu);
    if (fd < 0) {
      if (errno != ENODEV && errno != EINVAL) /* offline CPUs */
        *err = errno;
      continue;
    }
    void *m = MAP_FAILED;
    /* The locked-memory allowance (perf_event_mlock_kb) may be small. */
    for (; pages >= 1; pages /= 2) {
      a.wakeup_watermark = (uint32_t)(pages * page / 4);
      m = mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED || errno != EPERM)
        break;
    }
    if (m == MAP_FAILED) {
      *err = errno;
      close(fd);
      continue;
    }
    rings[n++] = (ring_t){fd, m, (unsigned char *)m + page, pages * page, (pages + 1) * page};
  }
  *out = rings;
  return n;
}

/* ---- running --------------------------------------------------------------- */

static volatile sig_atomic_t perf_child;

static void forward(int sig) {
  if (perf_child > 0)
    kill((pid_t)perf_child, sig);
}

int sample_perf_run(char **command, const sample_perf_opts_t *o, void (*after)(const void *),
                    const void *ctx) {
  if (o->verbose) {
    fputs("xptrace: running", stderr);
    for (char **a = command; *a; ++a)
      fprintf(stderr, " %s", *a);
    fputc('\n', stderr);
  }
  struct sigaction ignore = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = forward};
  struct sigaction old_int, old_quit;
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&fwd.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) {
    fprintf(stderr, "xptrace: cannot start %s: %s\n", command[0], strerror(errno));
    return 1;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "xptrace: cannot start %s: %s\n", command[0], strerror(errno));
    return 1;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    close(go[1]);
    char c;
    /* Wait until the events are open: enable_on_exec then covers exec. */
    while (read(go[0], &c, 1) < 0 && errno == EINTR)
      ;
    execvp(command[0], command);
    fprintf(stderr, "xptrace: cannot run %s: %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  close(go[0]);
  perf_child = pid;
  sigaction(SIGTERM, &fwd, NULL);
  sigaction(SIGHUP, &fwd, NULL);

  state_t s = {.depth = o->depth};
  ring_t *rings = NULL;
  int err = 0;
  size_t nrings = open_rings(o, pid, &rings, &err);
  if (nrings == 0)
    fprintf(stderr, "xptrace sample: cannot sample %s: perf_event_open: %s\n", command[0],
            strerror(err ? err : ENODEV));
  struct pollfd *pfd = calloc(nrings ? nrings : 1, sizeof *pfd);
  for (size_t i = 0; pfd && i < nrings; ++i)
    pfd[i] = (struct pollfd){.fd = rings[i].fd, .events = POLLIN};
  if (write(go[1], "g", 1) < 0) {
    /* The child sees end of file and runs anyway. */
  }
  close(go[1]);

  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  for (;;) {
    pid_t w = wait4(pid, &status, WNOHANG, &ru);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      fprintf(stderr, "xptrace: lost %s: %s\n", command[0], strerror(errno));
      status = 1 << 8;
      break;
    }
    if (pfd && nrings)
      poll(pfd, nrings, 50);
    else
      usleep(50000);
    drain_all(&s, rings, nrings);
  }
  perf_child = 0;
  drain_all(&s, rings, nrings);
  for (size_t i = 0; i < nrings; ++i) {
    munmap(rings[i].meta, rings[i].map_size);
    close(rings[i].fd);
  }
  free(rings);
  free(pfd);

  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  struct perf_event_attr a;
  make_attr(o, &a);
  sample_perf_report(&s, o, command[0], pid, (double)a.sample_freq, cpu);
  sample_perf_state_free(&s);
  if (after)
    after(ctx);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fprintf(stderr, "xptrace: %s killed by signal %d (SIG%s)\n", command[0], sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
