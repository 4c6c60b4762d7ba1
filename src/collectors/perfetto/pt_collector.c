/* libxpti_perfetto.so: records every notification into per-thread chunks
 * of a file-backed shared mapping (src/trace/xpt_rec.h), with no lock and
 * no wait.  Nothing is done at signal time: whoever finishes the run (this
 * process at exit, else `xptrace`, else `xptrace finish`) turns the
 * recording into the trace (src/trace/pt_finish.c).
 *
 * Only values are recorded (ids, times, copies of names), never a pointer
 * into the caller's event, payload or user data. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pt_common.h"
#include "pt_drain.h"
#include "pt_recorder.h"
#include "xpt_api.h"
#include "xpt_collector.h"
#include "xpt_fd.h"
#include "xpt_finish.h"
#include "xpt_windows.h"
#include "xpti/xpti_trace_framework.h"
#include "xpt_rec.h"
#include "xpt_rec_writer.h"
#include "xptrace/xptrace_protocol.h"

/* ---- configuration (read once) ------------------------------------------ */

static uint32_t pt_format_kind;
static bool pt_annotate;
static bool pt_launcher_finishes; /* under `xptrace`: it finishes the run */
static pthread_once_t pt_once = PTHREAD_ONCE_INIT;
/* By low byte: begin or end (PT_C_BEGIN/END), and whether the hot path
 * leaves it to the slow one (PT_C_SLOW): edge_create (node instances are
 * read), timed slices (inline times and names) and user-defined types
 * (their tool is named once). */
static uint8_t pt_class[256];
uint32_t pt_nest_max;
/* Inside a time window (XPTRACE_PERIODS), or no windows. */
static _Atomic bool pt_open = true;
static uint8_t pt_windows_stream;
static bool pt_window_marked; /* the controller thread's only */
static uint16_t pt_timed_type; /* 0: the framework gave none */
/* xptrace's flow ends (out, in): user-defined types that are instants,
 * never slices, whatever their low bit says. */
static uint16_t pt_flow_type[2];
static _Atomic bool pt_timed_bad_reported;

static pthread_mutex_t pt_open_lock = PTHREAD_MUTEX_INITIALIZER;
/* This thread holds pt_open_lock: only a signal handler that interrupted
 * it can ask again, and must not wait for itself. */
static __thread bool pt_opening __attribute__((tls_model("initial-exec")));
static pthread_mutex_t pt_dict_lock = PTHREAD_MUTEX_INITIALIZER;
/* The shared dictionary chunk (descriptions), under pt_dict_lock. */
static struct xpt_rec_chunk *pt_dict;
static uint32_t pt_dict_off;

/* ---- descriptions ---------------------------------------------------------- */

/* Writes the description of event (uid) into the shared dictionary chunk,
 * else (lock busy: a signal handler, or no chunk left) into t's own
 * chunk, which then forgets it when t moves to its next chunk.  Returns
 * whether it was written (then t remembers the uid as described). */
static bool pt_describe(struct pt_rthread *t, const xpti_trace_event_data_t *event, uint64_t uid) {
  struct xpt_rec_desc d;
  memset(&d, 0, sizeof d);
  const xpti_payload_t *p = event->reserved.payload;
  const char *name = p ? p->name : NULL, *file = p ? p->source_file : NULL;
  d.name_len = name ? (uint16_t)strnlen(name, XPT_REC_DESC_STR_MAX) : 0;
  d.file_len = file ? (uint16_t)strnlen(file, XPT_REC_DESC_STR_MAX) : 0;
  d.line = p ? p->line_no : XPTI_INVALID_LINE;
  d.column = p ? p->column_no : XPTI_INVALID_LINE;
  d.payload_flags = p ? p->flags : 0;
  d.source_id = event->source_id;
  d.target_id = event->target_id;
  d.event_type = event->event_type;
  d.activity_type = event->activity_type;
  d.event_flags = event->flags;
  uint8_t meta[XPT_REC_DESC_META_MAX];
  uint32_t count = xpt_api_metadata_count(event);
  for (uint32_t i = 0; i < count; i++) {
    uint32_t key_id;
    int32_t value_id;
    if (xpt_api_metadata_at(event, i, &key_id, &value_id) != XPTI_RESULT_SUCCESS)
      break;
    const char *key = xptiLookupString(key_id);
    xpti_object_data_t o = xptiLookupObject(value_id);
    if (!key || !o.data)
      continue;
    struct xpt_rec_meta m = {(uint16_t)strnlen(key, 255), o.type, 0, 0};
    m.value_len = o.size > 1024 ? 1024 : (uint32_t)o.size;
    size_t need = sizeof m + m.key_len + m.value_len;
    if (d.meta_len + need > sizeof meta)
      break;
    memcpy(meta + d.meta_len, &m, sizeof m);
    memcpy(meta + d.meta_len + sizeof m, key, m.key_len);
    memcpy(meta + d.meta_len + sizeof m + m.key_len, o.data, m.value_len);
    d.meta_len += (uint32_t)need;
    d.meta_count++;
  }
  uint32_t len = (uint32_t)sizeof d + d.name_len + d.file_len + d.meta_len;
  uint32_t size = xpt_rec_size(len);
  struct xpt_rec_raw r = {0, uid, 0, 0, 0, XPT_REC_DESC, len};
  uint32_t dcap = pt_chunk_size - (uint32_t)sizeof(struct xpt_rec_chunk);
  if (pthread_mutex_trylock(&pt_dict_lock) == 0) {
    bool ok = pt_dict && dcap - pt_dict_off >= size;
    if (!ok) {
      sigset_t old;
      pt_block_signals(&old);
      uint64_t index = pt_chunk_fresh();
      pt_restore_signals(&old);
      struct xpt_rec_chunk *c = index == UINT64_MAX ? NULL : pt_chunk_map(index);
      if (c) {
        pt_chunk_start(c, XPT_REC_CHUNK_DICT);
        if (pt_dict)
          pt_chunk_seal(pt_dict);
        pt_dict = c;
        pt_dict_off = 0;
        ok = true;
      }
    }
    if (ok) {
      pt_append((uint8_t *)(pt_dict + 1), pt_dict_off, &r, &d, sizeof d, name, d.name_len, file,
                d.file_len);
      memcpy((uint8_t *)(pt_dict + 1) + pt_dict_off + sizeof r + sizeof d + d.name_len +
                 d.file_len,
             meta, d.meta_len);
      pt_dict_off += size;
      atomic_store_explicit(&pt_dict->committed, pt_dict_off, memory_order_release);
    }
    pthread_mutex_unlock(&pt_dict_lock);
    if (ok)
      return true;
  }
  /* Into the thread's own chunk, just before the record that needs it. */
  struct xpt_rec_chunk *c;
  uint32_t end;
  uint8_t *at = pt_reserve(t, size, t->w.hold + (uint32_t)sizeof r, &c, &end);
  if (!at)
    return false;
  pt_append(at, 0, &r, &d, sizeof d, name, d.name_len, file, d.file_len);
  memcpy(at + sizeof r + sizeof d + d.name_len + d.file_len, meta, d.meta_len);
  pt_commit(t, c, end);
  t->own_desc = true;
  return true;
}

/* The tool of a user-defined type, named once per recording. */
static void pt_name_tool(uint16_t type) {
  uint8_t tool = (uint8_t)XPTI_TOOL_ID(type);
  if (atomic_load_explicit(&pt_rec.h->tool_named[tool], memory_order_relaxed))
    return;
  const char *name = xpt_api_tool_name(tool);
  if (!name || atomic_exchange(&pt_rec.h->tool_named[tool], 1))
    return;
  char *dst = (char *)pt_rec.h + XPT_REC_TOOLS_OFF + (size_t)tool * XPT_REC_NAME_LEN;
  strncpy(dst, name, XPT_REC_NAME_LEN - 1);
}

/* ---- recording ------------------------------------------------------------- */

static bool pt_rec_ready(void);
static void pt_name_stream(uint8_t id, const char *name);
static _Atomic uint8_t pt_stream_on[256];

static void pt_record_slow_body(struct pt_rthread *t, bool tsc, uint8_t stream, uint16_t type,
                                const xpti_trace_event_data_t *event, uint64_t instance,
                                const void *user_data);

/* Everything but the common case: no thread state or chunk yet, a full
 * chunk, a trace point not yet described, a NULL event, the slow types. */
static __attribute__((noinline)) void pt_record_slow(bool tsc, uint8_t stream, uint16_t type,
                                                     const xpti_trace_event_data_t *event,
                                                     uint64_t instance, const void *user_data) {
  if (!pt_rec_ready()) {
    atomic_fetch_add_explicit(&pt_lost_early, 1, memory_order_relaxed);
    return;
  }
  struct pt_rthread *t = pt_tls;
  if (!t && !(t = pt_thread_new())) {
    pt_drop(1);
    return;
  }
  if (t->w.busy) {
    pt_drop(1); /* a signal handler interrupted this thread's recording */
    return;
  }
  t->w.busy = true;
  atomic_signal_fence(memory_order_seq_cst);
  pt_record_slow_body(t, tsc, stream, type, event, instance, user_data);
  atomic_signal_fence(memory_order_seq_cst);
  t->w.busy = false;
}

static void pt_record_slow_body(struct pt_rthread *t, bool tsc, uint8_t stream, uint16_t type,
                                const xpti_trace_event_data_t *event, uint64_t instance,
                                const void *user_data) {
  uint8_t kind = XPT_REC_EVENT;
  const void *extra = NULL, *s1 = NULL, *s2 = NULL;
  uint32_t extra_len = 0, s1_len = 0, s2_len = 0;
  struct xpt_rec_timed timed = {0, 0, 0, 0, 0, 0};
  struct xpt_rec_edge edge = {0, 0};
  if (type & XPTI_TRACE_USER_DEFINED)
    pt_name_tool(type);
  if (type == pt_timed_type && pt_timed_type) {
    const xptrace_timed_slice_t *slice = user_data;
    if (!slice) {
      if (!atomic_exchange(&pt_timed_bad_reported, true))
        xpt_msg("xpti: perfetto collector: timed slice without user data ignored");
      return;
    }
    timed = (struct xpt_rec_timed){slice->begin_ns, slice->end_ns, slice->track_id, 0, 0, 0};
    if (slice->track_name)
      timed.track_name_len = (uint16_t)strnlen(slice->track_name, 255);
    if (slice->name)
      timed.name_len = (uint16_t)strnlen(slice->name, 255);
    kind = XPT_REC_TIMED;
    extra = &timed;
    extra_len = sizeof timed;
    s1 = slice->track_name, s1_len = timed.track_name_len;
    s2 = slice->name, s2_len = timed.name_len;
  } else if (type == XPTI_TRACE_EDGE_CREATE && event) {
    /* Which visits of the two nodes the edge joins: their latest. */
    const xpti_trace_event_data_t *from = xptiFindEvent(event->source_id);
    const xpti_trace_event_data_t *to = xptiFindEvent(event->target_id);
    edge.source_instance = from ? __atomic_load_n(&from->instance_id, __ATOMIC_RELAXED) : 0;
    edge.target_instance = to ? __atomic_load_n(&to->instance_id, __ATOMIC_RELAXED) : 0;
    kind = XPT_REC_EDGE;
    extra = &edge;
    extra_len = sizeof edge;
  }
  uint8_t cls = pt_class[type & 0xff];
  /* The class is by low byte; user-defined types of other tools share
   * it.  A timed slice or a flow end opens nothing on this thread: taken
   * as a begin, it would fill the thread's open levels for good. */
  if ((type & XPTI_TRACE_USER_DEFINED) &&
      (kind == XPT_REC_TIMED || type == pt_flow_type[0] || type == pt_flow_type[1]))
    cls = 0;
  if ((cls & PT_C_BEGIN) && t->depth >= pt_nest_max)
    pt_nest_evict_oldest(t);
  if (cls & PT_C_END) {
    enum pt_fate fate = pt_nest_pop(t);
    if (fate == PT_DROPPED)
      pt_drop(1); /* its begin was dropped: the slice goes whole */
    if (fate != PT_RECORDED)
      return;
  } else if (!atomic_load_explicit(&pt_open, memory_order_relaxed)) {
    if (cls & PT_C_BEGIN)
      pt_nest_push(t, PT_GATED); /* outside the time windows, its end too */
    return;
  }
  uint32_t keep = (cls & PT_C_END) ? 0 : t->w.hold;
  if (cls & PT_C_BEGIN)
    keep += (uint32_t)sizeof(struct xpt_rec_raw);
  uint64_t uid = event ? event->unique_id : 0;
  bool named = uid != 0 && uid != PT_SEEN_EMPTY;
  if (!t->w.cur && !pt_next_chunk(t)) {
    if (cls & PT_C_BEGIN)
      pt_nest_push(t, PT_DROPPED);
    pt_drop(1);
    return;
  }
  /* An end needs no description: it is matched to its begin by id. */
  if (named && !(cls & PT_C_END) && t->w.seen[pt_seen_slot(uid)] != uid &&
      pt_describe(t, event, uid))
    t->w.seen[pt_seen_slot(uid)] = uid;
  if (!named && kind == XPT_REC_EVENT && !(type & 1)) {
    /* No trace point to describe: begins and instants carry their name
     * (an event's payload name, or the name in the user data). */
    const char *name = NULL;
    if (event && event->reserved.payload)
      name = event->reserved.payload->name;
    if (!name)
      name = xpti_user_data_name(type, user_data);
    if (name) {
      s1 = name;
      s1_len = (uint32_t)strnlen(name, 255);
    }
    uid = 0;
  }
  uint32_t len = extra_len + s1_len + s2_len;
  struct xpt_rec_chunk *c;
  uint32_t end;
  uint8_t *p = pt_reserve(t, xpt_rec_size(len), keep, &c, &end);
  if (cls & PT_C_BEGIN)
    pt_nest_push(t, p ? PT_RECORDED : PT_DROPPED);
  if (!p) {
    pt_drop(1);
    return;
  }
  struct xpt_rec_raw r = {tsc ? pt_ticks() : pt_now(), uid, instance, type, stream, kind, len};
  pt_publish_stamp(t, tsc, r.ts);
  pt_append(p, 0, &r, extra, extra_len, s1, s1_len, s2, s2_len);
  pt_commit(t, c, end);
}

/* The common case: a TLS load, the described-check, a bounds check, the
 * timestamp, the record's stores (two in its compact form) and the
 * release store that publishes it.  Anything else returns false having
 * changed nothing, and the slow path takes it from the start. */
static inline PT_GPR bool pt_record_fast(bool tsc, uint8_t stream, uint16_t type,
                                         const xpti_trace_event_data_t *event,
                                         uint64_t instance) {
  struct pt_rthread *t = pt_tls;
  uint8_t cls = pt_class[type & 0xff];
  if (__builtin_expect(t == NULL || event == NULL || (cls & PT_C_SLOW) ||
                           !atomic_load_explicit(&pt_open, memory_order_relaxed) || t->w.busy,
                       0))
    return false;
  t->w.busy = true; /* before t->w.off is read: see pt_rthread.busy */
  atomic_signal_fence(memory_order_seq_cst);
  uint64_t uid = event->unique_id;
  uint32_t off = t->w.off;
  /* Room for the record, and unless it is an end, for the ends of the
   * open slices and of this one (a begin's end is held from now on). */
  bool compact = instance == 0 && uid <= XPT_REC_COMPACT_UID_MAX;
  uint32_t size = compact ? XPT_REC_COMPACT_SIZE : (uint32_t)sizeof(struct xpt_rec_raw);
  uint32_t need = size;
  if (!(cls & PT_C_END))
    need += t->w.hold + ((cls & PT_C_BEGIN) ? (uint32_t)sizeof(struct xpt_rec_raw) : 0);
  bool ok = t->w.seen[pt_seen_slot(uid)] == uid && t->w.cap - off >= need &&
            t->depth < pt_nest_max && (!(cls & PT_C_END) || pt_nest_top_recorded(t));
  if (__builtin_expect(ok, 1)) {
    if (cls & PT_C_END)
      pt_nest_pop(t);
    else if (cls & PT_C_BEGIN)
      pt_nest_push(t, PT_RECORDED);
    uint64_t ts = tsc ? pt_ticks() : pt_now();
    pt_publish_stamp(t, tsc, ts);
    if (compact) {
      uint64_t w[2] = {ts | XPT_REC_COMPACT_BIT,
                       uid | (uint64_t)type << 40 | (uint64_t)stream << 56};
      memcpy(t->w.data + off, w, sizeof w);
    } else {
      struct xpt_rec_raw r = {ts, uid, instance, type, stream, XPT_REC_EVENT, 0};
      memcpy(t->w.data + off, &r, sizeof r);
    }
    t->w.off = off + size;
    atomic_store_explicit(&t->w.cur->committed, t->w.off, memory_order_release);
  }
  atomic_signal_fence(memory_order_seq_cst);
  t->w.busy = false;
  return ok;
}

static inline __attribute__((always_inline)) void
pt_record(bool tsc, uint8_t stream, uint16_t type, const xpti_trace_event_data_t *event,
          uint64_t instance, const void *user_data) {
  if (__builtin_expect(!pt_record_fast(tsc, stream, type, event, instance), 0))
    pt_record_slow(tsc, stream, type, event, instance, user_data);
}

/* One callback per stream receives every trace type, user-defined ones
 * registered at any time included; the clock is chosen at set-up. */
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

/* Function tracing's direct path (include/xptrace/xptrace_protocol.h): a
 * notification with no parent, instance or user data, recorded when the
 * common case allows, vector registers untouched (PT_GPR; the test
 * functions_direct_gpr disassembles it).  Only the TSC clock has one:
 * reading CLOCK_MONOTONIC goes through the vDSO. */
static __attribute__((target("general-regs-only"))) bool
pt_try_record_tsc(uint8_t stream, uint16_t type, const xpti_trace_event_data_t *event) {
  return pt_record_fast(true, stream, type, event, 0);
}

XPTI_CALLBACK_API xptrace_try_record_t xptraceTryRecordFor(xpti_stream_callback_api_t callback) {
  return callback == pt_stream_cb_tsc ? pt_try_record_tsc : NULL;
}

/* Function tracing's own appends (src/trace/xpt_rec_writer.h), for the
 * same callback. */
static struct xpt_rec_writer *const *pt_writer_slot(void) {
  return (struct xpt_rec_writer *const *)(void *)&pt_tls; /* w is its first member */
}
_Static_assert(offsetof(struct pt_rthread, w) == 0, "the writer first");

static struct xpt_rec_direct pt_direct;

XPTI_CALLBACK_API const struct xpt_rec_direct *
xptraceRecordDirect(xpti_stream_callback_api_t callback) {
  if (callback != pt_stream_cb_tsc || !pt_chunk_size)
    return NULL;
  /* A quarter of a chunk: with the half the collector's own open slices
   * may hold, a fresh chunk always has room for a record and both. */
  pt_direct = (struct xpt_rec_direct){XPT_REC_DIRECT_VERSION,
                                      (pt_chunk_size - (uint32_t)sizeof(struct xpt_rec_chunk)) / 4,
                                      &pt_open, pt_writer_slot};
  return &pt_direct;
}

/* ---- opening the recording ---------------------------------------------- */

/* 256 chunks share the budget (fewer for small budgets), so that threads
 * share it fairly and the drainer frees them in small steps. */
static uint32_t pt_chunk_size_for(uint64_t budget) {
  uint64_t cap = budget / 256;
  cap = cap < XPT_REC_CHUNK_MIN ? XPT_REC_CHUNK_MIN : cap > (256u << 10) ? (256u << 10) : cap;
  return (uint32_t)(cap & ~(uint64_t)4095);
}

/* Open slices a thread may have: their ends' room, held back, stays
 * under half a chunk. */
static uint32_t pt_nest_max_for(uint32_t chunk_size) {
  uint32_t levels = chunk_size / 2 / (uint32_t)sizeof(struct xpt_rec_raw);
  return levels < PT_NEST_LEVELS ? levels : PT_NEST_LEVELS;
}

/* Creates the recording in the output folder dir (exclusively: a new
 * name when taken), sized and mapped.  Normal context only (stream
 * set-up).  The caller names the folder before taking pt_open_lock: the
 * folder's lock is taken by a fork handler that may run before ours,
 * which takes pt_open_lock (the other order would be a deadlock). */
static void pt_rec_open_locked(const char *dir) {
  if (pt_rec.h || pt_rec.failed)
    return;
  if (!dir) {
    pt_rec.failed = true;
    return;
  }
  snprintf(pt_rec.dir, sizeof pt_rec.dir, "%s", dir);
  int fd = -1;
  for (int n = 0; n < 1000 && fd < 0; n++) {
    if (n == 0)
      snprintf(pt_rec.name, sizeof pt_rec.name, "%s", XPT_REC_FILE);
    else
      snprintf(pt_rec.name, sizeof pt_rec.name, "events.%d.xprec", n);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, pt_rec.name);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  int err = fd < 0 ? errno : 0;
  /* A budget the output's file system cannot hold is bounded by half its
   * free space: the rest is for the spill file and the trace. */
  struct statvfs vfs;
  if (!err && fstatvfs(fd, &vfs) == 0 && vfs.f_frsize) {
    uint64_t half = (uint64_t)vfs.f_bavail * vfs.f_frsize / 2;
    if (pt_budget > half) {
      char want[24], got[24];
      uint64_t was = pt_budget;
      pt_budget = half < XPT_BUFFER_MIN ? XPT_BUFFER_MIN : half & ~(uint64_t)0xffff;
      pt_chunk_size = pt_chunk_size_for(pt_budget);
      pt_nest_max = pt_nest_max_for(pt_chunk_size);
      xpt_msg("xpti: perfetto collector: a buffer of %s is more than half the free space of "
              "'%s'; recording in %s",
              xpt_size_text(was, want, sizeof want), dir,
              xpt_size_text(pt_budget & ~(uint64_t)0x3ff, got, sizeof got));
    }
  }
  uint64_t chunks = pt_budget / pt_chunk_size;
  size_t size = XPT_REC_HEADER_SIZE + (size_t)chunks * pt_chunk_size;
  bool shrunk = false;
  fd = xpt_fd_raise(fd); /* held while the program runs: out of its way */
  /* Blocks reserved before use: a full disk is a message, never a SIGBUS
   * when a page is first written.  The ring uses its whole buffer; flush
   * reserves its first step here and the drainer the rest ahead of use
   * (pt_drain.c).  Short of room, a smaller budget. */
  uint64_t reserved = 0;
  while (!err) {
    reserved = pt_policy == XPT_REC_FLUSH ? pt_drain_reserve_step(chunks) : chunks;
    if (ftruncate(fd, (off_t)size) != 0) {
      err = errno;
      break;
    }
    if (fallocate(fd, 0, 0, (off_t)(XPT_REC_HEADER_SIZE + reserved * pt_chunk_size)) == 0)
      break;
    err = errno;
    if (err == EOPNOTSUPP || err == ENOSYS) {
      err = 0;
      reserved = chunks; /* nothing to reserve with: as the file system does */
      break;
    }
    /* A failed fallocate may keep the blocks it got: give them back
     * before asking for less (or giving up). */
    if (ftruncate(fd, 0) != 0)
      break; /* err says why it stopped */
    if (err != ENOSPC || pt_budget / 2 < XPT_BUFFER_MIN)
      break;
    pt_budget /= 2;
    pt_chunk_size = pt_chunk_size_for(pt_budget);
    pt_nest_max = pt_nest_max_for(pt_chunk_size);
    chunks = pt_budget / pt_chunk_size;
    size = XPT_REC_HEADER_SIZE + (size_t)chunks * pt_chunk_size;
    err = 0;
    shrunk = true;
  }
  if (!err && shrunk)
    xpt_msg("xpti: perfetto collector: the disk is nearly full; recording in %llu KiB",
            (unsigned long long)(pt_budget >> 10));
  void *h = MAP_FAILED;
  if (!err && (h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
    err = errno;
  int spill = -1;
  if (!err && pt_policy == XPT_REC_FLUSH) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s%s", dir, pt_rec.name, XPT_REC_SPILL_SUFFIX);
    unlink(path); /* a stale one of a recording of this name that is gone */
    spill = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (spill < 0)
      err = errno;
    spill = xpt_fd_raise(spill);
  }
  if (!err && pt_policy == XPT_REC_RING) {
    pt_rec.owner = calloc(chunks, sizeof *pt_rec.owner);
    pt_rec.chunk_gen = calloc(chunks, sizeof *pt_rec.chunk_gen);
    if (!pt_rec.owner || !pt_rec.chunk_gen)
      err = ENOMEM;
  }
  if (err) {
    xpt_msg("xpti: perfetto collector cannot make its recording in '%s': %s", dir,
            strerror(err));
    if (h != MAP_FAILED)
      munmap(h, size);
    if (fd >= 0) {
      char path[4200];
      snprintf(path, sizeof path, "%s/%s", dir, pt_rec.name);
      unlink(path);
      close(fd);
    }
    pt_rec.failed = true;
    return;
  }
  /* Held while this process lives: a finisher knows it is still running. */
  flock(fd, LOCK_SH);
  struct xpt_rec_header *hd = h;
  hd->version = XPT_REC_VERSION;
  hd->header_size = XPT_REC_HEADER_SIZE;
  hd->chunk_size = pt_chunk_size;
  hd->policy = pt_policy;
  hd->clock = pt_use_tsc ? XPT_REC_CLOCK_TSC : XPT_REC_CLOCK_MONOTONIC;
  hd->format = pt_format_kind;
  hd->annotate_all = pt_annotate;
  hd->pid = getpid();
  hd->ppid = getppid();
  hd->forked = pt_rec.pid != 0 && pt_rec.pid != getpid();
  hd->max_chunks = chunks;
  hd->start_ns = pt_now();
  if (pt_use_tsc) {
    uint64_t ticks, ns;
    xpt_clock_pair(&ticks, &ns);
    hd->tsc_base = ticks;
    hd->tsc_base_ns = ns;
  }
  snprintf(hd->program, sizeof hd->program, "%s", xpt_program_name());
  atomic_store(&hd->dropped, atomic_exchange(&pt_lost_early, 0));
  atomic_store(&hd->state, XPT_REC_RECORDING);
  __atomic_store_n(&hd->magic, XPT_REC_MAGIC, __ATOMIC_RELEASE);
  pt_rec.max_chunks = chunks;
  pt_rec.fd = fd;
  pt_rec.spill_fd = spill;
  pt_rec.base = h;
  pt_rec.map_len = size;
  pt_rec.pid = getpid();
  if (pt_policy == XPT_REC_FLUSH)
    pt_drain_start(spill, fd, pt_rec.base + XPT_REC_HEADER_SIZE, pt_chunk_size, chunks, reserved,
                   hd);
  __atomic_store_n(&pt_rec.h, hd, __ATOMIC_RELEASE);
  for (unsigned id = 0; id < 256; id++) /* a forked child names them again */
    if (pt_stream_on[id] && xpt_api_stream_name((uint8_t)id))
      pt_name_stream((uint8_t)id, xpt_api_stream_name((uint8_t)id));
}

static bool pt_rec_ready(void) {
  if (__atomic_load_n(&pt_rec.h, __ATOMIC_ACQUIRE))
    return true;
  /* A forked child before its first stream call: make its own recording.
   * Threads that record their first event at once wait for the one that
   * opens it (a trylock dropped their events); a signal handler that
   * interrupted the opener drops its event instead of waiting for itself. */
  if (pt_opening)
    return false;
  const char *dir = xpt_output_dir();
  pt_opening = true;
  pthread_mutex_lock(&pt_open_lock);
  pt_rec_open_locked(dir);
  pthread_mutex_unlock(&pt_open_lock);
  pt_opening = false;
  return __atomic_load_n(&pt_rec.h, __ATOMIC_ACQUIRE) != NULL;
}

static void pt_name_stream(uint8_t id, const char *name) {
  if (!pt_rec.h || atomic_exchange(&pt_rec.h->stream_named[id], 1))
    return;
  char *dst = (char *)pt_rec.h + XPT_REC_STREAMS_OFF + (size_t)id * XPT_REC_NAME_LEN;
  strncpy(dst, name, XPT_REC_NAME_LEN - 1);
}

/* ---- the end of the run -------------------------------------------------- */

static _Atomic bool pt_finished;

/* Normal exit, not under `xptrace`: finish the recording here.  Runs as
 * late as a library destructor can, after the program's atexit handlers,
 * so that their events are in. */
static void pt_finish_here(void) {
  if (pt_launcher_finishes || !pt_rec.h || pt_rec.pid != getpid() ||
      atomic_exchange(&pt_finished, true))
    return;
  pt_drain_stop();
  flock(pt_rec.fd, LOCK_UN); /* the finisher takes it exclusively */
  struct xpt_finish_result res;
  if (xpt_finish_recording(pt_rec.dir, pt_rec.name, "xpti:", &res) == 0 && res.dropped)
    xpt_msg("xpti: perfetto collector dropped %" PRIu64 " events%s%s\n", res.dropped,
            res.unpaired ? " (and the other halves of the slices they cut)" : "",
            res.disk_full == 1   ? " (the disk is full)"
            : res.disk_full == 2 ? " (the program closed the recording's descriptor)"
            : res.disk_full == 3 ? " (the recording reached XPTRACE_MAX_SIZE)"
                                 : "");
}

__attribute__((destructor)) static void pt_at_unload(void) { pt_finish_here(); }


/* ---- fork: the child makes a recording of its own ------------------------- */

static void pt_fork_prepare(void) {
  pt_opening = true;
  pthread_mutex_lock(&pt_open_lock);
  pthread_mutex_lock(&pt_dict_lock);
  pthread_mutex_lock(&pt_ring_lock);
  pthread_mutex_lock(&pt_free_lock);
  pt_drain_fork_prepare();
}

static void pt_fork_parent(void) {
  pt_drain_fork_parent();
  pthread_mutex_unlock(&pt_free_lock);
  pthread_mutex_unlock(&pt_ring_lock);
  pthread_mutex_unlock(&pt_dict_lock);
  pthread_mutex_unlock(&pt_open_lock);
  pt_opening = false;
}

/* The parent's chunks and file are the parent's: unmap, never write. */
static void pt_fork_child(void) {
  pt_chunks_fork_child();
  pthread_mutex_unlock(&pt_dict_lock); /* held since pt_fork_prepare, by this thread */
  pthread_mutex_unlock(&pt_open_lock);
  pt_opening = false;
  pt_window_marked = false; /* the parent's window: in the parent's trace */
  pt_free = NULL;
  for (struct pt_rthread *t = atomic_load(&pt_all); t; t = t->next_all) {
    t->w.cur = t->prev = NULL; /* in the parent's mapping */
    t->own = NULL;
    t->w.data = NULL;
    t->w.cap = t->w.off = 0;
    memset(t->w.seen, 0xff, sizeof t->w.seen);
    if (t != pt_tls) { /* that thread does not exist here: reuse its state */
      /* It may have been inside a record at the fork: its busy flag would
       * make every event of the thread that reuses the state a drop. */
      t->w.busy = false;
      t->depth = t->w.hold = 0;
      t->next_free = pt_free;
      pt_free = t;
    } else {
      t->pid = getpid();
      t->tid = (pid_t)syscall(SYS_gettid);
      t->segment = 0;
      /* The slices open at the fork were begun in the parent's trace: their
       * ends here are neither recorded nor drops (as outside a window). */
      uint32_t open = t->depth < pt_nest_max ? t->depth : pt_nest_max;
      for (uint32_t d = 0; d < open; ++d) {
        t->lost[d >> 6] |= 1ull << (d & 63);
        t->gated[d >> 6] |= 1ull << (d & 63);
      }
      t->w.hold = 0;
    }
  }
  pt_dict = NULL;
  pt_dict_off = 0;
  if (pt_rec.base)
    munmap(pt_rec.base, pt_rec.map_len);
  pt_rec.base = NULL;
  if (pt_rec.fd >= 0)
    close(pt_rec.fd); /* the parent's shared lock stays with the parent */
  pt_drain_fork_child(); /* closes the spill file */
  pt_rec.spill_fd = -1;
  free(pt_rec.owner);
  free(pt_rec.chunk_gen);
  pt_rec.owner = NULL;
  pt_rec.chunk_gen = NULL;
  pt_rec.h = NULL;
  pt_rec.fd = -1;
  pt_rec.failed = false;
  atomic_store(&pt_finished, false);
  atomic_store(&pt_lost_early, 0);
  /* Stream names are known again from the framework at the child's
   * first record; pt_rec.pid still names the parent (forked flag). */
}

/* ---- set-up and the subscriber entry points --------------------------- */

static void pt_setup(void) {
  pt_use_tsc = PT_HAVE_TSC && xpt_clock_tsc(true);
  const char *fmt = getenv("XPTRACE_TRACE_FORMAT");
  pt_format_kind = XPT_REC_FORMAT_PROTO;
  if (fmt && !strcmp(fmt, "json"))
    pt_format_kind = XPT_REC_FORMAT_JSON;
  else if (fmt && *fmt && strcmp(fmt, "perfetto"))
    xpt_msg("xpti: XPTRACE_TRACE_FORMAT='%s' is not perfetto or json; using perfetto",
            fmt);
  const char *policy = getenv("XPTRACE_BUFFER_POLICY");
  pt_policy = XPT_REC_FLUSH;
  if (policy && !strcmp(policy, "ring"))
    pt_policy = XPT_REC_RING;
  else if (policy && *policy && strcmp(policy, "flush"))
    xpt_msg("xpti: XPTRACE_BUFFER_POLICY='%s' is not flush or ring; using flush",
            policy);
  const char *annotate = getenv("XPTRACE_ANNOTATE");
  pt_annotate = annotate && !strcmp(annotate, "all");
  if (annotate && *annotate && !pt_annotate && strcmp(annotate, "minimal"))
    xpt_msg("xpti: XPTRACE_ANNOTATE='%s' is not minimal or all; using minimal",
            annotate);
  const char *finisher = getenv("XPTRACE_FINISHER");
  pt_launcher_finishes = finisher && !strcmp(finisher, "launcher");
  pt_budget = xpt_env_buffer_size(); /* at least 8 chunks of the smallest size */
  pt_chunk_size = pt_chunk_size_for(pt_budget);
  pt_nest_max = pt_nest_max_for(pt_chunk_size);
  for (unsigned i = 0; i < 0x100; i++) {
    enum pt_kind k = pt_kind_of((uint16_t)i);
    pt_class[i] = k == PT_KIND_BEGIN ? PT_C_BEGIN : k == PT_KIND_END ? PT_C_END : 0;
    if (i >= 0x80 || i == XPTI_TRACE_EDGE_CREATE)
      pt_class[i] |= PT_C_SLOW;
  }
  pt_timed_type = xpt_api_user_type(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
  pt_flow_type[0] = xpt_api_user_type(XPTRACE_TOOL_NAME, XPTRACE_FLOW_OUT_ID);
  pt_flow_type[1] = xpt_api_user_type(XPTRACE_TOOL_NAME, XPTRACE_FLOW_IN_ID);
  pthread_key_create(&pt_key, pt_thread_exit);
  pthread_atfork(pt_fork_prepare, pt_fork_parent, pt_fork_child);
}

static pthread_mutex_t pt_streams_lock = PTHREAD_MUTEX_INITIALIZER;

/* The windows' own track: a slice per window on the controller thread
 * ("xptrace-windows"), begun once the gate is open, ended before it
 * closes. */
static void pt_window_change(bool open, uint64_t mono_ns) {
  if (mono_ns == 0) { /* registration: the state then, nothing to mark */
    atomic_store(&pt_open, open);
    return;
  }
  if (open && !pt_window_marked) {
    atomic_store(&pt_open, true);
    pt_record_slow(pt_use_tsc, pt_windows_stream, XPTI_TRACE_FUNCTION_BEGIN, NULL, 0,
                   "xptrace window");
    pt_window_marked = true;
  } else if (!open) {
    if (pt_window_marked)
      pt_record_slow(pt_use_tsc, pt_windows_stream, XPTI_TRACE_FUNCTION_END, NULL, 0,
                     "xptrace window");
    pt_window_marked = false;
    atomic_store(&pt_open, false);
  }
}

static void pt_windows_setup(void) {
  uint8_t id = xptiRegisterStream("xptrace.windows");
  if (id == XPTI_INVALID_STREAM_ID)
    return;
  pthread_mutex_lock(&pt_streams_lock);
  pt_name_stream(id, "xptrace.windows");
  pthread_mutex_unlock(&pt_streams_lock);
  pt_windows_stream = id;
  xpt_windows_start(pt_window_change);
}

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
  const char *dir = xpt_output_dir();
  pt_opening = true;
  pthread_mutex_lock(&pt_open_lock);
  pt_rec_open_locked(dir);
  pthread_mutex_unlock(&pt_open_lock);
  pt_opening = false;
  pthread_mutex_lock(&pt_streams_lock);
  bool fresh = !atomic_exchange(&pt_stream_on[id], 1);
  pt_name_stream(id, stream);
  pthread_mutex_unlock(&pt_streams_lock);
  if (fresh)
    xpt_api_subscribe(id, stream, pt_use_tsc ? pt_stream_cb_tsc : pt_stream_cb_mono);
  static pthread_once_t windows_once = PTHREAD_ONCE_INIT;
  if (xpt_windows_configured())
    pthread_once(&windows_once, pt_windows_setup);
}

/* The recording holds everything already: nothing to do until the end. */
XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) { (void)stream; }
