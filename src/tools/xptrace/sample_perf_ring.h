/* The perf method's ring buffers, read by a thread of their own
 * (sample_perf_ring.c): the launcher's first unwinding of a program can
 * take a second (libdwfl reading its files), longer than a ring holds
 * when per-CPU events carry every process's samples.  The reader only
 * copies the records of the command's tree; the launcher's main thread
 * takes them in batches, in time order, and does the rest. */
#ifndef XPTRACE_SAMPLE_PERF_RING_H
#define XPTRACE_SAMPLE_PERF_RING_H

#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ring {
  int fd;
  struct perf_event_mmap_page *meta;
  unsigned char *data;
  size_t size, map_size;
  bool switches; /* context-switch event: its samples are retyped XP_RECORD_SWITCH_SAMPLE */
} ring_t;

/* A switch-out sample (sample_perf_offcpu.c), told apart from the
 * cpu-clock samples by its ring; beyond the kernel's record types. */
#define XP_RECORD_SWITCH_SAMPLE 0x7f01

typedef struct batch {
  struct perf_event_header **rec;
  size_t n, cap;
} batch_t;

typedef struct reader {
  ring_t *rings;
  size_t nrings;
  /* per_cpu: events see every process; only the tree's records are kept
   * (the tree grows from the FORK records, before any sample is read). */
  bool per_cpu;
  pid_t *tree;
  size_t ntree, cap_tree;
  pthread_mutex_t lock; /* batch */
  batch_t batch;
  pthread_t thread;
  bool running;
  atomic_bool stop;
} reader_t;

/* `root`: the command's pid, the tree's first process. */
void reader_init(reader_t *r, ring_t *rings, size_t n, bool per_cpu, pid_t root);
/* One more process whose records are kept (attaching). */
void reader_add(reader_t *r, pid_t pid);
/* Start the reading thread; false: the caller reads with reader_poll. */
bool reader_start(reader_t *r);
/* Without the thread (before start, after stop): read every ring once. */
void reader_poll(reader_t *r);
/* The records read so far, sorted by time; the caller frees each and b->rec. */
void reader_take(reader_t *r, batch_t *b);
/* Stop the thread and read what is left. */
void reader_stop(reader_t *r);
void reader_free(reader_t *r);

/* A record's time (sample_id_all's, or a sample's own; switch-out samples too). */
uint64_t perf_record_time(const struct perf_event_header *h);

#endif /* XPTRACE_SAMPLE_PERF_RING_H */
