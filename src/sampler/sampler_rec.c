/* xptrace timer sampler — the recording file (see sampler_rec.h): made
 * at load in the output folder, mapped shared, written by the signal
 * handler (samples) and under a lock (threads, mappings).  Nothing here
 * writes a file at signal time: a process that dies leaves its samples. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sampler_internal.h"
#include "xpt_collector.h"
#include "xpt_fd.h"

srec_header_t *srec_hdr;

static struct {
  int fd;
  size_t map_size;
  srec_chunk_t *meta; /* current metadata chunk, under meta_lock */
  pthread_mutex_t meta_lock;
  /* Objects recorded (load bias and path hash), to record each once. */
  struct known {
    uint64_t bias, name_hash;
  } *known;
  size_t nknown, capknown;
  unsigned long long adds, subs; /* dl_iterate_phdr counters at the last scan */
  /* Partly used chunks of ended threads, for the next threads. */
  srec_chunk_t *spare[64];
  size_t nspare;
  bool full; /* the disk refused more room, or the descriptor is gone */
  dev_t dev;
  ino_t ino;
} rec = {.fd = -1, .meta_lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t srec_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_now(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- chunks (async-signal-safe) ----------------------------------------- */

static srec_chunk_t *chunk_at(uint32_t i) {
  return (srec_chunk_t *)(void *)((char *)srec_hdr + SREC_HEADER_SIZE + (size_t)i * srec_hdr->chunk_size);
}

static srec_chunk_t *chunk_take(uint32_t owner) {
  srec_header_t *h = srec_hdr;
  if (!h)
    return NULL;
  uint32_t n = atomic_load_explicit(&h->next_chunk, memory_order_relaxed);
  uint32_t reserved = atomic_load_explicit(&h->reserved, memory_order_acquire);
  do {
    if (n >= reserved)
      return NULL;
  } while (!atomic_compare_exchange_weak_explicit(&h->next_chunk, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed));
  srec_chunk_t *c = chunk_at(n);
  c->owner = owner;
  atomic_store_explicit(&c->used, 0, memory_order_release);
  return c;
}

void *srec_reserve(srec_chunk_t **cp, size_t size, uint32_t owner) {
  srec_chunk_t *c = *cp;
  size_t room = srec_hdr ? srec_hdr->chunk_size - SREC_CHUNK_HEADER : 0;
  if (size > room)
    return NULL;
  uint32_t used = c ? atomic_load_explicit(&c->used, memory_order_relaxed) : 0;
  if (!c || used + size > room) {
    *cp = c = chunk_take(owner);
    if (!c)
      return NULL;
    used = 0;
  }
  return (char *)c + SREC_CHUNK_HEADER + used;
}

void srec_commit(srec_chunk_t *c, size_t size) {
  uint32_t used = atomic_load_explicit(&c->used, memory_order_relaxed);
  atomic_store_explicit(&c->used, used + (uint32_t)size, memory_order_release);
}

/* ---- the file ---------------------------------------------------------------- */

static uint64_t budget(void) {
  uint64_t b = xpt_env_size("XPTRACE_SAMPLE_BUFFER_SIZE", UINT64_C(256) << 20);
  if (b < (UINT64_C(256) << 10)) {
    xpt_msg("xptrace: XPTRACE_SAMPLE_BUFFER_SIZE is below 256K; using 256K");
    b = UINT64_C(256) << 10;
  }
  return b;
}

int srec_open(const char *dir, const srec_setup_t *setup) {
  char path[PATH_MAX + 64], why[PATH_MAX + 128];
  int dfd = xpt_dir_open(dir, why, sizeof why);
  if (dfd < 0) {
    xpt_msg("xptrace: %s", why);
    return -1;
  }
  int fd = -1;
  char name[64];
  for (int n = 0; n < 1000 && fd < 0; ++n) {
    if (n == 0)
      snprintf(name, sizeof name, "%s", SREC_FILE);
    else
      snprintf(name, sizeof name, "samples-%d.xsamp", n);
    fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  int err = fd < 0 ? errno : 0;
  fd = xpt_fd_raise(fd); /* held while the program runs: out of its way */
  snprintf(path, sizeof path, "%s/%s", dir, name);
  uint64_t b = budget();
  uint32_t chunk = 16384;
  size_t size = 0;
  /* The file has its full size, sparse; blocks are reserved ahead of
   * use (srec_grow_locked), so that a full disk is a message, never a
   * SIGBUS in the handler, and a run of many short processes (make, sh)
   * does not reserve the budget of each. */
  size = SREC_HEADER_SIZE + (size_t)(b / chunk) * chunk;
  uint32_t nchunks = (uint32_t)((size - SREC_HEADER_SIZE) / chunk);
  uint32_t reserved = nchunks < 128 ? nchunks : 128;
  if (!err && ftruncate(fd, (off_t)size) != 0)
    err = errno;
  if (!err && fallocate(fd, 0, 0, (off_t)(SREC_HEADER_SIZE + (size_t)reserved * chunk)) != 0) {
    err = errno;
    if (err == EOPNOTSUPP || err == ENOSYS) {
      err = 0;
      reserved = nchunks; /* nothing to reserve with: as the file system does */
    }
  }
  void *map = MAP_FAILED;
  if (!err && (map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
    err = errno;
  /* Written a page at a time: no read-ahead (it would zero megabytes of
   * page cache at the first fault, most of the fixed cost). */
  if (!err)
    madvise(map, size, MADV_RANDOM);
  close(dfd);
  if (err) {
    xpt_msg("xptrace: sampler: cannot make its recording %s: %s; not sampling", path, strerror(err));
    if (fd >= 0) {
      unlinkat(AT_FDCWD, path, 0);
      close(fd);
    }
    return -1;
  }
  /* Held while this process lives: the launcher knows it still runs. */
  flock(fd, LOCK_SH);
  struct stat st;
  if (fstat(fd, &st) == 0) {
    rec.dev = st.st_dev;
    rec.ino = st.st_ino;
  }
  srec_header_t *h = map;
  memcpy(h->magic, SREC_MAGIC, 8);
  h->version = SREC_VERSION;
  h->header_size = SREC_HEADER_SIZE;
  h->chunk_size = chunk;
  h->nchunks = nchunks;
  atomic_store(&h->reserved, reserved);
  h->pid = getpid();
  h->ppid = getppid();
  h->depth = setup->depth;
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k) {
    h->clock_on[k] = setup->on[k];
    h->freq[k] = setup->freq[k];
  }
  h->start_ns = srec_now();
  h->start_cpu_ns = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
  snprintf(h->program, sizeof h->program, "%s", xpt_program_name());
  ssize_t n = readlink("/proc/self/exe", h->exe, sizeof h->exe - 1);
  h->exe[n > 0 ? n : 0] = '\0';
  atomic_store(&h->flags, setup->flags);
  rec.fd = fd;
  rec.map_size = size;
  rec.meta = NULL;
  rec.nknown = 0;
  rec.adds = rec.subs = ~0ull;
  rec.nspare = 0;
  rec.full = false;
  srec_hdr = h;
  return 0;
}

void srec_flag(uint32_t flag) {
  if (srec_hdr)
    atomic_fetch_or(&srec_hdr->flags, flag);
}

void srec_lost(void) {
  if (srec_hdr)
    atomic_fetch_add_explicit(&srec_hdr->lost, 1, memory_order_relaxed);
}

/* A forked child: the mapping and the lock are the parent's. */
void srec_forget(void) {
  pthread_mutex_unlock(&rec.meta_lock); /* srec_lock'd by the fork's prepare, this thread */
  if (srec_hdr)
    munmap(srec_hdr, rec.map_size);
  srec_hdr = NULL;
  if (rec.fd >= 0)
    close(rec.fd); /* the parent's shared lock stays the parent's */
  rec.fd = -1;
  rec.meta = NULL;
  rec.nknown = 0;
  rec.nspare = 0;
}

void srec_lock(void) { pthread_mutex_lock(&rec.meta_lock); }
void srec_unlock(void) { pthread_mutex_unlock(&rec.meta_lock); }

/* ---- metadata records (under meta_lock) --------------------------------------- */

static void *meta_reserve(size_t size) { return srec_reserve(&rec.meta, size, SREC_OWNER_META); }

void *srec_reserve_meta_locked(size_t size) { return meta_reserve(size); }
void srec_commit_meta_locked(size_t size) { srec_commit(rec.meta, size); }

void srec_thread_locked(enum srec_kind kind, uint32_t index, pid_t tid, uint64_t cpu_ns,
                        const uint64_t weight[SAMPLER_NCLOCKS], bool blocked, const char *name) {
  srec_thread_t *r = meta_reserve(sizeof *r);
  if (!r)
    return;
  memset(r, 0, sizeof *r);
  r->kind = (uint16_t)kind;
  r->size = sizeof *r;
  r->thread = index;
  r->time_ns = srec_now();
  r->tid = tid;
  r->sigprof_blocked = blocked;
  r->cpu_ns = cpu_ns;
  if (weight)
    memcpy(r->weight, weight, sizeof r->weight);
  if (name)
    snprintf(r->name, sizeof r->name, "%s", name);
  srec_commit(rec.meta, sizeof *r);
}

static void map_record_locked(enum srec_kind kind, uint64_t start, uint64_t end, uint64_t offset,
                              uint64_t bias, const char *path, const uint8_t *bid, uint8_t bid_len) {
  /* dlopen("./x.so") leaves a relative name: the launcher reads the file
   * later, maybe from another folder. */
  char full[PATH_MAX];
  if (path[0] && path[0] != '/' && realpath(path, full))
    path = full;
  size_t len = strlen(path) + 1;
  size_t size = (sizeof(srec_map_t) + len + 1 + bid_len + 7) & ~(size_t)7;
  if (size > 8192)
    return;
  srec_map_t *m = meta_reserve(size);
  if (!m)
    return;
  m->kind = (uint16_t)kind;
  m->size = (uint16_t)size;
  m->thread = 0;
  m->time_ns = srec_now();
  m->start = start;
  m->end = end;
  m->offset = offset;
  m->bias = bias;
  memcpy(m->path, path, len);
  /* After the path: the build id's length, then its bytes (srec_map_t). */
  m->path[len] = (char)bid_len;
  if (bid_len)
    memcpy(m->path + len + 1, bid, bid_len);
  srec_commit(rec.meta, size);
}

static uint64_t name_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static bool known_has(uint64_t bias, uint64_t nh) {
  for (size_t i = 0; i < rec.nknown; ++i)
    if (rec.known[i].bias == bias && rec.known[i].name_hash == nh)
      return true;
  return false;
}

static const char *object_path(const char *name) {
  /* The program itself has no name in the list. */
  return name && *name ? name : srec_hdr->exe;
}

/* The executable segments of every loaded object, copied out of
 * dl_iterate_phdr so that no lock of ours is held with the loader's (a
 * library destructor may join a thread that ends in thread_end). */
typedef struct seg {
  uint64_t start, end, offset, bias;
  char *path;
  uint8_t bid_len, bid[SREC_MAX_BUILD_ID];
} seg_t;

typedef struct segs {
  seg_t *v;
  size_t n, cap;
  unsigned long long adds, subs;
} segs_t;

/* The object's GNU build id, from its notes as loaded (no file read):
 * the launcher checks it against the file it reads names from. */
static uint8_t build_id(const struct dl_phdr_info *info, uint8_t *out) {
  for (size_t i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    const unsigned char *end = p + ph->p_memsz;
    while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
      ElfW(Nhdr) n;
      memcpy(&n, p, sizeof n);
      size_t name = (n.n_namesz + 3) & ~(size_t)3, desc = (n.n_descsz + 3) & ~(size_t)3;
      const unsigned char *q = p + sizeof n;
      if (name > (size_t)(end - q) || desc > (size_t)(end - q) - name)
        break;
      if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && memcmp(q, "GNU", 4) == 0 &&
          n.n_descsz > 0 && n.n_descsz <= SREC_MAX_BUILD_ID) {
        memcpy(out, q + name, n.n_descsz);
        return (uint8_t)n.n_descsz;
      }
      p = q + name + desc;
    }
  }
  return 0;
}

static int collect_one(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  segs_t *s = data;
  s->adds = info->dlpi_adds;
  s->subs = info->dlpi_subs;
  uint8_t bid[SREC_MAX_BUILD_ID];
  uint8_t bid_len = build_id(info, bid);
  for (size_t i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
      continue;
    if (s->n == s->cap) {
      size_t cap = s->cap ? 2 * s->cap : 64;
      seg_t *v = realloc(s->v, cap * sizeof *v);
      if (!v)
        return 1;
      s->v = v;
      s->cap = cap;
    }
    char *path = strdup(object_path(info->dlpi_name));
    if (!path)
      return 1;
    seg_t *g = &s->v[s->n++];
    *g = (seg_t){info->dlpi_addr + ph->p_vaddr, info->dlpi_addr + ph->p_vaddr + ph->p_memsz, ph->p_offset,
                 info->dlpi_addr, path, bid_len, {0}};
    memcpy(g->bid, bid, bid_len);
  }
  return 0;
}

/* The loader's counters only: stops at the first object. */
static int counters_only(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  unsigned long long *counters = data;
  counters[0] = info->dlpi_adds;
  counters[1] = info->dlpi_subs;
  return 1;
}

/* One scan at a time, and none across fork: the scan mallocs and walks
 * ld.so's list outside meta_lock, and a child forked meanwhile would
 * inherit those locks held (gcc 12's ASan allocator hung sampler_fork's
 * child every run). */
static pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
void srec_scan_fork_lock(void) { pthread_mutex_lock(&scan_lock); }
void srec_scan_fork_unlock(void) { pthread_mutex_unlock(&scan_lock); }

static void scan_maps_locked(bool force);
void srec_scan_maps(bool force) {
  pthread_mutex_lock(&scan_lock);
  scan_maps_locked(force);
  pthread_mutex_unlock(&scan_lock);
}

static void scan_maps_locked(bool force) {
  if (!srec_hdr)
    return;
  sigset_t old;
  if (!force) {
    unsigned long long counters[2] = {0, 0};
    dl_iterate_phdr(counters_only, counters);
    sampler_block_signals(&old);
    srec_lock();
    bool same = counters[0] == rec.adds && counters[1] == rec.subs;
    srec_unlock();
    sampler_unblock_signals(&old);
    if (same)
      return;
  }
  segs_t s = {0};
  dl_iterate_phdr(collect_one, &s);
  sampler_block_signals(&old);
  srec_lock();
  uint64_t new_bias = 0, new_hash = 0;
  bool have_new = false;
  for (size_t i = 0; i < s.n && srec_hdr; ++i) {
    uint64_t nh = name_hash(s.v[i].path);
    bool same_new = have_new && new_bias == s.v[i].bias && new_hash == nh;
    if (!same_new && known_has(s.v[i].bias, nh))
      continue;
    if (!same_new) {
      if (rec.nknown == rec.capknown) {
        size_t cap = rec.capknown ? rec.capknown * 2 : 64;
        struct known *k = realloc(rec.known, cap * sizeof *k);
        if (!k)
          continue;
        rec.known = k;
        rec.capknown = cap;
      }
      rec.known[rec.nknown].bias = s.v[i].bias;
      rec.known[rec.nknown].name_hash = nh;
      ++rec.nknown;
      have_new = true;
      new_bias = s.v[i].bias;
      new_hash = nh;
    }
    map_record_locked(SREC_MAP, s.v[i].start, s.v[i].end, s.v[i].offset, s.v[i].bias, s.v[i].path, s.v[i].bid,
                      s.v[i].bid_len);
  }
  rec.adds = s.adds;
  rec.subs = s.subs;
  srec_unlock();
  sampler_unblock_signals(&old);
  for (size_t i = 0; i < s.n; ++i)
    free(s.v[i].path);
  free(s.v);
}

/* ---- dlclose: note the object before it goes ------------------------------------ */

typedef int (*dlclose_fn)(void *);

typedef struct find_object {
  uint64_t bias;
  const char *name;
  bool found;
} find_object_t;

static int find_one(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  find_object_t *f = data;
  if (info->dlpi_addr == f->bias && strcmp(info->dlpi_name ? info->dlpi_name : "", f->name) == 0) {
    f->found = true;
    return 1;
  }
  return 0;
}

/* Interposed: a library unloaded before the end keeps its name; the
 * launcher resolves samples taken before the UNMAP time against it.
 * (dlopen is not wrapped: glibc resolves its search path from the
 * caller's address, which a wrapper would change.) */
__attribute__((visibility("default"))) int dlclose(void *handle) {
  static _Atomic(dlclose_fn) real_fn;
  dlclose_fn real = atomic_load(&real_fn);
  if (!real) {
    real = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
    atomic_store(&real_fn, real);
  }
  if (!real)
    return -1;
  struct link_map *lm = NULL;
  void *volatile known_handle = handle; /* declared nonnull; a program may still pass NULL */
  char name[PATH_MAX] = "";
  uint64_t bias = 0;
  bool watch = srec_hdr && known_handle && dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name &&
               lm->l_name[0];
  sigset_t old;
  if (watch) {
    snprintf(name, sizeof name, "%s", lm->l_name);
    bias = lm->l_addr;
    srec_scan_maps(false); /* recorded if it was loaded since the last scan */
  }
  int rc = real(handle);
  if (watch) {
    find_object_t f = {bias, name, false};
    dl_iterate_phdr(find_one, &f);
    sampler_block_signals(&old);
    srec_lock();
    if (!f.found && srec_hdr) {
      map_record_locked(SREC_UNMAP, 0, 0, 0, bias, name, NULL, 0);
      uint64_t nh = name_hash(name);
      for (size_t i = 0; i < rec.nknown; ++i)
        if (rec.known[i].bias == bias && rec.known[i].name_hash == nh)
          rec.known[i] = rec.known[--rec.nknown];
    }
    srec_unlock();
    sampler_unblock_signals(&old);
  }
  return rc;
}

/* ---- threads' chunks ---------------------------------------------------------- */

srec_chunk_t *srec_spare_take_locked(void) { return rec.nspare ? rec.spare[--rec.nspare] : NULL; }

void srec_spare_give_locked(srec_chunk_t *c) {
  if (c && rec.nspare < sizeof rec.spare / sizeof rec.spare[0])
    rec.spare[rec.nspare++] = c;
}

/* Keep twice the chunks in use (and 64 more) reserved on disk. */
void srec_grow_locked(void) {
  srec_header_t *h = srec_hdr;
  if (!h || rec.full)
    return;
  uint32_t used = atomic_load(&h->next_chunk), reserved = atomic_load(&h->reserved);
  uint64_t want = (uint64_t)used * 2 + 64;
  if (want > h->nchunks)
    want = h->nchunks;
  if (want <= reserved)
    return;
  /* A program that closes every descriptor (a daemon) may have given
   * ours to a file of its own: never touch that one. */
  struct stat st;
  if (fstat(rec.fd, &st) != 0 || st.st_dev != rec.dev || st.st_ino != rec.ino) {
    rec.full = true;
    return;
  }
  off_t from = (off_t)(SREC_HEADER_SIZE + (size_t)reserved * h->chunk_size);
  off_t len = (off_t)((size_t)(want - reserved) * h->chunk_size);
  if (fallocate(rec.fd, 0, from, len) != 0) {
    rec.full = true;
    xpt_msg("xptrace: sampler: cannot reserve room for more samples in %s: %s; later samples are "
            "counted as lost", xpt_program_name(), strerror(errno));
    return;
  }
  atomic_store_explicit(&h->reserved, (uint32_t)want, memory_order_release);
}

/* ---- the end -------------------------------------------------------------------- */

void srec_exit_locked(void) {
  srec_header_t *h = srec_hdr;
  if (!h)
    return;
  atomic_store(&h->end_cpu_ns, cpu_now(CLOCK_PROCESS_CPUTIME_ID));
  atomic_store(&h->end_ns, srec_now());
  atomic_fetch_or(&h->flags, SREC_FLAG_EXITED);
}
