/* libxpti_stats.so: per (stream, trace point type, event name) statistics
 * of begin/end durations, plus counts of single-point events.
 *
 * Recording is per thread and lock-free across threads: each thread owns
 * a table of rows and a stack of open begins, guarded by a flag that
 * only the report ever contends.  When a thread ends, its rows are merged
 * by name into the aggregate of ended threads and its state is kept for
 * the next new thread: memory follows the threads alive, not the threads
 * there were.  The report (stats_report.c) merges the aggregate and the
 * live threads' rows. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <xpti/xpti_trace_framework.h>

#include "stats_internal.h"
#include "xpt_api.h"
#include "xpt_arena.h"
#include "xptrace/xptrace_protocol.h"
#include "xpt_windows.h"

/* ---- per-thread state ---------------------------------------------------------- */

typedef struct stats_frame {
  /* What pairs an end with its begin, as in the trace (src/trace): the
   * event's universal ID (0: no event) and the instance, innermost first.
   * Never the event's address: a caller may end with a copy. */
  uint64_t uid, instance;
  uint64_t start;
  uint64_t children; /* total time of matched pairs directly inside */
  uint32_t row;
  uint16_t type;
} stats_frame_t;
/* The row of a frame begun outside the time windows (XPTRACE_PERIODS). */
#define STATS_ROW_GATED (UINT32_MAX - 1)

/* Who holds a thread's state: its thread (recording, or reporting), or
 * the report running on another thread. */
enum { STATS_FREE, STATS_OWNER, STATS_READER };

typedef struct stats_thread {
  _Atomic uint32_t busy;
  bool live;                      /* a thread's now (else free, or a parent's thread's) */
  struct stats_thread *next;      /* every state made: never freed */
  struct stats_thread *next_free; /* states of ended threads, for new ones */
  stats_row_t *rows;
  uint32_t nrows, rows_cap;
  uint32_t *slots; /* open addressing: row index + 1; 0 = empty */
  uint32_t slots_cap;
  stats_frame_t *stack;
  uint32_t depth, stack_cap;
  char **names; /* interned copies of names passed as user data */
  uint32_t nnames, names_cap;
  uint32_t *name_slots; /* open addressing over names: index + 1; 0 = empty */
  uint32_t name_slots_cap;
  struct stats_orphan { /* ends with no begin here: maybe another thread's */
    uint64_t uid, instance, ts;
    uint32_t row;
  } *orphans;
  uint32_t norphans, orphans_cap;
  uint64_t dropped; /* events lost to a failed allocation */
  xpt_arena_t arena; /* every table above: growth may happen in a signal handler */
} stats_thread_t;

/* First tables of a state (its arena's first chunk holds them). */
enum { STATS_ROWS0 = 32, STATS_STACK0 = 16 };

_Atomic uint16_t stats_timed_type;
/* Flow marks (xptrace_protocol.h) link slices; they are not slices. */
static _Atomic uint16_t stats_flow_out_type, stats_flow_in_type;
static __thread stats_thread_t *stats_tls __attribute__((tls_model("initial-exec")));
static pthread_key_t stats_key;
static bool stats_key_ok;

/* Events not recorded: from a signal handler that interrupted its thread
 * inside the record path (or while its state is made or retired), or
 * while a report held the state too long.  Atomic: handlers add to it. */
static _Atomic uint64_t stats_lost;

/* Stands for a thread's state while it is made or retired: always held,
 * so that a signal handler's event then is counted, never waited for. */
static stats_thread_t stats_changing = {.busy = STATS_OWNER};

static struct {
  pthread_mutex_t lock; /* lists, aggregate and report; never taken per event */
  stats_thread_t *threads;
  stats_thread_t *free;
  stats_table_t ended; /* rows of the threads that ended; owns its names */
  unsigned ended_threads;
} stats_global = {.lock = PTHREAD_MUTEX_INITIALIZER, .ended = {.owns_names = true}};

/* Stamps: raw TSC ticks where invariant (a third of clock_gettime's cost
 * here), scaled to ns at the report by the ticks and ns elapsed since
 * set-up; else CLOCK_MONOTONIC ns. */
static bool stats_tsc;
static uint64_t stats_tsc_base, stats_ns_base;

static inline uint64_t stats_now(void) {
#if defined(__x86_64__)
  if (stats_tsc)
    return __rdtsc();
#endif
  return xpt_now_ns();
}

/* The stamp of this notification when a collector called before this one
 * (the trace collector) published it in the dispatcher's record: one
 * clock read per notification. */
static __thread xptrace_stamp_t *stats_stamp_tls __attribute__((tls_model("initial-exec")));

static inline uint64_t stats_event_stamp(void) {
  xptrace_stamp_t *s = stats_stamp_tls;
  if (!s)
    s = stats_stamp_tls = xpt_api_thread_stamp();
  uint32_t clock = stats_tsc ? XPTRACE_STAMP_TSC : XPTRACE_STAMP_MONOTONIC_NS;
  if (s->stamped == s->seq && s->clock == clock)
    return s->stamp;
  return stats_now();
}

static double stats_ns_per_tick(void) {
  if (!stats_tsc)
    return 0;
  uint64_t ticks, ns;
  xpt_clock_pair(&ticks, &ns);
  if (ticks <= stats_tsc_base || ns <= stats_ns_base)
    return 1; /* no time has passed: nothing to scale that matters */
  return (double)(ns - stats_ns_base) / (double)(ticks - stats_tsc_base);
}

static void stats_thread_exit(void *p);

static stats_thread_t *stats_thread_new(void) {
  stats_tls = &stats_changing;
  pthread_mutex_lock(&stats_global.lock);
  stats_thread_t *t = stats_global.free;
  if (t) {
    stats_global.free = t->next_free;
  } else if ((t = xpt_pages_alloc(sizeof *t))) { /* never freed; no malloc in a handler */
    t->next = stats_global.threads;
    stats_global.threads = t;
  }
  if (t)
    t->live = true;
  pthread_mutex_unlock(&stats_global.lock);
  stats_tls = t;
  if (t && stats_key_ok)
    pthread_setspecific(stats_key, t);
  return t;
}

/* Never waits for itself: held by its owner means this thread was
 * interrupted inside the record path (a signal handler), and the event
 * is only counted.  The report holds a state briefly: wait, boundedly. */
static bool stats_thread_enter(stats_thread_t *t) {
  for (unsigned n = 0;; ++n) {
    uint32_t held = STATS_FREE;
    if (atomic_compare_exchange_weak_explicit(&t->busy, &held, STATS_OWNER, memory_order_acquire,
                                              memory_order_relaxed))
      return true;
    if (held == STATS_OWNER || n == 10000)
      return false;
    if (held != STATS_FREE)
      sched_yield();
  }
}

static void stats_thread_leave(stats_thread_t *t) {
  atomic_store_explicit(&t->busy, STATS_FREE, memory_order_release);
}

static bool stats_slots_grow(stats_thread_t *t);

/* A thread's tables come from its arena (mmap, no lock): an event may
 * come from a signal handler that interrupted malloc.  Grown tables
 * leave their old copy there until the thread ends (at most as much
 * again). */
static void *stats_grow(stats_thread_t *t, void *old, size_t old_size, size_t size) {
  void *fresh = xpt_arena_alloc(&t->arena, size);
  if (fresh && old)
    memcpy(fresh, old, old_size);
  return fresh;
}

static void *stats_hist_block_new(void *thread, size_t size) {
  return stats_grow(thread, NULL, 0, size);
}

static void stats_thread_tables(stats_thread_t *t) {
  if ((t->rows = stats_grow(t, NULL, 0, STATS_ROWS0 * sizeof *t->rows)))
    t->rows_cap = STATS_ROWS0;
  if ((t->stack = stats_grow(t, NULL, 0, STATS_STACK0 * sizeof *t->stack)))
    t->stack_cap = STATS_STACK0;
  if (t->slots_cap == 0)
    stats_slots_grow(t);
}

/* ---- recording -------------------------------------------------------------------- */

static uint64_t stats_hash_ptr(uintptr_t p, uint16_t type, uint8_t stream) {
  uint64_t h = (uint64_t)p ^ ((uint64_t)type << 48) ^ ((uint64_t)stream << 40);
  h ^= h >> 33;
  h *= UINT64_C(0xff51afd7ed558ccd);
  h ^= h >> 33;
  return h;
}

/* Doubles an open-addressing array (element index + 1; 0 = empty) over
 * n elements, element i hashing to hash_of(t, i). */
static bool stats_slots_double(uint32_t **slots, uint32_t *cap, uint32_t n,
                               uint64_t (*hash_of)(const stats_thread_t *t, uint32_t i),
                               stats_thread_t *t) {
  uint32_t size = *cap ? *cap * 2 : 64;
  uint32_t *fresh = stats_grow(t, NULL, 0, size * sizeof *fresh);
  if (!fresh)
    return false;
  for (uint32_t e = 0; e < n; ++e) {
    uint32_t i = (uint32_t)hash_of(t, e) & (size - 1);
    while (fresh[i])
      i = (i + 1) & (size - 1);
    fresh[i] = e + 1;
  }
  *slots = fresh;
  *cap = size;
  return true;
}

static uint64_t stats_row_hash(const stats_thread_t *t, uint32_t r) {
  const stats_row_t *row = &t->rows[r];
  return stats_hash_ptr((uintptr_t)row->name, row->type, row->stream);
}

static bool stats_slots_grow(stats_thread_t *t) {
  return stats_slots_double(&t->slots, &t->slots_cap, t->nrows, stats_row_hash, t);
}

/* Row of (stream, type, name) in this thread's table, created on first use.
 * Returns UINT32_MAX when memory runs out. */
static uint32_t stats_row_find(stats_thread_t *t, uint8_t stream, uint16_t type,
                               const char *name) {
  if (t->slots_cap == 0 && !stats_slots_grow(t))
    return UINT32_MAX;
  uint64_t h = stats_hash_ptr((uintptr_t)name, type, stream);
  uint32_t i = (uint32_t)h & (t->slots_cap - 1);
  for (;;) {
    uint32_t slot = t->slots[i];
    if (!slot)
      break;
    stats_row_t *row = &t->rows[slot - 1];
    if (row->name == name && row->type == type && row->stream == stream)
      return slot - 1;
    i = (i + 1) & (t->slots_cap - 1);
  }
  /* New row: keep the load factor at or below one half. */
  if ((t->nrows + 1) * 2 > t->slots_cap) {
    if (!stats_slots_grow(t))
      return UINT32_MAX;
    return stats_row_find(t, stream, type, name);
  }
  if (t->nrows == t->rows_cap) {
    uint32_t cap = t->rows_cap ? t->rows_cap * 2 : 32;
    stats_row_t *rows = stats_grow(t, t->rows, t->rows_cap * sizeof *rows, cap * sizeof *rows);
    if (!rows)
      return UINT32_MAX;
    t->rows = rows;
    t->rows_cap = cap;
  }
  stats_row_t *row = &t->rows[t->nrows];
  memset(row, 0, sizeof *row);
  row->name = name;
  row->type = type;
  row->stream = stream;
  row->min = UINT64_MAX;
  t->slots[i] = ++t->nrows;
  return t->nrows - 1;
}

static uint64_t stats_name_hash(const stats_thread_t *t, uint32_t n) {
  return stats_hash_str(t->names[n], 0, 0);
}

/* A name that came as user data may live in a reused buffer: keep a copy,
 * found again by content (hashed: a program may use many names). */
static const char *stats_intern_name(stats_thread_t *t, const char *name) {
  if ((t->nnames + 1) * 2 > t->name_slots_cap &&
      !stats_slots_double(&t->name_slots, &t->name_slots_cap, t->nnames, stats_name_hash, t))
    return NULL;
  uint32_t mask = t->name_slots_cap - 1;
  uint32_t i = (uint32_t)stats_hash_str(name, 0, 0) & mask;
  for (; t->name_slots[i]; i = (i + 1) & mask)
    if (strcmp(t->names[t->name_slots[i] - 1], name) == 0)
      return t->names[t->name_slots[i] - 1];
  if (t->nnames == t->names_cap) {
    uint32_t cap = t->names_cap ? t->names_cap * 2 : 16;
    char **names = stats_grow(t, t->names, t->names_cap * sizeof *names, cap * sizeof *names);
    if (!names)
      return NULL;
    t->names = names;
    t->names_cap = cap;
  }
  size_t len = strlen(name) + 1;
  char *copy = stats_grow(t, NULL, 0, len);
  if (copy)
    memcpy(copy, name, len);
  else
    return NULL;
  t->names[t->nnames++] = copy;
  t->name_slots[i] = t->nnames;
  return copy;
}

static const char *stats_event_name(stats_thread_t *t, uint16_t type,
                                    const xpti_trace_event_data_t *event, const void *user_data) {
  if (event) {
    const xpti_payload_t *payload = event->reserved.payload;
    if (!payload || !payload->name)
      return "<unnamed>";
    /* The framework's own events (they point at themselves) live as long
     * as the process; a caller's may be freed after the call: copy. */
    if (event->reserved.framework_private[0] == (const void *)event)
      return payload->name;
    const char *copy = stats_intern_name(t, payload->name);
    return copy ? copy : "<unnamed>";
  }
  /* Function notifications without an event carry the function name. */
  const char *name = xpti_user_data_name(type, user_data);
  return name ? stats_intern_name(t, name) : "<no event>";
}

static bool stats_push(stats_thread_t *t, stats_frame_t frame) {
  if (t->depth == t->stack_cap) {
    uint32_t cap = t->stack_cap ? t->stack_cap * 2 : 32;
    stats_frame_t *stack =
        stats_grow(t, t->stack, t->stack_cap * sizeof *stack, cap * sizeof *stack);
    if (!stack)
      return false;
    t->stack = stack;
    t->stack_cap = cap;
  }
  t->stack[t->depth++] = frame;
  return true;
}

static void stats_add_span(stats_thread_t *t, stats_row_t *row, uint64_t duration,
                           uint64_t children) {
  ++row->count;
  row->total += duration;
  row->self += duration >= children ? duration - children : 0;
  if (duration < row->min)
    row->min = duration;
  if (duration > row->max)
    row->max = duration;
  if (!stats_hist_add_from(&row->hist, duration, 1, stats_hist_block_new, t))
    ++t->dropped;
}

static void stats_end(stats_thread_t *t, uint8_t stream, uint16_t begin_type, const char *name,
                      uint64_t uid, uint64_t instance, uint64_t now) {
  uint32_t k = t->depth;
  while (k > 0 && !(t->stack[k - 1].uid == uid && t->stack[k - 1].instance == instance))
    --k;
  if (k == 0) {
    uint32_t r = stats_row_find(t, stream, begin_type, name);
    if (r == UINT32_MAX) {
      ++t->dropped;
      return;
    }
    if (t->norphans == t->orphans_cap) {
      uint32_t cap = t->orphans_cap ? t->orphans_cap * 2 : 16;
      struct stats_orphan *o =
          stats_grow(t, t->orphans, t->orphans_cap * sizeof *o, cap * sizeof *o);
      if (!o) {
        ++t->rows[r].unmatched_ends;
        return;
      }
      t->orphans = o;
      t->orphans_cap = cap;
    }
    t->orphans[t->norphans++] = (struct stats_orphan){uid, instance, now, r};
    return;
  }
  /* Begins opened after the matched one and never ended stay unclosed:
   * they are dropped from the stack (and counted when reported). */
  const stats_frame_t frame = t->stack[k - 1];
  t->depth = k - 1;
  if (frame.row == STATS_ROW_GATED)
    return; /* begun outside the time windows */
  uint64_t duration = now >= frame.start ? now - frame.start : 0;
  t->rows[frame.row].ticks = stats_tsc;
  stats_add_span(t, &t->rows[frame.row], duration, frame.children);
  if (t->depth > 0)
    t->stack[t->depth - 1].children += duration;
}

/* A timed slice (xptrace protocol: device work reported afterwards) is a
 * complete span of its own: end - begin, no nesting on the host thread. */
static void stats_timed_slice(stats_thread_t *t, uint8_t stream, uint16_t type,
                              const xpti_trace_event_data_t *event,
                              const xptrace_timed_slice_t *slice) {
  const char *name = slice->name ? stats_intern_name(t, slice->name)
                                 : stats_event_name(t, type, event, NULL);
  uint32_t r = name ? stats_row_find(t, stream, type, name) : UINT32_MAX;
  if (r == UINT32_MAX) {
    ++t->dropped;
    return;
  }
  uint64_t duration = slice->end_ns >= slice->begin_ns ? slice->end_ns - slice->begin_ns : 0;
  stats_add_span(t, &t->rows[r], duration, 0);
}

/* Inside a time window (XPTRACE_PERIODS), or no windows.  A begin
 * outside one is kept on the stack as gated, so that its end (maybe
 * inside a later window) is neither counted nor unmatched. */
static _Atomic bool stats_open = true;

static void stats_window_change(bool open, uint64_t mono_ns) {
  (void)mono_ns;
  atomic_store(&stats_open, open);
}

static void stats_record(uint8_t stream, uint16_t type, xpti_trace_event_data_t *event,
                         uint64_t instance, const void *user_data) {
  uint64_t now = stats_event_stamp();
  bool open = atomic_load_explicit(&stats_open, memory_order_relaxed);
  stats_thread_t *t = stats_tls;
  if ((!t && !(t = stats_thread_new())) || !stats_thread_enter(t)) {
    atomic_fetch_add_explicit(&stats_lost, 1, memory_order_relaxed);
    return;
  }
  if (t->rows_cap == 0)
    stats_thread_tables(t);
  if (type & XPTI_TRACE_USER_DEFINED && (type == atomic_load(&stats_flow_out_type) ||
                                        type == atomic_load(&stats_flow_in_type))) {
    stats_thread_leave(t);
    return;
  }
  if (!open && (stats_type_is_point(type) || (type == stats_timed_type && user_data))) {
    stats_thread_leave(t);
    return;
  }
  if (type == stats_timed_type && user_data) {
    stats_timed_slice(t, stream, type, event, user_data);
    stats_thread_leave(t);
    return;
  }
  const char *name = stats_event_name(t, type, event, user_data);
  if (!name) {
    ++t->dropped;
  } else if (stats_type_is_point(type)) {
    uint32_t r = stats_row_find(t, stream, type, name);
    if (r == UINT32_MAX)
      ++t->dropped;
    else
      ++t->rows[r].count;
  } else if ((type & 1) == 0) {
    uint32_t r = open ? stats_row_find(t, stream, type, name) : STATS_ROW_GATED;
    stats_frame_t frame = {event ? event->unique_id : 0, instance, now, 0, r, type};
    if (r == UINT32_MAX || !stats_push(t, frame))
      ++t->dropped;
  } else {
    stats_end(t, stream, (uint16_t)(type & ~1u), name, event ? event->unique_id : 0, instance,
              now);
  }
  stats_thread_leave(t);
}

/* The stream-wide callback: every type of the stream, with its id. */
static void stats_notify(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                         xpti_trace_event_data_t *event, uint64_t instance,
                         const void *user_data) {
  (void)parent;
  stats_record(stream, type, event, instance, user_data);
}

/* ---- ended threads and the report ----------------------------------------------- */

/* One half into tab's list for the report's pairing; counted on its row
 * as unpaired when the list cannot grow. */
static void stats_half_add(stats_table_t *tab, const stats_row_t *row, uint64_t uid,
                           uint64_t instance, uint64_t ts, bool end) {
  stats_row_t *m = stats_table_row(tab, row->stream, row->type, row->name);
  if (!m) {
    ++tab->dropped;
    return;
  }
  if (tab->nhalves == tab->halves_cap) {
    size_t cap = tab->halves_cap ? tab->halves_cap * 2 : 64;
    stats_half_t *h = realloc(tab->halves, cap * sizeof *h);
    if (!h) {
      ++*(end ? &m->unmatched_ends : &m->unclosed);
      return;
    }
    tab->halves = h;
    tab->halves_cap = cap;
  }
  tab->halves[tab->nhalves++] =
      (stats_half_t){uid, instance, ts, m->name, row->type, row->stream, end};
}

/* Rows, halves with no other half here (ends, open begins) and drops of
 * t into tab. */
static void stats_thread_merge(stats_table_t *tab, const stats_thread_t *t) {
  for (uint32_t r = 0; r < t->nrows; ++r)
    stats_table_add(tab, &t->rows[r]);
  for (uint32_t d = 0; d < t->depth; ++d) {
    const stats_frame_t *f = &t->stack[d];
    if (f->row != STATS_ROW_GATED)
      stats_half_add(tab, &t->rows[f->row], f->uid, f->instance, f->start, false);
  }
  for (uint32_t o = 0; o < t->norphans; ++o) {
    const struct stats_orphan *h = &t->orphans[o];
    stats_half_add(tab, &t->rows[h->row], h->uid, h->instance, h->ts, true);
  }
  tab->dropped += t->dropped;
}

static int stats_half_cmp(const void *x, const void *y) {
  const stats_half_t *a = x, *b = y;
  if (a->uid != b->uid)
    return a->uid < b->uid ? -1 : 1;
  if (a->instance != b->instance)
    return a->instance < b->instance ? -1 : 1;
  if (a->ts != b->ts)
    return a->ts < b->ts ? -1 : 1;
  return (int)a->end - (int)b->end; /* at one time a begin first */
}

/* Pairs the halves of tab across threads as the trace's finisher does
 * (pt_handoff.c): by trace point and instance, each end with the
 * earliest begin before it not yet taken.  A pair counts on the begin's
 * row; the rest are unmatched ends and unclosed begins. */
static void stats_pair_halves(stats_table_t *tab) {
  if (tab->nhalves > 1)
    qsort(tab->halves, tab->nhalves, sizeof *tab->halves, stats_half_cmp);
  for (size_t i = 0, head = 0; i < tab->nhalves; ++i) {
    const stats_half_t *h = &tab->halves[i];
    if (i == 0 || h->uid != h[-1].uid || h->instance != h[-1].instance)
      head = i; /* the key's queue of begins: [head, i), ends skipped */
    while (head < i && tab->halves[head].end)
      ++head;
    stats_row_t *m = stats_table_row(tab, h->stream, h->type, h->name);
    if (!m) {
      ++tab->dropped;
      continue;
    }
    if (!h->end)
      continue;
    if (head == i) {
      ++m->unmatched_ends;
      continue;
    }
    stats_half_t *b = &tab->halves[head++];
    stats_row_t *bm = stats_table_row(tab, b->stream, b->type, b->name);
    b->end = true; /* taken */
    if (!bm) {
      ++tab->dropped;
      continue;
    }
    uint64_t d = h->ts - b->ts;
    bm->ticks |= stats_tsc;
    ++bm->count;
    bm->total += d;
    bm->self += d;
    bm->min = d < bm->min ? d : bm->min;
    bm->max = d > bm->max ? d : bm->max;
    if (!stats_hist_add(&bm->hist, d, 1))
      ++tab->dropped;
  }
  for (size_t i = 0; i < tab->nhalves; ++i) { /* begins not taken */
    const stats_half_t *h = &tab->halves[i];
    stats_row_t *m = h->end ? NULL : stats_table_row(tab, h->stream, h->type, h->name);
    if (m)
      ++m->unclosed;
  }
}

/* Empties a state for the next thread: its arena keeps one chunk. */
static void stats_thread_reset(stats_thread_t *t) {
  xpt_arena_reset(&t->arena);
  t->rows = NULL;
  t->slots = t->name_slots = NULL;
  t->stack = NULL;
  t->names = NULL;
  t->nrows = t->rows_cap = t->slots_cap = 0;
  t->depth = t->stack_cap = 0;
  t->nnames = t->names_cap = t->name_slots_cap = 0;
  t->orphans = NULL;
  t->norphans = t->orphans_cap = 0;
  t->dropped = 0;
}

/* Thread exit (the key's destructor).  The lock keeps the report out;
 * a signal handler's event meanwhile is counted (stats_changing).  An
 * event from a later destructor makes a new state. */
static void stats_thread_exit(void *p) {
  stats_thread_t *t = p;
  stats_tls = &stats_changing;
  pthread_mutex_lock(&stats_global.lock);
  stats_thread_merge(&stats_global.ended, t);
  stats_global.ended_threads += t->nrows || t->depth; /* made at init, never recorded: not one */
  stats_thread_reset(t);
  t->live = false;
  t->next_free = stats_global.free;
  stats_global.free = t;
  pthread_mutex_unlock(&stats_global.lock);
  stats_tls = NULL;
}

/* Another thread's state, held for reading: wait a little for a thread
 * that is recording; one that never lets go is left out.  Its own, as
 * owner: a signal handler then counts its event rather than waits. */
static bool stats_thread_hold(stats_thread_t *t) {
  uint32_t as = t == stats_tls ? STATS_OWNER : STATS_READER;
  for (int tries = 0; tries < 2000; ++tries) {
    uint32_t expected = STATS_FREE;
    if (atomic_compare_exchange_strong_explicit(&t->busy, &expected, as, memory_order_acquire,
                                                memory_order_relaxed))
      return true;
    struct timespec pause = {0, 50000};
    nanosleep(&pause, NULL);
  }
  return false;
}

/* Bounded: exit() from a signal handler that interrupted this thread
 * while it held the lock must not hang the process. */
static bool stats_global_lock_for_report(void) {
  for (int tries = 0; tries < 20000; ++tries) {
    if (pthread_mutex_trylock(&stats_global.lock) == 0)
      return true;
    struct timespec pause = {0, 50000};
    nanosleep(&pause, NULL);
  }
  return false;
}

static void stats_report(void) {
  if (!stats_global_lock_for_report()) {
    xpt_msg("xpti: statistics not reported: the collector's lock stayed held");
    return;
  }
  stats_table_t rep = {0};
  const stats_table_t *ended = &stats_global.ended;
  for (size_t r = 0; r < ended->nrows; ++r)
    stats_table_add(&rep, &ended->rows[r]);
  for (size_t h = 0; h < ended->nhalves; ++h) {
    const stats_half_t *x = &ended->halves[h];
    stats_row_t row = {.name = x->name, .type = x->type, .stream = x->stream};
    stats_half_add(&rep, &row, x->uid, x->instance, x->ts, x->end);
  }
  rep.dropped += ended->dropped;
  rep.threads = stats_global.ended_threads;
  unsigned left_out = 0;
  for (stats_thread_t *t = stats_global.threads; t; t = t->next) {
    if (!t->live)
      continue;
    rep.threads += t->nrows || t->depth;
    if (!stats_thread_hold(t)) {
      ++left_out;
      continue;
    }
    stats_thread_merge(&rep, t);
    stats_thread_leave(t);
  }
  rep.dropped += atomic_load_explicit(&stats_lost, memory_order_relaxed);
  stats_pair_halves(&rep);
  /* Names of live threads' rows stay valid while the lock is held. */
  stats_report_write(&rep, stats_ns_per_tick());
  pthread_mutex_unlock(&stats_global.lock);
  stats_table_free(&rep);
  if (left_out)
    xpt_msg("xpti: statistics leave out %u thread(s) that stayed busy recording", left_out);
}

/* In a forked child the parent's numbers are the parent's to report.
 * Other threads' states (possibly mid-update) and the aggregate are
 * abandoned, never touched. */
static void stats_forget_parent(void) {
  stats_thread_t *self = stats_tls;
  stats_global.free = NULL;
  stats_global.ended = (stats_table_t){.owns_names = true};
  stats_global.ended_threads = 0;
  atomic_store(&stats_lost, 0);
  for (stats_thread_t *t = stats_global.threads; t; t = t->next)
    if (t != self)
      t->live = false;
  if (self && self != &stats_changing) {
    atomic_store(&self->busy, STATS_FREE);
    for (uint32_t r = 0; r < self->nrows; ++r) {
      stats_row_t *row = &self->rows[r];
      row->count = row->total = row->self = row->max = row->unmatched_ends = 0;
      row->min = UINT64_MAX;
      stats_hist_clear(&row->hist);
    }
    self->dropped = 0;
    self->norphans = 0;
    /* The calls open at the fork are the parent's slices: their ends here
     * count nothing (as if begun outside a time window). */
    for (uint32_t d = 0; d < self->depth; ++d)
      self->stack[d].row = STATS_ROW_GATED;
  }
  stats_report_forget();
}

static void stats_flush(void *ctx, enum xpt_flush_reason reason) {
  (void)ctx;
  switch (reason) {
  case XPT_FLUSH_EXIT:
  case XPT_FLUSH_SIGNAL:
    stats_report();
    break;
  case XPT_FLUSH_FORK_CHILD:
    pthread_mutex_init(&stats_global.lock, NULL);
    stats_forget_parent();
    break;
  case XPT_FLUSH_FINALIZE:
    break; /* a stream ending is not the end of the program */
  }
}

/* ---- subscriber entry points ----------------------------------------------- */

static pthread_once_t stats_once = PTHREAD_ONCE_INIT;
static void stats_setup(void) {
  stats_tsc = xpt_clock_tsc(false);
  xpt_clock_pair(&stats_tsc_base, &stats_ns_base);
  /* Without the key, states of ended threads are only never reused. */
  stats_key_ok = pthread_key_create(&stats_key, stats_thread_exit) == 0;
  xpt_register_flush(stats_flush, NULL);
}

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor,
                                     const char *version, const char *stream_name) {
  (void)major;
  (void)minor;
  (void)version;
  if (!stream_name || !xpt_stream_selected(stream_name))
    return;
  pthread_once(&stats_once, stats_setup);
  atomic_store(&stats_timed_type,
               xpt_api_user_type(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID));
  atomic_store(&stats_flow_out_type,
               xpt_api_user_type(XPTRACE_TOOL_NAME, XPTRACE_FLOW_OUT_ID));
  atomic_store(&stats_flow_in_type,
               xpt_api_user_type(XPTRACE_TOOL_NAME, XPTRACE_FLOW_IN_ID));
  uint8_t stream = xptiRegisterStream(stream_name);
  if (stream == XPTI_INVALID_STREAM_ID)
    return;
  /* The initialising thread's state and first tables now, in a normal
   * context: its first event may come from a signal handler that
   * interrupted malloc (calloc there deadlocked faults_signal-notify). */
  if (!stats_tls) {
    stats_thread_t *self = stats_thread_new();
    if (self && self->rows_cap == 0 && stats_thread_enter(self)) {
      stats_thread_tables(self);
      stats_thread_leave(self);
    }
  }
  /* Every type, user-defined ones of tools registered at any time
   * included.  DUPLICATE/UNDELETE: a stream initialised again. */
  static _Atomic bool said;
  static _Atomic bool windows;
  if (xpt_windows_configured() && !atomic_exchange(&windows, true))
    xpt_windows_start(stats_window_change);
  xpti_result_t r = xpt_api_subscribe(stream, stream_name, stats_notify);
  if (r != XPTI_RESULT_SUCCESS && r != XPTI_RESULT_DUPLICATE && r != XPTI_RESULT_UNDELETE &&
      !atomic_exchange(&said, true))
    xpt_msg("xpti: stats collector cannot register for stream '%s': 0x%x", stream_name,
            (unsigned)r);
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream_name) { (void)stream_name; }
