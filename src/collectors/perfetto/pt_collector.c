/* libxpti_perfetto.so: records every notification into per-thread buffers
 * (no lock, never waits) and turns them into a Perfetto or Chrome JSON
 * trace in a writer: a background thread (policy "flush") and the flush
 * hooks (exit, signals, xptiFinalize of the last stream). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pt_internal.h"
#include "xpt_collector.h"
#include "xptrace/xptrace_protocol.h"

struct pt_thread *_Atomic pt_threads;
enum pt_format pt_format;
struct pt_process pt_proc;

static enum pt_policy pt_policy;
static uint64_t pt_budget;
static uint32_t pt_chunk_cap;
static _Atomic uint64_t pt_in_use;
static _Atomic uint32_t pt_thread_count;
static _Atomic uint64_t pt_dropped_global; /* no thread state could be made */
static pthread_key_t pt_key;
static pthread_once_t pt_once = PTHREAD_ONCE_INIT;
/* Two small initial-exec TLS pointers (PERF.md): the current chunk, read
 * by the hot path, and the thread's state, read by the slow paths. */
static __thread struct pt_chunk *pt_tls_chunk __attribute__((tls_model("initial-exec")));
static __thread struct pt_thread *pt_tls __attribute__((tls_model("initial-exec")));
/* Types the hot path leaves to the slow one, by low byte (set before any
 * callback is registered): edge_create (node instances are read) and the
 * xptrace timed slice (inline times and names).  Other types sharing a
 * low byte take the slow path too and are recorded as usual. */
static uint8_t pt_slow_type[256];
static uint16_t pt_timed_type; /* 0: the framework gave none */
static _Atomic bool pt_timed_bad_reported;

/* ---- the hot path ------------------------------------------------------ */

static inline uint64_t pt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pt_writer_wake(void);
static bool pt_next_chunk(struct pt_thread *t);
static struct pt_thread *pt_thread_new(void);


/* Everything but the common case: no thread state or chunk yet, a full
 * chunk, a NULL event (maybe with an inline name). */
static __attribute__((noinline)) void pt_record_slow(bool tsc, uint8_t stream, uint16_t type,
                                                     const xpti_trace_event_data_t *event,
                                                     uint64_t instance, const void *user_data) {
  struct pt_thread *t = pt_tls;
  if (!t) {
    t = pt_thread_new();
    if (!t) {
      atomic_fetch_add_explicit(&pt_dropped_global, 1, memory_order_relaxed);
      return;
    }
  }
  uint32_t name_len = 0;
  uint8_t inline_kind = PT_INLINE_NAME;
  const char *name = NULL;
  struct pt_timed_inline timed = {0, 0, 0, 0, 0, 0};
  struct pt_edge_inline edge = {0, 0};
  const xptrace_timed_slice_t *slice = NULL;
  if (type == pt_timed_type && pt_timed_type) {
    slice = user_data;
    if (!slice) {
      if (!atomic_exchange(&pt_timed_bad_reported, true))
        fprintf(stderr, "xpti: perfetto collector: timed slice without user data ignored\n");
      return;
    }
    timed = (struct pt_timed_inline){slice->begin_ns, slice->end_ns, slice->track_id, 0, 0, 0};
    if (slice->track_name)
      timed.track_name_len = (uint16_t)strnlen(slice->track_name, PT_NAME_MAX);
    if (slice->name)
      timed.name_len = (uint16_t)strnlen(slice->name, PT_NAME_MAX);
    inline_kind = PT_INLINE_TIMED;
    name_len = (uint32_t)sizeof timed + timed.track_name_len + timed.name_len;
  } else if (type == XPTI_TRACE_EDGE_CREATE && event) {
    /* Which visits of the two nodes the edge joins: their latest. */
    const xpti_trace_event_data_t *from = xptiFindEvent(event->source_id);
    const xpti_trace_event_data_t *to = xptiFindEvent(event->target_id);
    edge.source_instance = from ? __atomic_load_n(&from->instance_id, __ATOMIC_RELAXED) : 0;
    edge.target_instance = to ? __atomic_load_n(&to->instance_id, __ATOMIC_RELAXED) : 0;
    inline_kind = PT_INLINE_EDGE;
    name_len = (uint32_t)sizeof edge;
  } else if (event == NULL && (type & 1) == 0) {
    /* Without an event, begins and instants take the name their user
     * data carries (function names); ends need none. */
    name = xpti_user_data_name(type, user_data);
    if (name)
      name_len = (uint32_t)strnlen(name, PT_NAME_MAX);
  }
  uint32_t size = pt_rec_size(name_len);
  uint64_t ts = tsc ? pt_ticks() : pt_now();
  struct pt_chunk *c = t->cur;
  uint32_t off = c ? atomic_load_explicit(&c->committed, memory_order_relaxed) : 0;
  if (!c || c->cap - off < size) {
    if (!pt_next_chunk(t)) {
      atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
      return;
    }
    c = t->cur;
    off = 0;
  }
  struct pt_rec *r = (struct pt_rec *)(c->data + off);
  r->ts = ts;
  r->event = event;
  r->instance = instance;
  r->type = type;
  r->stream = stream;
  r->pad = inline_kind;
  r->name_len = name_len;
  char *extra = (char *)(r + 1);
  if (inline_kind == PT_INLINE_TIMED) {
    memcpy(extra, &timed, sizeof timed);
    if (timed.track_name_len)
      memcpy(extra + sizeof timed, slice->track_name, timed.track_name_len);
    if (timed.name_len)
      memcpy(extra + sizeof timed + timed.track_name_len, slice->name, timed.name_len);
  } else if (inline_kind == PT_INLINE_EDGE) {
    memcpy(extra, &edge, sizeof edge);
  } else if (name_len) {
    memcpy(extra, name, name_len);
  }
  atomic_store_explicit(&c->committed, off + size, memory_order_release);
}

/* The common case: one TLS load, a bounds check, the timestamp, four
 * stores of the record and the release store that publishes it. */
static inline __attribute__((always_inline)) void
pt_record(bool tsc, uint8_t stream, uint16_t type, const xpti_trace_event_data_t *event,
          uint64_t instance, const void *user_data) {
  struct pt_chunk *c = pt_tls_chunk;
  if (__builtin_expect(c != NULL && event != NULL && !pt_slow_type[type & 0xff], 1)) {
    uint32_t off = atomic_load_explicit(&c->committed, memory_order_relaxed);
    if (__builtin_expect(off <= c->cap - (uint32_t)sizeof(struct pt_rec), 1)) {
      struct pt_rec *r = (struct pt_rec *)(c->data + off);
      r->ts = tsc ? pt_ticks() : pt_now();
      r->event = event;
      r->instance = instance;
      r->word = pt_rec_word(type, stream, 0);
      atomic_store_explicit(&c->committed, off + (uint32_t)sizeof(struct pt_rec),
                            memory_order_release);
      return;
    }
  }
  pt_record_slow(tsc, stream, type, event, instance, user_data);
}

/* One callback per stream receives every trace type, user-defined ones
 * registered at any time included; the clock is chosen at registration. */
static void pt_stream_cb_tsc(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                             xpti_trace_event_data_t *event, uint64_t instance,
                             const void *user_data) {
  (void)parent;
  pt_record(true, stream, type, event, instance, user_data);
}

static void pt_stream_cb_mono(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                              xpti_trace_event_data_t *event, uint64_t instance,
                              const void *user_data) {
  (void)parent;
  pt_record(false, stream, type, event, instance, user_data);
}

/* ---- the slow paths of recording --------------------------------------- */

static void pt_thread_exit(void *p) {
  struct pt_thread *t = p;
  if (pt_tls == t) {
    pt_tls = NULL; /* a later record (another destructor) starts afresh */
    pt_tls_chunk = NULL;
  }
  atomic_store_explicit(&t->exited, 1, memory_order_release);
}

static struct pt_thread *pt_thread_new(void) {
  struct pt_thread *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->pid = getpid();
  t->tid = (pid_t)syscall(SYS_gettid);
  if (t->tid == t->pid)
    snprintf(t->name, sizeof t->name, "%s", xpt_program_name());
  else if (pthread_getname_np(pthread_self(), t->name, sizeof t->name) != 0)
    t->name[0] = '\0';
  t->index = atomic_fetch_add_explicit(&pt_thread_count, 1, memory_order_relaxed) + 1;
  struct pt_thread *head = atomic_load_explicit(&pt_threads, memory_order_relaxed);
  do
    t->next_all = head;
  while (!atomic_compare_exchange_weak_explicit(&pt_threads, &head, t, memory_order_release,
                                                memory_order_relaxed));
  pt_tls = t;
  pthread_setspecific(pt_key, t);
  return t;
}

static uint32_t pt_count_records(const struct pt_chunk *c, uint32_t from, uint32_t to) {
  uint32_t n = 0;
  while (from < to) {
    const struct pt_rec *r = (const struct pt_rec *)(c->data + from);
    from += pt_rec_size(r->name_len);
    n++;
  }
  return n;
}

/* Ring policy: reuse this thread's oldest sealed chunk; what it still held
 * is dropped.  Never waits: when the writer holds the thread, give up. */
static struct pt_chunk *pt_recycle(struct pt_thread *t) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&t->owner, &expected, 1))
    return NULL;
  struct pt_chunk *old = atomic_load_explicit(&t->head,
                                              memory_order_relaxed);
  struct pt_chunk *c = NULL;
  if (old && old != t->cur) {
    uint32_t committed = atomic_load_explicit(&old->committed, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->dropped, pt_count_records(old, old->consumed, committed),
                              memory_order_relaxed);
    atomic_store_explicit(&t->head, atomic_load_explicit(&old->next, memory_order_relaxed),
                          memory_order_relaxed);
    c = old;
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&c->committed, 0, memory_order_relaxed);
    c->consumed = 0;
  }
  atomic_store_explicit(&t->owner, 0, memory_order_release);
  return c;
}

/* Chunks the writer has encoded wait here for the next producer: their
 * pages are mapped and maybe cached, where fresh memory costs a page fault
 * every 128 records.  Producers only try the lock: they never wait.  The
 * pool's chunks count against the budget. */
#define PT_POOL_MAX 64
static pthread_mutex_t pt_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pt_chunk *pt_pool;
static unsigned pt_pool_n;

static struct pt_chunk *pt_pool_take(void) {
  if (pthread_mutex_trylock(&pt_pool_lock) != 0)
    return NULL;
  struct pt_chunk *c = pt_pool;
  if (c) {
    pt_pool = atomic_load_explicit(&c->next, memory_order_relaxed);
    pt_pool_n--;
  }
  pthread_mutex_unlock(&pt_pool_lock);
  if (c) {
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&c->committed, 0, memory_order_relaxed);
    c->consumed = 0;
  }
  return c;
}

/* Writer: keep c for reuse, or give it back. */
static void pt_pool_give(struct pt_chunk *c) {
  pthread_mutex_lock(&pt_pool_lock);
  bool kept = pt_pool_n < PT_POOL_MAX && c->cap == pt_chunk_cap;
  if (kept) {
    atomic_store_explicit(&c->next, pt_pool, memory_order_relaxed);
    pt_pool = c;
    pt_pool_n++;
  }
  pthread_mutex_unlock(&pt_pool_lock);
  if (!kept) {
    atomic_fetch_sub_explicit(&pt_in_use, sizeof *c + c->cap, memory_order_relaxed);
    free(c);
  }
}

/* A record (<= 32 + 256 bytes) always fits an empty chunk. */
static bool pt_next_chunk(struct pt_thread *t) {
  size_t bytes = sizeof(struct pt_chunk) + pt_chunk_cap;
  struct pt_chunk *c = pt_pool_take();
  if (c)
    goto link;
  uint64_t used = atomic_fetch_add_explicit(&pt_in_use, bytes, memory_order_relaxed);
  if (used + bytes <= pt_budget)
    c = malloc(bytes);
  if (c) {
    atomic_init(&c->next, NULL);
    atomic_init(&c->committed, 0);
    c->consumed = 0;
    c->cap = pt_chunk_cap;
  } else {
    atomic_fetch_sub_explicit(&pt_in_use, bytes, memory_order_relaxed);
    if (pt_policy == PT_POLICY_RING && t->cur)
      c = pt_recycle(t);
    if (!c) {
      if (pt_policy == PT_POLICY_FLUSH)
        pt_writer_wake();
      return false;
    }
  }
link:
  if (t->cur)
    atomic_store_explicit(&t->cur->next, c, memory_order_release);
  else
    atomic_store_explicit(&t->head, c, memory_order_release);
  t->cur = c;
  pt_tls_chunk = c;
  if (pt_policy == PT_POLICY_FLUSH)
    pt_writer_wake();
  return true;
}

/* ---- clock: raw TSC ticks in the hot path, MONOTONIC ns in the file ---- */
/* Ticks become ns at write time: the slope comes from the longest interval
 * known (set-up to this pass), the offset from a point taken at this pass,
 * so records near the pass are exact and NTP slewing between passes does
 * not accumulate. */

struct pt_clock_point {
  uint64_t tsc, ns;
};
static bool pt_use_tsc;
static struct pt_clock_point pt_clock_base, pt_clock_anchor;
static double pt_ns_per_tick = 1.0;

/* TSC ticks at a constant rate through frequency changes and idle states. */
static bool pt_tsc_invariant(void) {
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f)
    return false;
  char *line = NULL;
  size_t cap = 0;
  bool constant = false, nonstop = false;
  while (getline(&line, &cap, f) > 0) {
    if (strncmp(line, "flags", 5) != 0)
      continue;
    for (char *tok = strtok(line + 5, " \t\n:"); tok; tok = strtok(NULL, " \t\n"))
      constant |= !strcmp(tok, "constant_tsc"), nonstop |= !strcmp(tok, "nonstop_tsc");
    break; /* the first CPU speaks for all */
  }
  free(line);
  fclose(f);
  return constant && nonstop;
}

/* A (ticks, ns) pair read as close together as a few tries allow. */
static struct pt_clock_point pt_clock_point_read(void) {
  struct pt_clock_point best = {0, 0};
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = pt_ticks(), ns = pt_now(), t1 = pt_ticks();
    if (t1 - t0 < best_gap) {
      best_gap = t1 - t0;
      best = (struct pt_clock_point){t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

static void pt_clock_setup(void) {
  const char *mode = getenv("XPTRACE_CLOCK");
  bool want_tsc = true;
  if (mode && !strcmp(mode, "monotonic"))
    want_tsc = false;
  else if (mode && *mode && strcmp(mode, "auto"))
    fprintf(stderr, "xpti: XPTRACE_CLOCK='%s' is not auto or monotonic; using auto\n", mode);
  pt_use_tsc = PT_HAVE_TSC && want_tsc && pt_tsc_invariant();
  if (pt_use_tsc)
    pt_clock_anchor = pt_clock_base = pt_clock_point_read();
}

/* Called by the writer before each pass. */
static void pt_clock_calibrate(void) {
  if (!pt_use_tsc)
    return;
  /* A slope from less than 1 ms would be coarse: wait that long once. */
  while (pt_now() < pt_clock_base.ns + 1000000)
    ;
  struct pt_clock_point p = pt_clock_point_read();
  if (p.tsc > pt_clock_base.tsc && p.ns > pt_clock_base.ns) {
    pt_ns_per_tick = (double)(p.ns - pt_clock_base.ns) / (double)(p.tsc - pt_clock_base.tsc);
    pt_clock_anchor = p;
  }
}

static uint64_t pt_clock_ns(uint64_t raw) {
  if (!pt_use_tsc)
    return raw;
  double d = (double)(int64_t)(raw - pt_clock_anchor.tsc) * pt_ns_per_tick;
  int64_t ns = (int64_t)pt_clock_anchor.ns + (int64_t)d;
  return ns > 0 ? (uint64_t)ns : 0;
}

/* ---- the writer -------------------------------------------------------- */

static pthread_mutex_t pt_writer_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct pt_encoder *pt_enc;
static int pt_fd = -1;
static bool pt_file_failed;
static char pt_path[4096];
static off_t pt_off;
static struct pt_buf pt_out;
static struct pt_graph_rec *pt_graph;
static size_t pt_graph_n, pt_graph_cap, pt_graph_done;
static uint64_t pt_dropped_written, pt_dropped_reported;
static _Atomic int pt_writer_running;
static _Atomic int pt_writer_stop;
static sem_t pt_wake;
static __thread bool pt_in_pass;

static void pt_write_at(off_t off, const void *p, size_t n) {
  const char *s = p;
  while (n && !pt_file_failed) {
    ssize_t w = pwrite(pt_fd, s, n, off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      fprintf(stderr, "xpti: perfetto collector cannot write '%s': %s\n", pt_path,
              w < 0 ? strerror(errno) : "short write");
      pt_file_failed = true;
      return;
    }
    s += w;
    off += w;
    n -= (size_t)w;
  }
}

static void pt_out_flush(void) {
  if (pt_fd >= 0 && !pt_file_failed && pt_out.len) {
    pt_write_at(pt_off, pt_out.data, pt_out.len);
    pt_off += (off_t)pt_out.len;
  }
  pt_out.len = 0;
  pt_out.failed = false;
}

static void pt_open_file(void) {
  if (pt_fd >= 0 || pt_file_failed)
    return;
  const char *dir = xpt_output_dir();
  if (!dir) {
    pt_file_failed = true;
    return;
  }
  snprintf(pt_path, sizeof pt_path, "%s/%s", dir,
           pt_format == PT_FORMAT_JSON ? "trace.json" : "trace.perfetto-trace");
  pt_fd = open(pt_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (pt_fd < 0) {
    fprintf(stderr, "xpti: perfetto collector cannot open '%s': %s\n", pt_path, strerror(errno));
    pt_file_failed = true;
    return;
  }
  pt_off = 0;
  pt_enc->begin_file(&pt_out);
}

static void pt_graph_add(const struct pt_rec *r, uint64_t ts) {
  if (pt_graph_n == pt_graph_cap) {
    size_t cap = pt_graph_cap ? pt_graph_cap * 2 : 64;
    struct pt_graph_rec *g = realloc(pt_graph, cap * sizeof *g);
    if (!g)
      return;
    pt_graph = g;
    pt_graph_cap = cap;
  }
  pt_graph[pt_graph_n++] = (struct pt_graph_rec){ts, r->event, r->instance, r->type, r->stream};
}

static void pt_encode_range(struct pt_thread *t, struct pt_chunk *c, uint32_t to) {
  uint32_t off = c->consumed;
  while (off < to) {
    const struct pt_rec *r = (const struct pt_rec *)(c->data + off);
    off += pt_rec_size(r->name_len);
    uint64_t ts = pt_clock_ns(r->ts);
    if (ts < t->last_ns)
      ts = t->last_ns; /* a later calibration may land a few ns earlier */
    t->last_ns = ts;
    if (r->pad == PT_INLINE_TIMED) {
      pt_dev_add(r);
    } else if (pt_kind_of(r->type) == PT_KIND_GRAPH) {
      pt_graph_add(r, ts);
      if (r->pad == PT_INLINE_EDGE && r->event) {
        struct pt_edge_inline e;
        memcpy(&e, r + 1, sizeof e);
        pt_dev_edge(r->event->source_id, e.source_instance, r->event->target_id,
                    e.target_instance);
      }
    } else {
      pt_enc->thread_record(&pt_out, t, r, ts);
    }
    if (pt_out.len >= (1u << 20))
      pt_out_flush();
  }
  c->consumed = to;
}

/* Encode what every thread has committed; chunks that are sealed and
 * fully encoded go back to the budget. */
static void pt_drain_thread(struct pt_thread *t) {
  int expected = 0;
  while (!atomic_compare_exchange_weak(&t->owner, &expected, 2)) {
    expected = 0;
    sched_yield();
  }
  bool exited = atomic_load_explicit(&t->exited, memory_order_acquire);
  struct pt_chunk *c = atomic_load_explicit(&t->head,
                                            memory_order_acquire);
  while (c) {
    struct pt_chunk *next = atomic_load_explicit(&c->next, memory_order_acquire);
    uint32_t committed = atomic_load_explicit(&c->committed, memory_order_acquire);
    pt_encode_range(t, c, committed);
    if (!next && !exited)
      break;
    atomic_store_explicit(&t->head, next, memory_order_relaxed);
    pt_pool_give(c);
    c = next;
  }
  if (exited)
    t->dead = true; /* its last chunk is freed: nothing more will come */
  atomic_store_explicit(&t->owner, 0, memory_order_release);
}

static uint64_t pt_total_dropped(void) {
  uint64_t n = atomic_load_explicit(&pt_dropped_global, memory_order_relaxed) + pt_dev_dropped();
  for (struct pt_thread *t = atomic_load_explicit(&pt_threads, memory_order_acquire); t;
       t = t->next_all)
    n += atomic_load_explicit(&t->dropped, memory_order_relaxed);
  return n;
}

static void pt_pass_locked(bool final) {
  pt_in_pass = true;
  pt_clock_calibrate();
  pt_open_file();
  for (struct pt_thread *t = atomic_load_explicit(&pt_threads, memory_order_acquire); t;
       t = t->next_all)
    if (!t->dead)
      pt_drain_thread(t);
  pt_dev_pass(&pt_out, pt_enc, final, pt_now());
  if (final) {
    if (pt_graph_n > pt_graph_done) {
      pt_enc->graph(&pt_out, pt_graph + pt_graph_done, pt_graph_n - pt_graph_done);
      pt_graph_done = pt_graph_n;
    }
    uint64_t dropped = pt_total_dropped();
    if (dropped != pt_dropped_written) {
      pt_enc->dropped(&pt_out, dropped, pt_now());
      pt_dropped_written = dropped;
    }
  }
  pt_out_flush();
  /* The JSON closing bytes go after the data and are overwritten next time. */
  if (pt_enc->trailer && pt_fd >= 0 && !pt_file_failed)
    pt_write_at(pt_off, pt_enc->trailer, strlen(pt_enc->trailer));
  pt_in_pass = false;
}

/* From a signal handler the lock may be held by an interrupted writer:
 * try for a while, never forever. */
static bool pt_lock_writer(bool from_signal) {
  if (!from_signal) {
    pthread_mutex_lock(&pt_writer_lock);
    return true;
  }
  if (pt_in_pass)
    return false;
  for (int i = 0; i < 2000; i++) {
    if (pthread_mutex_trylock(&pt_writer_lock) == 0)
      return true;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return false;
}

static void *pt_writer_main(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  while (!atomic_load(&pt_writer_stop)) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    sem_timedwait(&pt_wake, &until);
    if (atomic_load(&pt_writer_stop))
      break;
    pthread_mutex_lock(&pt_writer_lock);
    if (!atomic_load(&pt_writer_stop))
      pt_pass_locked(false);
    pthread_mutex_unlock(&pt_writer_lock);
  }
  return NULL;
}

static void pt_writer_start(void) {
  int expected = 0;
  if (pt_policy != PT_POLICY_FLUSH || atomic_load(&pt_writer_stop) ||
      !atomic_compare_exchange_strong(&pt_writer_running, &expected, 1))
    return;
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &attr, pt_writer_main, NULL) != 0)
    atomic_store(&pt_writer_running, 0); /* flushes still write at exit */
  pthread_attr_destroy(&attr);
}

static void pt_writer_wake(void) {
  if (atomic_load_explicit(&pt_writer_running, memory_order_relaxed))
    sem_post(&pt_wake);
  else
    pt_writer_start(); /* e.g. in a forked child */
}

static void pt_flush(void *ctx, enum xpt_flush_reason reason) {
  (void)ctx;
  if (reason == XPT_FLUSH_FORK_CHILD)
    return; /* reset by pt_fork_child */
  bool last = reason == XPT_FLUSH_EXIT || reason == XPT_FLUSH_SIGNAL;
  if (last)
    atomic_store(&pt_writer_stop, 1);
  if (!pt_lock_writer(reason == XPT_FLUSH_SIGNAL))
    return;
  pt_pass_locked(true);
  uint64_t dropped = pt_dropped_written;
  bool report = last && dropped != pt_dropped_reported;
  pt_dropped_reported = last ? dropped : pt_dropped_reported;
  pthread_mutex_unlock(&pt_writer_lock);
  if (report)
    fprintf(stderr, "xpti: perfetto collector dropped %" PRIu64 " events\n", dropped);
}

/* ---- fork: the child starts an empty trace of its own ----------------- */

static void pt_fork_prepare(void) {
  pthread_mutex_lock(&pt_writer_lock);
  pthread_mutex_lock(&pt_pool_lock);
}
static void pt_fork_parent(void) {
  pthread_mutex_unlock(&pt_pool_lock);
  pthread_mutex_unlock(&pt_writer_lock);
}

static void pt_free_chunks(struct pt_thread *t) {
  struct pt_chunk *c = atomic_load_explicit(&t->head, memory_order_relaxed);
  while (c) {
    struct pt_chunk *next = atomic_load_explicit(&c->next, memory_order_relaxed);
    free(c);
    c = next;
  }
  atomic_store_explicit(&t->head, NULL, memory_order_relaxed);
  t->cur = NULL;
}

static void pt_fork_child(void) {
  pthread_mutex_init(&pt_writer_lock, NULL);
  pthread_mutex_init(&pt_pool_lock, NULL);
  while (pt_pool) {
    struct pt_chunk *next = atomic_load_explicit(&pt_pool->next, memory_order_relaxed);
    free(pt_pool);
    pt_pool = next;
  }
  pt_pool_n = 0;
  sem_init(&pt_wake, 0, 0);
  atomic_store(&pt_writer_running, 0);
  atomic_store(&pt_writer_stop, 0);
  pt_proc.pid = getpid();
  pt_proc.start_ns = pt_now();
  pt_proc.forked = true;
  if (pt_fd >= 0)
    close(pt_fd);
  pt_fd = -1;
  pt_file_failed = false;
  pt_off = 0;
  pt_out.len = 0;
  pt_graph_n = pt_graph_done = 0;
  pt_dev_reset();
  pt_dropped_written = pt_dropped_reported = 0;
  atomic_store(&pt_in_use, 0);
  atomic_store(&pt_dropped_global, 0);
  for (struct pt_thread *t = atomic_load(&pt_threads); t; t = t->next_all) {
    pt_free_chunks(t);
    atomic_store(&t->dropped, 0);
    atomic_store(&t->owner, 0);
    if (t == pt_tls) {
      t->pid = pt_proc.pid;
      t->tid = (pid_t)syscall(SYS_gettid);
      pt_seq_reset(&t->seq);
      pt_tls_chunk = NULL;
    } else {
      t->dead = true; /* that thread does not exist here */
    }
  }
}

/* ---- set-up and the subscriber entry points --------------------------- */

static void pt_setup(void) {
  pt_clock_setup();
  pt_proc.pid = getpid();
  pt_proc.start_ns = pt_now();
  const char *fmt = getenv("XPTRACE_TRACE_FORMAT");
  pt_format = PT_FORMAT_PROTO;
  if (fmt && !strcmp(fmt, "json"))
    pt_format = PT_FORMAT_JSON;
  else if (fmt && *fmt && strcmp(fmt, "perfetto"))
    fprintf(stderr, "xpti: XPTRACE_TRACE_FORMAT='%s' is not perfetto or json; using perfetto\n",
            fmt);
  pt_enc = pt_format == PT_FORMAT_JSON ? &pt_json_encoder : &pt_proto_encoder;
  const char *policy = getenv("XPTRACE_BUFFER_POLICY");
  pt_policy = PT_POLICY_FLUSH;
  if (policy && !strcmp(policy, "ring"))
    pt_policy = PT_POLICY_RING;
  else if (policy && *policy && strcmp(policy, "flush"))
    fprintf(stderr, "xpti: XPTRACE_BUFFER_POLICY='%s' is not flush or ring; using flush\n",
            policy);
  const char *annotate = getenv("XPTRACE_ANNOTATE");
  pt_annotate_all = annotate && !strcmp(annotate, "all");
  if (annotate && *annotate && !pt_annotate_all && strcmp(annotate, "minimal"))
    fprintf(stderr, "xpti: XPTRACE_ANNOTATE='%s' is not minimal or all; using minimal\n",
            annotate);
  pt_budget = xpt_env_size("XPTRACE_BUFFER_SIZE", 64u << 20);
  /* Small budgets get small chunks so that several threads share them. */
  uint64_t cap = pt_budget / 64;
  /* At most 64 KiB: under malloc's mmap threshold, freed chunks come back warm. */
  cap = cap < 1024 ? 1024 : cap > (64u << 10) ? (64u << 10) : cap;
  pt_chunk_cap = (uint32_t)(cap & ~(uint64_t)7);
  pt_slow_type[XPTI_TRACE_EDGE_CREATE] = 1;
  pt_timed_type = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
  if (pt_timed_type)
    pt_slow_type[pt_timed_type & 0xff] = 1;
  sem_init(&pt_wake, 0, 0);
  pthread_key_create(&pt_key, pt_thread_exit);
  pthread_atfork(pt_fork_prepare, pt_fork_parent, pt_fork_child);
  xpt_register_flush(pt_flush, NULL);
}

static pthread_mutex_t pt_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t pt_stream_on[256];
static unsigned pt_live_streams;

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  (void)major;
  (void)minor;
  (void)version;
  pthread_once(&pt_once, pt_setup);
  if (!stream || !*stream || !xpt_stream_selected(stream))
    return;
  uint8_t id = xptiRegisterStream(stream);
  if (id == XPTI_INVALID_STREAM_ID)
    return;
  pthread_mutex_lock(&pt_streams_lock);
  bool fresh = !pt_stream_on[id];
  if (fresh) {
    pt_stream_on[id] = 1;
    pt_live_streams++;
  }
  pthread_mutex_unlock(&pt_streams_lock);
  if (!fresh)
    return;
  xptiRegisterStreamCallback(id, pt_use_tsc ? pt_stream_cb_tsc : pt_stream_cb_mono);
  pt_writer_start();
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) {
  if (!stream)
    return;
  pthread_once(&pt_once, pt_setup);
  const char *name;
  unsigned live = 1;
  bool found = false;
  pthread_mutex_lock(&pt_streams_lock);
  for (unsigned id = 0; id < 255; id++)
    if (pt_stream_on[id] && (name = xptiLookupStreamName((uint8_t)id)) && !strcmp(name, stream)) {
      pt_stream_on[id] = 0;
      live = --pt_live_streams;
      found = true;
      break;
    }
  pthread_mutex_unlock(&pt_streams_lock);
  if (found && live == 0)
    pt_flush(NULL, XPT_FLUSH_FINALIZE);
}
