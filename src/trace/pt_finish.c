/* The finisher: reads a recording (xpt_rec.h) through a read-only
 * mapping, rebuilds each thread's records in order and feeds them to the
 * encoders.  The trace is written to a temporary name and then linked
 * into place, so a trace file is either complete or absent: a failed
 * write (full disk) keeps the recording for a later try. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "pt_finish_internal.h"
#include "xpt_msg.h"
#include "xpt_finish.h"
#include "xpt_clock_correct.h"

enum pt_format pt_format;
struct pt_process pt_proc;

/* ---- clock ---------------------------------------------------------------- */

struct pt_rclock pt_rclock;

PT_HIDDEN uint64_t fin_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The slope runs from the recorder's set-up point to now: the finisher
 * runs on the same machine, whose TSC is invariant (checked at set-up).
 * An MPI rank run with XPTRACE_MPI_TEST_CLOCK_OFFSET_NS is shown skewed
 * by that much, as a host's would be (tests of the clock correction;
 * xpt_clock_correct.h): set by the caller after this. */
static void fin_clock_setup(const struct xpt_rec_header *h) {
  struct pt_rclock *c = &pt_rclock;
  c->tsc = h->clock == XPT_REC_CLOCK_TSC;
  c->base = h->tsc_base;
  c->base_ns = h->tsc_base_ns;
  c->ns_per_tick = 1.0;
  c->skew_ns = 0;
#if defined(__x86_64__)
  if (c->tsc) {
    uint64_t t0 = __rdtsc(), ns = fin_mono_ns(), t1 = __rdtsc();
    uint64_t now = t0 + (t1 - t0) / 2;
    if (now > c->base && ns > c->base_ns)
      c->ns_per_tick = (double)(ns - c->base_ns) / (double)(now - c->base);
  }
#else
  c->tsc = false;
#endif
}

/* ---- descriptions: uid -> pt_desc ----------------------------------------- */

static struct pt_desc **fin_descs;
static size_t fin_descs_cap, fin_descs_n;

static size_t fin_desc_slot(uint64_t uid) {
  size_t j = (size_t)(uid * 0x9e3779b97f4a7c15ull) & (fin_descs_cap - 1);
  while (fin_descs[j] && fin_descs[j]->ev.unique_id != uid)
    j = (j + 1) & (fin_descs_cap - 1);
  return j;
}

PT_HIDDEN const xpti_trace_event_data_t *fin_desc_find(uint64_t uid) {
  if (!uid || !fin_descs_cap)
    return NULL;
  struct pt_desc *d = fin_descs[fin_desc_slot(uid)];
  return d ? &d->ev : NULL;
}

static void fin_desc_free_all(void) {
  for (size_t i = 0; i < fin_descs_cap; i++)
    free(fin_descs[i]);
  free(fin_descs);
  fin_descs = NULL;
  fin_descs_cap = fin_descs_n = 0;
}

/* One allocation holds the description, its strings and its metadata. */
PT_HIDDEN void fin_desc_add(uint64_t uid, const uint8_t *p, uint32_t len) {
  struct xpt_rec_desc d;
  if (!uid || len < sizeof d)
    return;
  memcpy(&d, p, sizeof d);
  size_t strings = (size_t)d.name_len + d.file_len;
  if (sizeof d + strings + d.meta_len > len)
    return; /* damaged */
  if ((fin_descs_n + 1) * 2 > fin_descs_cap) {
    size_t cap = fin_descs_cap ? fin_descs_cap * 2 : 256;
    struct pt_desc **t = calloc(cap, sizeof *t);
    if (!t)
      return;
    struct pt_desc **old = fin_descs;
    size_t old_cap = fin_descs_cap;
    fin_descs = t;
    fin_descs_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i])
        fin_descs[fin_desc_slot(old[i]->ev.unique_id)] = old[i];
    free(old);
  }
  size_t j = fin_desc_slot(uid);
  if (fin_descs[j] && fin_descs[j]->meta_count >= d.meta_count)
    return; /* known, and its metadata has not grown */
  struct pt_desc *x = calloc(1, sizeof *x + strings + 2 + d.meta_len);
  if (!x)
    return;
  char *name = (char *)(x + 1), *file = name + d.name_len + 1;
  uint8_t *meta = (uint8_t *)file + d.file_len + 1;
  memcpy(name, p + sizeof d, d.name_len);
  memcpy(file, p + sizeof d + d.name_len, d.file_len);
  memcpy(meta, p + sizeof d + strings, d.meta_len);
  x->payload.name = d.name_len ? name : NULL;
  x->payload.source_file = d.file_len ? file : NULL;
  x->payload.line_no = d.line;
  x->payload.column_no = d.column;
  x->payload.flags = d.payload_flags;
  x->payload.internal = uid;
  x->ev.unique_id = uid;
  x->ev.source_id = d.source_id;
  x->ev.target_id = d.target_id;
  x->ev.event_type = d.event_type;
  x->ev.activity_type = d.activity_type;
  x->ev.flags = d.event_flags;
  x->ev.reserved.payload = &x->payload;
  x->meta = meta;
  x->meta_len = d.meta_len;
  x->meta_count = d.meta_count;
  if (fin_descs[j])
    free(fin_descs[j]);
  else
    fin_descs_n++;
  fin_descs[j] = x;
}

/* ---- files ------------------------------------------------------------------ */

/* "events.xprec" -> "trace.perfetto-trace", "events.2.xprec" -> "trace.2.perfetto-trace" */
static void fin_trace_name(const char *rec, bool json, char *buf, size_t len) {
  const char *ext = json ? "json" : "perfetto-trace";
  const char *mid = rec + strlen("events");
  size_t mid_len = strlen(mid) - strlen(".xprec");
  snprintf(buf, len, "trace%.*s.%s", (int)mid_len, mid, ext);
}

/* Put the finished temporary file in place under `want`, or a new name
 * when that is taken (never replacing a file). */
static int fin_publish(int dirfd, const char *tmp, const char *want, char *got, size_t len) {
  const char *dot = strchr(want, '.');
  size_t stem = dot ? (size_t)(dot - want) : strlen(want);
  for (int n = 0; n < 1000; n++) {
    if (n == 0)
      snprintf(got, len, "%s", want);
    else
      snprintf(got, len, "%.*s-%d%s", (int)stem, want, n, dot ? dot : "");
    if (renameat2(dirfd, tmp, dirfd, got, RENAME_NOREPLACE) == 0)
      return 0;
    if (errno == EEXIST)
      continue;
    if (errno != EINVAL && errno != ENOSYS)
      return errno;
    if (linkat(dirfd, tmp, dirfd, got, 0) == 0) { /* no RENAME_NOREPLACE here */
      unlinkat(dirfd, tmp, 0);
      return 0;
    }
    if (errno != EEXIST)
      return errno;
  }
  return EEXIST;
}

static bool fin_header_ok(const struct xpt_rec_header *h, size_t size) {
  return size >= XPT_REC_HEADER_SIZE && h->magic == XPT_REC_MAGIC &&
         h->version == XPT_REC_VERSION && h->header_size == XPT_REC_HEADER_SIZE &&
         h->chunk_size >= XPT_REC_CHUNK_MIN && h->chunk_size % 4096 == 0;
}

static void fin_reset(void) {
  pt_pair_threads_reset();
  pt_dev_reset();
  pt_handoff_reset();
  pt_str_reset();
  pt_encoders_reset();
  fin_desc_free_all();
}

/* Whether the process that made the recording on fd is gone. */
static bool fin_owner_dead(int fd) {
  struct xpt_rec_header h;
  if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || h.magic != XPT_REC_MAGIC || h.pid <= 0)
    return false;
  return kill(h.pid, 0) != 0 && errno == ESRCH;
}

int xpt_finish_recording(const char *dir, const char *name, const char *prefix,
                         struct xpt_finish_result *res) {
  memset(res, 0, sizeof *res);
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    xpt_msg("%s cannot open '%s': %s", prefix, dir, strerror(errno));
    return -1;
  }
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int e = errno;
    close(dirfd);
    if (e == ENOENT)
      return 1;
    xpt_msg("%s cannot open '%s/%s': %s", prefix, dir, name, strerror(e));
    return -1;
  }
  /* One finisher per recording, and none while its process lives (it
   * holds a shared lock): a lock goes with its holder's death.  A child
   * forked just before its parent died holds the parent's lock until its
   * fork handler closes the inherited descriptor: wait for that. */
  bool locked = flock(fd, LOCK_EX | LOCK_NB) != 0;
  for (int i = 0; locked && i < 200 && fin_owner_dead(fd); i++) {
    struct timespec pause = {0, 10 * 1000000};
    nanosleep(&pause, NULL);
    locked = flock(fd, LOCK_EX | LOCK_NB) != 0;
  }
  if (locked) {
    struct xpt_rec_header h;
    if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && h.magic == XPT_REC_MAGIC) {
      res->pid = h.pid;
      memcpy(res->program, h.program, sizeof res->program);
      res->program[sizeof res->program - 1] = '\0';
    }
    snprintf(res->trace, sizeof res->trace, "%s", dir);
    res->busy = true;
    close(fd);
    close(dirfd);
    return 2;
  }
  struct stat st;
  int rc = -1;
  struct fin f;
  memset(&f, 0, sizeof f);
  f.fd = -1;
  char tmp[320] = "", trace[256];
  if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
    rc = 1; /* another finisher had it first and removed it (a shared -o) */
    goto out;
  }
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < XPT_REC_HEADER_SIZE) {
    xpt_msg("%s '%s/%s' is not a recording (too short)", prefix, dir, name);
    goto out;
  }
  f.map_len = (size_t)st.st_size;
  f.map = mmap(NULL, f.map_len, PROT_READ, MAP_SHARED, fd, 0);
  if (f.map == MAP_FAILED) {
    f.map = NULL;
    xpt_msg("%s cannot map '%s/%s': %s", prefix, dir, name, strerror(errno));
    goto out;
  }
  f.h = (const struct xpt_rec_header *)f.map;
  if (!fin_header_ok(f.h, f.map_len)) {
    xpt_msg("%s '%s/%s' is not a recording of this version", prefix, dir, name);
    goto out;
  }
  if (atomic_load(&((struct xpt_rec_header *)f.h)->state) == XPT_REC_DONE) {
    rc = 1;
    goto out;
  }
  fin_reset();
  pt_format = f.h->format == XPT_REC_FORMAT_JSON ? PT_FORMAT_JSON : PT_FORMAT_PROTO;
  fin_enc = pt_format == PT_FORMAT_JSON ? &pt_json_encoder : &pt_proto_encoder;
  pt_annotate_all = f.h->annotate_all != 0;
  memset(&pt_proc, 0, sizeof pt_proc);
  pt_proc.pid = f.h->pid;
  pt_proc.start_ns = f.h->start_ns;
  pt_proc.forked = f.h->forked != 0;
  memcpy(pt_proc.program, f.h->program, sizeof pt_proc.program);
  pt_proc.program[sizeof pt_proc.program - 1] = '\0';
  pt_proc.stream_names = (const char *)f.map + XPT_REC_STREAMS_OFF;
  pt_proc.tool_names = (const char *)f.map + XPT_REC_TOOLS_OFF;
  pt_kind_reset();
  fin_clock_setup(f.h);
  /* An MPI rank (the MPI layer's mpi-clock file): named by rank. */
  struct xpt_mpi_clock mc;
  if (xpt_mpi_clock_find(dir, f.h->pid, &mc) == 0) {
    pt_rclock.skew_ns = mc.test_offset_ns;
    char suffix[32];
    int n = snprintf(suffix, sizeof suffix, " rank %d/%d", mc.rank, mc.size);
    size_t keep = sizeof pt_proc.program - 1 - (size_t)n, len = strlen(pt_proc.program);
    memcpy(pt_proc.program + (len < keep ? len : keep), suffix, (size_t)n + 1);
  }

  /* Chunks copied out to the spill file first (whole entries only), then
   * those still in the ring that were not (their generation tells). */
  fin_read_spill(&f, dirfd, name);
  uint64_t chunks = (f.map_len - XPT_REC_HEADER_SIZE) / f.h->chunk_size;
  uint64_t written = atomic_load(&((struct xpt_rec_header *)f.h)->chunks_used);
  if (f.h->policy == XPT_REC_FLUSH && written && written < chunks)
    chunks = written; /* the rest were never handed out (holes) */
  for (uint64_t i = 0; i < chunks; i++) {
    const struct xpt_rec_chunk *c =
        (const struct xpt_rec_chunk *)(f.map + XPT_REC_HEADER_SIZE + i * f.h->chunk_size);
    if (c->magic != XPT_REC_CHUNK_MAGIC) {
      fin_release(&f, c, sizeof *c); /* never used */
      continue;
    }
    /* Copied out (free or not): read there.  A free chunk whose copy is
     * not in the part of the spill file read here is read from the ring,
     * where it still is (not reused: it would have a new generation). */
    if (fin_spilled(&f, atomic_load(&((struct xpt_rec_chunk *)c)->gen))) {
      fin_release(&f, c, sizeof *c); /* its header was read */
      continue;
    }
    uint64_t gen = atomic_load(&((struct xpt_rec_chunk *)c)->gen);
    fin_release(&f, c, sizeof *c); /* mapped again in its turn */
    fin_ref_add(&f, gen, c, f.h->chunk_size - (uint32_t)sizeof *c);
  }
  fin_scan_refs(&f);

  fin_trace_name(name, pt_format == PT_FORMAT_JSON, trace, sizeof trace);
  snprintf(tmp, sizeof tmp, ".%s.tmp-%d", trace, (int)getpid());
  unlinkat(dirfd, tmp, 0); /* our own leftover, if any */
  f.fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (f.fd < 0) {
    xpt_msg("%s cannot create '%s/%s': %s", prefix, dir, tmp, strerror(errno));
    tmp[0] = '\0';
    goto out;
  }
  fin_encode(&f);
  if (!f.failed && fsync(f.fd) != 0 && errno != EINVAL) {
    f.failed = true;
    f.err = errno;
  }
  if (f.failed) {
    xpt_msg("%s cannot write the trace of '%s/%s': %s; the recording is kept", prefix,
            dir, name, strerror(f.err));
    goto out;
  }
  char got[256];
  int e = fin_publish(dirfd, tmp, trace, got, sizeof got);
  if (e) {
    xpt_msg("%s cannot name the trace '%s/%s': %s; the recording is kept", prefix, dir,
            trace, strerror(e));
    goto out;
  }
  tmp[0] = '\0';
  snprintf(res->trace, sizeof res->trace, "%s/%s", dir, got);
  res->pid = f.h->pid;
  memcpy(res->program, pt_proc.program, sizeof res->program);
  res->records = f.records;
  res->dropped = atomic_load(&((struct xpt_rec_header *)f.h)->dropped) + f.damaged;
  res->unpaired = f.unpaired;
  res->disk_full = (int)atomic_load(&((struct xpt_rec_header *)f.h)->disk_full);
  unlinkat(dirfd, name, 0);
  char spill_name[300];
  snprintf(spill_name, sizeof spill_name, "%s%s", name, XPT_REC_SPILL_SUFFIX);
  unlinkat(dirfd, spill_name, 0);
  rc = 0;
out:
  if (f.fd >= 0)
    close(f.fd);
  if (tmp[0])
    unlinkat(dirfd, tmp, 0);
  if (f.map)
    munmap((void *)f.map, f.map_len);
  if (f.spill)
    munmap((void *)f.spill, f.spill_len);
  free(f.spilled_gens);
  free(f.refs);
  free(f.segs);
  free(f.graph);
  free(f.out.data);
  fin_reset();
  close(fd);
  close(dirfd);
  return rc;
}

static bool fin_is_recording(const char *n) {
  size_t len = strlen(n);
  return len >= 12 && !strncmp(n, "events", 6) && !strcmp(n + len - 6, ".xprec");
}

static int fin_tree(const char *dir, const char *prefix, int depth,
                    void (*each)(const struct xpt_finish_result *, void *), void *ctx) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int written = 0;
  bool failed = false;
  struct dirent *e;
  char sub[4096];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    if (e->d_type == DT_DIR && depth < 16) {
      snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
      int n = fin_tree(sub, prefix, depth + 1, each, ctx);
      failed |= n < 0;
      written += n > 0 ? n : 0;
    } else if (e->d_type == DT_REG && fin_is_recording(e->d_name)) {
      struct xpt_finish_result res;
      int rc = xpt_finish_recording(dir, e->d_name, prefix, &res);
      if (rc == 0)
        written++;
      if ((rc == 0 || rc == 2) && each)
        each(&res, ctx);
      failed |= rc < 0;
    }
  }
  closedir(d);
  return failed ? -1 : written;
}

int xpt_finish_tree(const char *dir, const char *prefix,
                    void (*each)(const struct xpt_finish_result *, void *), void *ctx) {
  return fin_tree(dir, prefix, 0, each, ctx);
}
