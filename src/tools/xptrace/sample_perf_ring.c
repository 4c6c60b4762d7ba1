/* The perf method's ring buffers and their reading thread
 * (sample_perf_ring.h). */
#include "sample_perf_ring.h"

#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

uint64_t perf_record_time(const struct perf_event_header *h) {
  const unsigned char *p = (const unsigned char *)h;
  uint64_t t;
  if (h->type == PERF_RECORD_SAMPLE || h->type == XP_RECORD_SWITCH_SAMPLE) { /* after IP and TID */
    memcpy(&t, p + sizeof *h + 16, 8);
    return t;
  }
  if (h->size < sizeof *h + 16)
    return 0;
  memcpy(&t, p + h->size - 8, 8); /* sample_id_all's {pid, tid, time} ends it */
  return t;
}

static bool in_tree(const reader_t *r, pid_t pid) {
  for (size_t i = r->ntree; i-- > 0;)
    if (r->tree[i] == pid)
      return true;
  return false;
}

static void tree_add(reader_t *r, pid_t pid) {
  if (in_tree(r, pid))
    return;
  if (r->ntree == r->cap_tree) {
    size_t cap = r->cap_tree ? 2 * r->cap_tree : 16;
    pid_t *t = realloc(r->tree, cap * sizeof *t);
    if (!t)
      return;
    r->tree = t;
    r->cap_tree = cap;
  }
  r->tree[r->ntree++] = pid;
}

/* n bytes at ring position pos (they may wrap). */
static void ring_peek(const ring_t *r, uint64_t pos, void *out, size_t n) {
  size_t off = pos & (r->size - 1);
  size_t first = r->size - off < n ? r->size - off : n;
  memcpy(out, r->data + off, first);
  memcpy((unsigned char *)out + first, r->data, n - first);
}

/* The tree's new processes from a ring's FORK records {pid, ppid, ...}:
 * every ring is looked at before any is copied (a child's first samples
 * may be on another CPU than its FORK). */
static void ring_forks(reader_t *rd, const ring_t *r) {
  uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
  for (uint64_t tail = r->meta->data_tail; tail + sizeof(struct perf_event_header) <= head;) {
    struct perf_event_header hdr;
    ring_peek(r, tail, &hdr, sizeof hdr);
    if (hdr.size < sizeof hdr || tail + hdr.size > head)
      break;
    uint32_t ids[2];
    if (hdr.type == PERF_RECORD_FORK && hdr.size >= sizeof hdr + sizeof ids) {
      ring_peek(r, tail + sizeof hdr, ids, sizeof ids);
      if (in_tree(rd, (pid_t)ids[1]))
        tree_add(rd, (pid_t)ids[0]);
    }
    tail += hdr.size;
  }
}

/* Whether a record is about the tree: the pid is a sample's second field
 * (after the IP), the first of MMAP2, COMM, FORK and EXIT. */
static bool ours(const reader_t *rd, const ring_t *r, uint64_t tail, const struct perf_event_header *h) {
  size_t at;
  switch (h->type) {
  case PERF_RECORD_SAMPLE: at = 8; break;
  case PERF_RECORD_MMAP2:
  case PERF_RECORD_COMM:
  case PERF_RECORD_FORK:
  case PERF_RECORD_EXIT: at = 0; break;
  default: return true; /* LOST, THROTTLE: counted */
  }
  uint32_t pid;
  if (h->size < sizeof *h + at + sizeof pid)
    return false;
  ring_peek(r, tail + sizeof *h + at, &pid, sizeof pid);
  return in_tree(rd, (pid_t)pid);
}

/* Copy the records out of a ring and free its space. */
static void ring_drain(reader_t *rd, ring_t *r, batch_t *b) {
  uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = r->meta->data_tail;
  while (tail + sizeof(struct perf_event_header) <= head) {
    struct perf_event_header hdr;
    ring_peek(r, tail, &hdr, sizeof hdr);
    if (hdr.size < sizeof hdr || tail + hdr.size > head)
      break;
    if (rd->per_cpu && !ours(rd, r, tail, &hdr)) {
      tail += hdr.size;
      continue;
    }
    struct perf_event_header *copy = malloc(hdr.size);
    if (copy) {
      ring_peek(r, tail, copy, hdr.size);
      if (r->switches && copy->type == PERF_RECORD_SAMPLE)
        copy->type = XP_RECORD_SWITCH_SAMPLE;
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

void reader_init(reader_t *r, ring_t *rings, size_t n, bool per_cpu, pid_t root) {
  memset(r, 0, sizeof *r);
  r->rings = rings;
  r->nrings = n;
  r->per_cpu = per_cpu;
  pthread_mutex_init(&r->lock, NULL);
  tree_add(r, root);
}

void reader_add(reader_t *r, pid_t pid) {
  pthread_mutex_lock(&r->lock);
  tree_add(r, pid);
  pthread_mutex_unlock(&r->lock);
}

void reader_poll(reader_t *r) {
  pthread_mutex_lock(&r->lock);
  /* Until no process is added: a grandchild's FORK may sit on a ring
   * looked at before the one holding its parent's (gcc's collect2 and
   * the ld it starts: ld was lost, samples and all). */
  for (size_t before = SIZE_MAX; r->per_cpu && before != r->ntree;) {
    before = r->ntree;
    for (size_t i = 0; i < r->nrings; ++i)
      ring_forks(r, &r->rings[i]);
  }
  for (size_t i = 0; i < r->nrings; ++i)
    ring_drain(r, &r->rings[i], &r->batch);
  pthread_mutex_unlock(&r->lock);
}

static void *reader_main(void *arg) {
  reader_t *r = arg;
  struct pollfd *pfd = calloc(r->nrings ? r->nrings : 1, sizeof *pfd);
  for (size_t i = 0; pfd && i < r->nrings; ++i)
    pfd[i] = (struct pollfd){.fd = r->rings[i].fd, .events = POLLIN};
  while (!atomic_load(&r->stop)) {
    if (pfd)
      poll(pfd, r->nrings, 20);
    reader_poll(r);
  }
  free(pfd);
  return NULL;
}

bool reader_start(reader_t *r) {
  r->running = r->nrings && pthread_create(&r->thread, NULL, reader_main, r) == 0;
  return r->running;
}

static int record_cmp(const void *a, const void *b) {
  uint64_t x = perf_record_time(*(struct perf_event_header *const *)a);
  uint64_t y = perf_record_time(*(struct perf_event_header *const *)b);
  return x < y ? -1 : x > y;
}

void reader_take(reader_t *r, batch_t *b) {
  pthread_mutex_lock(&r->lock);
  *b = r->batch;
  memset(&r->batch, 0, sizeof r->batch);
  pthread_mutex_unlock(&r->lock);
  /* A FORK or MMAP2 seen on one CPU comes before the samples that need it
   * on another. */
  if (b->n)
    qsort(b->rec, b->n, sizeof *b->rec, record_cmp);
}

void reader_stop(reader_t *r) {
  if (r->running) {
    atomic_store(&r->stop, true);
    pthread_join(r->thread, NULL);
    r->running = false;
  }
  reader_poll(r);
}

void reader_free(reader_t *r) {
  for (size_t i = 0; i < r->batch.n; ++i)
    free(r->batch.rec[i]);
  free(r->batch.rec);
  free(r->tree);
  pthread_mutex_destroy(&r->lock);
}
