/* Policy flush: the recorder's own thread copies sealed chunks to the
 * spill file and hands them back, so that producers keep writing into the
 * same warm pages (a fresh file page costs the writer a fault, a page
 * clear and the file system's block work: ~2 us, 20 ns per traced call
 * in bench/functions).  When a producer takes a chunk never written, the
 * thread is woken to fault in the next few on the free stack, ahead of
 * the producers.  (Waking it at every sealed chunk instead kept the pages
 * as warm but put its copying beside the producer: +3 to +10 ns per event
 * of wall time on a 2-vCPU guest.)  Producers never wait: with no free
 * chunk, the event is dropped and counted.
 *
 * The recording's disk blocks are reserved (fallocate) an eighth of the
 * buffer at a time, by this thread ahead of the producers (or by a
 * producer that finds none left, rather than drop): a run of many
 * short processes (make, sh) holds an eighth of each one's buffer, not
 * all of it, until the launcher finishes them.  No chunk is handed out
 * before it is reserved, so a full disk is dropped events and a message,
 * never a SIGBUS in a producer. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pt_drain.h"
#include "xpt_env.h"

static struct {
  int spill_fd;
  int rec_fd;    /* the recording, for reserving more */
  dev_t rec_dev; /* what rec_fd must still be (as spill_fd) */
  ino_t rec_ino;
  bool reserve_blocked;      /* the last try found no room (under lock) */
  _Atomic uint64_t reserved; /* chunks [0, reserved) have their blocks */
  dev_t spill_dev;           /* what spill_fd must still be: a program that closes */
  ino_t spill_ino;           /* every descriptor may see the number reused */
  uint8_t *chunks;
  uint32_t chunk_size;
  uint64_t count;
  struct xpt_rec_header *h;
  uint64_t spill_off;
  uint64_t max_size;  /* XPTRACE_MAX_SIZE: spill no further (0: no limit) */
  uint64_t notice_at; /* one line when the spill file passes this (0: said) */
  /* free chunks: a stack of indices under `lock` (producers only try it) */
  pthread_mutex_t lock;
  uint32_t *free_idx;
  uint64_t n_free;
  /* Sealed chunks, kept here rather than read from the chunks: scanning
   * the mapping would fault its pages in (and count them as ours). */
  _Atomic uint8_t *sealed;
  uint8_t *warm; /* written or faulted in before (under lock) */
  bool prefault; /* the kernel can populate ahead (MADV_POPULATE_WRITE) */
  sem_t wake, stopped;
  bool running;
  _Atomic bool alive; /* the thread reached dr_main */
  _Atomic bool stop;
} dr = {.spill_fd = -1, .rec_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static bool dr_reserve_more_locked(void);

static struct xpt_rec_chunk *dr_chunk(uint64_t i) {
  return (struct xpt_rec_chunk *)(dr.chunks + i * dr.chunk_size);
}

static void dr_push(uint64_t index) {
  pthread_mutex_lock(&dr.lock);
  dr.free_idx[dr.n_free++] = (uint32_t)index;
  pthread_mutex_unlock(&dr.lock);
}

/* Called with signals blocked: the lock is never this thread's own. */
uint64_t pt_drain_take(void) {
  pthread_mutex_lock(&dr.lock);
  uint64_t index = UINT64_MAX;
  bool cold = false, unreserved = false;
  /* Chunks never taken lie below every freed one, lowest on top: the top
   * is unreserved only when no reserved chunk is free. */
  if (dr.n_free) {
    uint64_t top = dr.free_idx[dr.n_free - 1];
    /* The drainer fell behind: reserve here rather than drop. */
    if (top >= atomic_load_explicit(&dr.reserved, memory_order_acquire) && !dr.reserve_blocked &&
        dr.rec_fd >= 0)
      dr_reserve_more_locked();
    if (top < atomic_load_explicit(&dr.reserved, memory_order_acquire)) {
      index = top;
      dr.n_free--;
      cold = !dr.warm[index];
      dr.warm[index] = 1; /* written from now on */
    } else {
      unreserved = true;
    }
  }
  bool low = dr.n_free < dr.count / 4;
  pthread_mutex_unlock(&dr.lock);
  /* A cold chunk taken: the next ones are faulted in (and reserved) now,
   * by the drainer. */
  if (low || cold || unreserved)
    sem_post(&dr.wake); /* async-signal-safe */
  return index;
}

void pt_drain_wake(void) {
  if (dr.running)
    sem_post(&dr.wake);
}

/* One chunk image to the end of the spill file; false when the file
 * cannot take it (the chunk stays sealed: the finisher reads it there). */
static bool dr_spill(uint64_t index) {
  struct stat st;
  if (fstat(dr.spill_fd, &st) != 0 || st.st_dev != dr.spill_dev || st.st_ino != dr.spill_ino) {
    atomic_store(&dr.h->disk_full, 2); /* never write into someone else's file */
    return false;
  }
  struct xpt_rec_chunk *c = dr_chunk(index);
  uint32_t bytes = (uint32_t)sizeof *c + atomic_load_explicit(&c->committed, memory_order_acquire);
  if (bytes > dr.chunk_size)
    bytes = dr.chunk_size;
  if (dr.max_size && dr.spill_off + sizeof(struct xpt_rec_spill) + bytes > dr.max_size) {
    atomic_store(&dr.h->disk_full, 3); /* producers drop from here, counted */
    return false;
  }
  if (dr.notice_at && dr.spill_off >= dr.notice_at) {
    char at[24];
    xpt_msg("xpti: perfetto collector: the recording of %s [%d] passed %s and goes on "
            "(XPTRACE_MAX_SIZE or xptrace run --max-size stops it at a size)",
            dr.h->program, (int)dr.h->pid, xpt_size_text(dr.notice_at, at, sizeof at));
    dr.notice_at = 0;
  }
  struct xpt_rec_spill e = {XPT_REC_SPILL_MAGIC,
                            atomic_load_explicit(&c->gen, memory_order_relaxed), bytes,
                            (uint32_t)index};
  struct iovec iov[2] = {{&e, sizeof e}, {c, bytes}};
  size_t want = sizeof e + bytes, done = 0;
  while (done < want) {
    ssize_t w;
    if (done == 0)
      w = pwritev(dr.spill_fd, iov, 2, (off_t)dr.spill_off);
    else if (done < sizeof e)
      w = -1, errno = EIO; /* a header cut short: give up on this one */
    else
      w = pwrite(dr.spill_fd, (const char *)c + (done - sizeof e), want - done,
                 (off_t)(dr.spill_off + done));
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      atomic_store(&dr.h->disk_full, 1);
      return false;
    }
    done += (size_t)w;
  }
  dr.spill_off += want;
  atomic_store_explicit(&dr.h->spilled, dr.spill_off, memory_order_release);
  return true;
}

/* One more step of chunks reserved, under dr.lock; false when the disk
 * has no room (producers then drop until the drainer gets some).  A
 * system call with no state of ours: safe where a producer is a signal
 * handler (its signals are blocked meanwhile). */
static bool dr_reserve_more_locked(void) {
  uint64_t reserved = atomic_load_explicit(&dr.reserved, memory_order_relaxed);
  if (dr.rec_fd < 0 || reserved >= dr.count)
    return false;
  uint64_t step = pt_drain_reserve_step(dr.count);
  uint64_t more = reserved + step < dr.count ? step : dr.count - reserved;
  off_t from = (off_t)(dr.h->header_size + reserved * dr.chunk_size);
  int saved = errno;
  struct stat st;
  if (fstat(dr.rec_fd, &st) != 0 || st.st_dev != dr.rec_dev || st.st_ino != dr.rec_ino) {
    atomic_store(&dr.h->disk_full, 2); /* never grow someone else's file */
    dr.reserve_blocked = true;
    dr.rec_fd = -1;
    errno = saved;
    return false;
  }
  if (fallocate(dr.rec_fd, 0, from, (off_t)(more * dr.chunk_size)) != 0) {
    if (errno == ENOSPC || errno == EDQUOT)
      atomic_store(&dr.h->disk_full, 1); /* said with the events it drops */
    dr.reserve_blocked = true;
    errno = saved;
    return false;
  }
  dr.reserve_blocked = false;
  /* Readers of the recording stop at chunks_used: it covers a chunk
   * before any producer may take it. */
  atomic_store(&dr.h->chunks_used, reserved + more);
  atomic_store_explicit(&dr.reserved, reserved + more, memory_order_release);
  return true;
}

/* Keeps a step of reserved chunks free ahead of the producers.  Every
 * unreserved chunk is free, so the free reserved ones are the others. */
static void dr_reserve_ahead(void) {
  if (atomic_load_explicit(&dr.reserved, memory_order_relaxed) >= dr.count)
    return;
  pthread_mutex_lock(&dr.lock);
  uint64_t reserved = atomic_load_explicit(&dr.reserved, memory_order_relaxed);
  if (dr.n_free - (dr.count - reserved) < pt_drain_reserve_step(dr.count) / 2)
    dr_reserve_more_locked(); /* tried again at the next wake when it fails */
  pthread_mutex_unlock(&dr.lock);
}

static void dr_pass(void) {
  for (uint64_t i = 0; i < dr.count; i++) {
    if (!atomic_load_explicit(&dr.sealed[i], memory_order_acquire))
      continue;
    dr_reserve_ahead(); /* a long pass: producers still find reserved chunks */
    if (!dr_spill(i))
      return; /* full disk: later passes try again */
    atomic_store_explicit(&dr_chunk(i)->state, XPT_REC_FREE, memory_order_release);
    atomic_store_explicit(&dr.sealed[i], 0, memory_order_relaxed);
    dr_push(i);
  }
}

void pt_drain_sealed(uint64_t index) {
  if (dr.sealed && index < dr.count)
    atomic_store_explicit(&dr.sealed[index], 1, memory_order_release);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
enum { DR_WARM_AHEAD = 4 }; /* the top of the free stack: taken next */

/* Faults in the chunks producers take next, here rather than in their
 * hot path.  Populating changes no byte: safe while one is written. */
static void dr_prefault(void) {
  if (!dr.prefault)
    return;
  uint32_t next[DR_WARM_AHEAD];
  uint32_t n = 0;
  uint64_t reserved = atomic_load_explicit(&dr.reserved, memory_order_acquire);
  pthread_mutex_lock(&dr.lock);
  for (uint64_t k = dr.n_free, seen = 0; k-- > 0 && seen < DR_WARM_AHEAD; seen++)
    if (!dr.warm[dr.free_idx[k]] && dr.free_idx[k] < reserved) /* never a hole */
      next[n++] = dr.free_idx[k];
  pthread_mutex_unlock(&dr.lock);
  for (uint32_t i = 0; i < n; i++) {
    if (madvise(dr_chunk(next[i]), dr.chunk_size, MADV_POPULATE_WRITE) != 0) {
      dr.prefault = false; /* an older kernel: producers fault as before */
      return;
    }
    pthread_mutex_lock(&dr.lock);
    dr.warm[next[i]] = 1;
    pthread_mutex_unlock(&dr.lock);
  }
}

static void *dr_main(void *arg) {
  (void)arg;
  atomic_store(&dr.alive, true);
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  while (!atomic_load(&dr.stop)) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 20 * 1000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    dr_reserve_ahead();
    dr_prefault();
    sem_timedwait(&dr.wake, &until);
    dr_pass();
  }
  sem_post(&dr.stopped);
  return NULL;
}

bool pt_drain_start(int spill_fd, int rec_fd, uint8_t *chunks, uint32_t chunk_size, uint64_t count,
                    uint64_t reserved, struct xpt_rec_header *h) {
  dr.free_idx = calloc(count ? count : 1, sizeof *dr.free_idx);
  dr.sealed = calloc(count ? count : 1, sizeof *dr.sealed);
  dr.warm = calloc(count ? count : 1, sizeof *dr.warm);
  if (!dr.free_idx || !dr.sealed || !dr.warm)
    return false;
  dr.spill_fd = spill_fd;
  dr.rec_fd = rec_fd;
  dr.reserve_blocked = false;
  struct stat rst;
  if (fstat(rec_fd, &rst) != 0)
    return false;
  dr.rec_dev = rst.st_dev;
  dr.rec_ino = rst.st_ino;
  atomic_store(&h->chunks_used, reserved);
  atomic_store(&dr.reserved, reserved);
  struct stat st;
  if (fstat(spill_fd, &st) != 0)
    return false;
  dr.spill_dev = st.st_dev;
  dr.spill_ino = st.st_ino;
  dr.chunks = chunks;
  dr.chunk_size = chunk_size;
  dr.count = count;
  dr.h = h;
  dr.spill_off = 0;
  /* Read here, once per recording (a forked child makes its own). */
  dr.max_size = xpt_env_size("XPTRACE_MAX_SIZE", 0);
  dr.notice_at = dr.max_size ? 0 : XPT_RECORDING_NOTICE;
  dr.n_free = 0;
  dr.prefault = true;
  for (uint64_t i = count; i-- > 0;) /* lowest index on top */
    dr.free_idx[dr.n_free++] = (uint32_t)i;
  sem_init(&dr.wake, 0, 0);
  sem_init(&dr.stopped, 0, 0);
  atomic_store(&dr.stop, false);
  atomic_store(&dr.alive, false);
  /* Detached: a forked child (where it does not exist) never joins it. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  dr.running = pthread_create(&thread, &attr, dr_main, NULL) == 0;
  pthread_attr_destroy(&attr);
  /* No thread to reserve ahead: the rest now, or what the disk takes. */
  if (!dr.running) {
    pthread_mutex_lock(&dr.lock);
    while (dr_reserve_more_locked())
      ;
    pthread_mutex_unlock(&dr.lock);
  }
  return true; /* without the thread, chunks are used once: still correct */
}

void pt_drain_stop(void) {
  if (!dr.running)
    return;
  atomic_store(&dr.stop, true);
  sem_post(&dr.wake);
  /* Its pass ends within a chunk copy; a thread stuck on a dead disk is
   * not waited for long (its chunks stay in the recording). */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  while (sem_timedwait(&dr.stopped, &until) != 0 && errno == EINTR)
    ;
  dr.running = false;
}

void pt_drain_fork_child(void) {
  /* The parent's thread and chunks are the parent's. */
  pthread_mutex_unlock(&dr.lock); /* held since pt_drain_fork_prepare, by this thread */
  free(dr.free_idx);
  free((void *)dr.sealed);
  free(dr.warm);
  dr.free_idx = NULL;
  dr.sealed = NULL;
  dr.warm = NULL;
  dr.n_free = dr.count = 0;
  dr.running = false;
  if (dr.spill_fd >= 0)
    close(dr.spill_fd);
  dr.spill_fd = -1;
  dr.rec_fd = -1; /* the parent's recording: the collector closes it */
  atomic_store(&dr.reserved, 0);
}

/* A fork while the thread is still starting could copy a lock its start
 * holds (a sanitizer's allocator takes one there, and nothing releases it
 * in the child): wait for the start, a few microseconds, at most 1 s. */
void pt_drain_fork_prepare(void) {
  for (int i = 0; dr.running && !atomic_load(&dr.alive) && i < 10000; i++) {
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
  pthread_mutex_lock(&dr.lock);
}
void pt_drain_fork_parent(void) { pthread_mutex_unlock(&dr.lock); }
