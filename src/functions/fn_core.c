/* xptrace function hooks — libxptrace_functions.so, preloaded by
 * `xptrace run --functions [REGEX]` (see docs/functions.md).
 *
 * Function entries and exits become XPTI function_begin/function_end
 * notifications on the stream "xptrace.functions".  Three ways in:
 * compiler hooks (__cyg_profile_func_enter/exit, -finstrument-functions),
 * patched nops (-pg -mfentry -mnop-mcount, -fpatchable-function-entry)
 * and patched entries of unmodified code (fn_patch.c).
 *
 * Hot path: one initial-exec TLS load, a lock-free look-up of the
 * function's address (compiler hooks only; patched entries carry their
 * function), a push on the thread's shadow stack and one notification.
 * A function's name is resolved, and its XPTI event made, the first time
 * its address is seen.  The shadow stack keeps nesting right when calls
 * do not return (longjmp, exceptions, exit, cancellation): a frame is
 * known by its stack address, and a frame found at or above a newer one
 * is gone and ended. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <xptrace/xptrace_protocol.h>

#include "fn_internal.h"
#include "xpt_msg.h"

fn_settings_t fn_cfg;
atomic_bool fn_live;

static uint8_t fn_stream = XPTI_INVALID_STREAM_ID;
static uint16_t fn_timed_type; /* --min-duration: the xptrace timed slice */
static pthread_key_t fn_key;

static __thread fn_thread_t *fn_tls __attribute__((tls_model("initial-exec")));
/* The trace collector's direct appends (fn_rec_begin), when it is the
 * stream's one listener at start; written before fn_live. */
static const struct xpt_rec_direct *fn_rec;

/* ---- functions by address -------------------------------------------------- */

#define FN_MAP_BITS 16
#define FN_MAP_SIZE (1u << FN_MAP_BITS)
static fn_func_t fn_map[FN_MAP_SIZE];
static pthread_mutex_t fn_map_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool fn_map_full_said;

static inline uint32_t fn_hash(uintptr_t addr) {
  return (uint32_t)(((uint64_t)addr * 0x9e3779b97f4a7c15ull) >> (64 - FN_MAP_BITS));
}

/* The slot of addr, or the free slot where it would go (NULL: full). */
static inline fn_func_t *fn_map_probe(uintptr_t addr) {
  uint32_t i = fn_hash(addr);
  for (uint32_t n = 0; n < FN_MAP_SIZE; ++n, i = (i + 1) & (FN_MAP_SIZE - 1)) {
    uintptr_t k = atomic_load_explicit(&fn_map[i].addr, memory_order_acquire);
    if (k == addr || k == 0)
      return &fn_map[i];
  }
  return NULL;
}

static xpti_trace_event_data_t *fn_make_event(const char *name, const char *module,
                                              uintptr_t offset, uintptr_t addr) {
  /* The trace point key is (file, name, line, column): the module and the
   * offset in it keep two static functions of one name apart. */
  xpti_payload_t p = xpti_payload_make(name, module, 0, (uint32_t)offset, (const void *)addr);
  uint64_t instance;
  return xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
}

/* Insert under fn_map_lock; name NULL: resolve it.  landing: where its
 * calls return to (-pg hooks), set before the entry is published. */
static fn_func_t *fn_map_insert_locked(uintptr_t addr, const char *known, uintptr_t landing) {
  fn_func_t *f = fn_map_probe(addr);
  if (!f) {
    if (!atomic_exchange(&fn_map_full_said, true))
      xpt_msg("xpti: functions: more than %u functions seen; the others are not traced",
              FN_MAP_SIZE - 1);
    return NULL;
  }
  if (atomic_load_explicit(&f->addr, memory_order_relaxed) == addr)
    return f;
  char raw[512], shown[1024];
  const char *module = NULL;
  uintptr_t offset = 0;
  const char *name = known;
  if (!name) {
    if (fn_name_of(addr, raw, sizeof raw, &module, &offset))
      name = fn_demangle(raw, shown, sizeof shown);
    else {
      snprintf(shown, sizeof shown, "0x%lx", (unsigned long)addr);
      name = shown;
    }
  } else {
    Dl_info info;
    if (dladdr((void *)addr, &info) && info.dli_fname) {
      module = info.dli_fname;
      offset = addr - (uintptr_t)info.dli_fbase;
    }
  }
  f->event = fn_selected(name) ? fn_make_event(name, module, offset, addr) : NULL;
  uint64_t uid = f->event ? f->event->unique_id : 0;
  f->word = uid && uid <= XPT_REC_COMPACT_UID_MAX ? uid | (uint64_t)fn_stream << 56 : 0;
  f->landing = landing;
  atomic_store_explicit(&f->addr, addr, memory_order_release);
  return f;
}

static fn_func_t *fn_func_get_landing(uintptr_t addr, uintptr_t landing) {
  fn_func_t *f = fn_map_probe(addr);
  if (f && atomic_load_explicit(&f->addr, memory_order_acquire) == addr)
    return f;
  pthread_mutex_lock(&fn_map_lock);
  f = fn_map_insert_locked(addr, NULL, landing);
  pthread_mutex_unlock(&fn_map_lock);
  return f;
}

fn_func_t *fn_func_get(uintptr_t addr) { return fn_func_get_landing(addr, 0); }

fn_func_t *fn_func_add(uintptr_t addr, const char *name) {
  pthread_mutex_lock(&fn_map_lock);
  fn_func_t *f = fn_map_insert_locked(addr, name, 0);
  pthread_mutex_unlock(&fn_map_lock);
  return f;
}

/* ---- threads ----------------------------------------------------------------- */

static uint64_t fn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fn_end_frame(fn_thread_t *t, fn_frame_t *fr, uint64_t now);

static void fn_thread_end_all(fn_thread_t *t) {
  uint64_t now = fn_cfg.min_duration ? fn_now() : 0;
  while (t->depth > 0)
    fn_end_frame(t, &t->frames[--t->depth], now);
  t->recorded = 0;
  t->overflow = 0;
}

/* A thread that has ended for us: busy for good (set at start; in .bss,
 * not 128 KiB of .data), so that what it still runs (other TLS
 * destructors freeing memory through a traced free) records nothing
 * after its calls were ended.  Never written after that. */
static fn_thread_t fn_thread_ended;

/* A thread ends (return, pthread_exit, cancellation): what it left open
 * ends now. */
static void fn_thread_gone(void *arg) {
  fn_thread_t *t = arg;
  ++t->busy;
  fn_thread_end_all(t);
  fn_tls = &fn_thread_ended;
  munmap(t, sizeof *t);
}

static fn_thread_t *fn_thread_new(void) {
  /* mmap: pages are touched only as deep as the calls go. */
  void *p = mmap(NULL, sizeof(fn_thread_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  fn_thread_t *t = p;
  t->wslot = fn_rec ? fn_rec->slot() : NULL;
  fn_tls = t;
  pthread_setspecific(fn_key, t);
  return t;
}

static inline fn_thread_t *fn_thread(void) {
  fn_thread_t *t = fn_tls;
  if (__builtin_expect(t != NULL, 1))
    return t;
  if (!atomic_load_explicit(&fn_live, memory_order_relaxed))
    return NULL;
  return fn_thread_new();
}

/* ---- the direct path ------------------------------------------------------------ */

/* While the stream's one listener has a direct recorder
 * (xptrace/xptrace_protocol.h: the Perfetto recorder's), begins and ends
 * go straight to it: no proxy and no dispatcher, and from the patched
 * entries' trampolines no vector register saved (FN_GPR code only).
 * Found once at start; a later change of listener takes the usual way. */
static _Atomic(xpti_stream_callback_api_t) *fn_sole; /* the dispatcher's words */
static _Atomic bool *fn_enabled;
static _Atomic(xpti_stream_callback_api_t) fn_direct_listener; /* written before fn_live */
static _Atomic(xptrace_try_record_t) fn_direct_try;

/* Tracing is on and the collector found at start is the stream's one
 * listener. */
static inline __attribute__((always_inline)) FN_GPR bool fn_direct_ok(void) {
  _Atomic(xpti_stream_callback_api_t) *sole = fn_sole;
  if (!sole || !atomic_load_explicit(fn_enabled, memory_order_relaxed))
    return false;
  xpti_stream_callback_api_t now = atomic_load_explicit(sole, memory_order_acquire);
  return now && now == atomic_load_explicit(&fn_direct_listener, memory_order_relaxed);
}

static inline __attribute__((always_inline)) FN_GPR bool
fn_direct(uint16_t type, const xpti_trace_event_data_t *event) {
  if (!fn_direct_ok())
    return false;
  return atomic_load_explicit(&fn_direct_try, memory_order_relaxed)(fn_stream, type, event);
}

/* A call's begin appended by us to the collector's chunk, under its rules
 * (src/trace/xpt_rec_writer.h): the nesting is the shadow stack's, so
 * the collector's type classes and nesting bits are not needed.  false:
 * nothing changed, and the begin takes the ordinary way (the collector
 * describes the function, takes the next chunk or drops), its end too. */
static inline __attribute__((always_inline)) FN_GPR bool fn_rec_begin(fn_thread_t *t,
                                                                      const fn_func_t *fn) {
  uint64_t word = fn->word;
  if (!word || !t->wslot || !fn_direct_ok() ||
      !atomic_load_explicit(fn_rec->open, memory_order_relaxed))
    return false;
  struct xpt_rec_writer *w = *t->wslot;
  if (!w || w->busy)
    return false;
  w->busy = true; /* before off is read: a handler's record would go there */
  atomic_signal_fence(memory_order_seq_cst);
  uint64_t uid = word & XPT_REC_COMPACT_UID_MAX;
  uint32_t off = w->off, hold = w->hold;
  bool ok = w->seen[XPT_REC_SEEN_SLOT(uid)] == uid && hold < fn_rec->hold_limit &&
            w->cap - off >= 2 * XPT_REC_COMPACT_SIZE + hold;
  if (__builtin_expect(ok, 1)) {
    uint64_t rec[2] = {__rdtsc() | XPT_REC_COMPACT_BIT,
                       word | (uint64_t)XPTI_TRACE_FUNCTION_BEGIN << 40};
    memcpy(w->data + off, rec, sizeof rec);
    w->off = off + XPT_REC_COMPACT_SIZE;
    w->hold = hold + XPT_REC_COMPACT_SIZE; /* its end's room */
    atomic_store_explicit(&w->cur->committed, off + XPT_REC_COMPACT_SIZE, memory_order_release);
    t->w = w;
  }
  atomic_signal_fence(memory_order_seq_cst);
  w->busy = false;
  return ok;
}

/* The end of a call whose begin fn_rec_begin appended: in the room its
 * begin held.  false (the thread's collector state ended or was replaced
 * meanwhile): the end takes the ordinary way. */
static inline __attribute__((always_inline)) FN_GPR bool fn_rec_end(fn_thread_t *t,
                                                                    const fn_func_t *fn) {
  struct xpt_rec_writer *w = *t->wslot;
  if (!w || w != t->w || w->busy)
    return false;
  w->busy = true;
  atomic_signal_fence(memory_order_seq_cst);
  uint32_t off = w->off, hold = w->hold;
  bool ok = w->cap - off >= XPT_REC_COMPACT_SIZE;
  if (__builtin_expect(ok, 1)) {
    uint64_t rec[2] = {__rdtsc() | XPT_REC_COMPACT_BIT,
                       fn->word | (uint64_t)XPTI_TRACE_FUNCTION_END << 40};
    memcpy(w->data + off, rec, sizeof rec);
    w->off = off + XPT_REC_COMPACT_SIZE;
    w->hold = hold >= XPT_REC_COMPACT_SIZE ? hold - XPT_REC_COMPACT_SIZE : 0;
    atomic_store_explicit(&w->cur->committed, off + XPT_REC_COMPACT_SIZE, memory_order_release);
  }
  atomic_signal_fence(memory_order_seq_cst);
  w->busy = false;
  return ok;
}

static void fn_direct_find(void) {
  const char *dispatcher = secure_getenv("XPTI_FRAMEWORK_DISPATCHER");
  void *fw = dispatcher && *dispatcher ? dlopen(dispatcher, RTLD_NOLOAD | RTLD_LAZY) : NULL;
  void *sym = fw ? dlsym(fw, "xptraceStreamSoleListener") : NULL; /* ours, not Intel's */
  void *sym_enabled = fw ? dlsym(fw, "xptraceTraceEnabledWord") : NULL;
  if (!sym || !sym_enabled)
    goto done;
  const void *(*sole_of)(uint8_t), *(*enabled_word)(void);
  memcpy(&sole_of, &sym, sizeof sym);
  memcpy(&enabled_word, &sym_enabled, sizeof sym_enabled);
  _Atomic(xpti_stream_callback_api_t) *sole = (void *)sole_of(fn_stream);
  xpti_stream_callback_api_t listener = atomic_load(sole);
  Dl_info info;
  if (!listener || !dladdr((void *)listener, &info) || !info.dli_fname)
    goto done;
  void *lib = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
  sym = lib ? dlsym(lib, "xptraceTryRecordFor") : NULL;
  if (sym) {
    xptrace_try_record_t (*try_for)(xpti_stream_callback_api_t);
    memcpy(&try_for, &sym, sizeof sym);
    xptrace_try_record_t try_record = try_for(listener);
    if (try_record) {
      atomic_store(&fn_direct_listener, listener);
      atomic_store(&fn_direct_try, try_record);
      fn_enabled = (void *)enabled_word();
      fn_sole = sole;
    }
    void *rec_sym = try_record ? dlsym(lib, "xptraceRecordDirect") : NULL;
    if (rec_sym) {
      const struct xpt_rec_direct *(*rec_for)(xpti_stream_callback_api_t);
      memcpy(&rec_for, &rec_sym, sizeof rec_sym);
      const struct xpt_rec_direct *rec = rec_for(listener);
      if (rec && rec->version == XPT_REC_DIRECT_VERSION)
        fn_rec = rec;
    }
  }
  if (lib)
    dlclose(lib);
done:
  if (fw)
    dlclose(fw);
}

static inline void fn_notify(uint16_t type, xpti_trace_event_data_t *event) {
  if (!fn_direct(type, event))
    xptiNotifySubscribers(fn_stream, type, NULL, event, 0, NULL);
}

/* ---- begin and end ------------------------------------------------------------- */

static void fn_end_frame(fn_thread_t *t, fn_frame_t *fr, uint64_t now) {
  if (!fr->recorded || fr->forked)
    return;
  xpti_trace_event_data_t *ev = fr->fn->event;
  if (!fn_cfg.min_duration) {
    if (!fr->direct || !fn_rec_end(t, fr->fn))
      fn_notify(XPTI_TRACE_FUNCTION_END, ev);
    return;
  }
  if (now - fr->t0 < fn_cfg.min_duration)
    return;
  uint64_t tid = (uint64_t)syscall(SYS_gettid);
  char track[48];
  snprintf(track, sizeof track, "functions >= min-duration, thread %llu",
           (unsigned long long)tid);
  xptrace_timed_slice_t s = {fr->t0, now, (1ull << 40) | tid, track, NULL};
  xptiNotifySubscribers(fn_stream, fn_timed_type, NULL, ev, 0, &s);
}

/* Frames at or above sp (>= when a new call enters, > when one exits) are
 * gone: a longjmp or an unwind went past them. */
static inline void fn_pop_dead(fn_thread_t *t, uintptr_t sp, bool inclusive) {
  if (__builtin_expect(t->depth == 0, 0))
    return;
  fn_frame_t *top = &t->frames[t->depth - 1];
  if (__builtin_expect(inclusive ? top->sp > sp : top->sp >= sp, 1))
    return;
  uint64_t now = fn_cfg.min_duration ? fn_now() : 0;
  while (t->depth > 0 &&
         (inclusive ? t->frames[t->depth - 1].sp <= sp : t->frames[t->depth - 1].sp < sp)) {
    fn_frame_t *fr = &t->frames[--t->depth];
    t->recorded -= fr->recorded;
    fn_end_frame(t, fr, now);
  }
  t->overflow = 0;
}

/* A frame's fields at its call's entry (FN_GPR: the trampolines' fast
 * path sets frames too). */
static inline __attribute__((always_inline)) FN_GPR void
fn_frame_init(fn_frame_t *fr, uintptr_t sp, fn_func_t *fn, uintptr_t ret, bool recorded,
              bool direct) {
  fr->sp = sp;
  fr->fn = fn;
  fr->ret = ret;
  fr->recorded = recorded;
  fr->direct = direct;
  fr->forked = 0;
  fr->site = 0;
}

/* Push a frame for fn; returns it (NULL: not pushed). */
static inline fn_frame_t *fn_push(fn_thread_t *t, fn_func_t *fn, uintptr_t sp) {
  if (__builtin_expect(t->depth >= FN_MAX_DEPTH, 0))
    return NULL;
  fn_frame_t *fr = &t->frames[t->depth++];
  fn_frame_init(fr, sp, fn, 0, false, false);
  if (t->recorded < fn_cfg.depth) {
    fr->recorded = 1;
    ++t->recorded;
    if (!fn_cfg.min_duration) {
      if (fn_rec_begin(t, fn))
        fr->direct = 1;
      else
        fn_notify(XPTI_TRACE_FUNCTION_BEGIN, fn->event);
    } else
      fr->t0 = fn_now();
  }
  return fr;
}

static inline void fn_pop(fn_thread_t *t) {
  fn_frame_t *fr = &t->frames[--t->depth];
  t->recorded -= fr->recorded;
  fn_end_frame(t, fr, fn_cfg.min_duration ? fn_now() : 0);
}

/* ---- compiler hooks (-finstrument-functions) ----------------------------------- */

void fn_enter_cyg(uintptr_t addr, uintptr_t sp, uintptr_t site) {
  fn_thread_t *t = fn_thread();
  if (!t || t->busy)
    return;
  ++t->busy;
  fn_func_t *f = fn_func_get(addr);
  if (f && f->event) {
    /* A callee inlined into the top frame's function calls its hooks from
     * that function's frame: the same stack address and the same call
     * site.  It is nested in it, not a successor whose caller is gone
     * (clang inlines atoi into main: main ended at atoi's entry). */
    const fn_frame_t *top = t->depth ? &t->frames[t->depth - 1] : NULL;
    bool inlined = top && site && top->sp == sp && top->site == site;
    fn_pop_dead(t, sp, !inlined);
    fn_frame_t *fr = fn_push(t, f, sp);
    if (fr)
      fr->site = site;
    else
      ++t->overflow;
  }
  --t->busy;
}

void fn_exit_cyg(uintptr_t addr, uintptr_t sp) {
  fn_thread_t *t = fn_tls;
  if (!t || t->busy)
    return;
  ++t->busy;
  /* Frames below the exiting function's are gone, whichever it is. */
  fn_pop_dead(t, sp, false);
  if (__builtin_expect(t->overflow != 0, 0)) {
    fn_func_t *f = fn_func_get(addr);
    if (f && f->event)
      --t->overflow;
  } else if (t->depth > 0 &&
             atomic_load_explicit(&t->frames[t->depth - 1].fn->addr, memory_order_relaxed) == addr) {
    fn_pop(t); /* no look-up: the top frame says which function it is */
  }
  --t->busy;
}

/* The hooks' common case whole, inline: a function seen before found in
 * its home slot, no frame to end first, appended directly.  Anything else
 * (or nothing to record) goes to the general functions above, which start
 * from the beginning. */
FN_API void __cyg_profile_func_enter(void *this_fn, void *call_site) {
  uintptr_t addr = (uintptr_t)this_fn, sp = (uintptr_t)__builtin_frame_address(0) + 16;
  fn_thread_t *t = fn_tls;
  fn_func_t *f = &fn_map[fn_hash(addr)];
  if (__builtin_expect(t && !t->busy && t->depth < FN_MAX_DEPTH && t->overflow == 0 &&
                           (t->depth == 0 || t->frames[t->depth - 1].sp > sp) &&
                           atomic_load_explicit(&f->addr, memory_order_acquire) == addr &&
                           t->recorded < fn_cfg.depth && !fn_cfg.min_duration,
                       1)) {
    if (!f->event)
      return; /* not selected */
    ++t->busy;
    atomic_signal_fence(memory_order_seq_cst);
    bool done = fn_rec_begin(t, f);
    if (done) {
      fn_frame_init(&t->frames[t->depth], sp, f, 0, true, true);
      t->frames[t->depth].site = (uintptr_t)call_site;
      ++t->recorded;
      ++t->depth;
    }
    atomic_signal_fence(memory_order_seq_cst);
    --t->busy;
    if (done)
      return;
  }
  fn_enter_cyg(addr, sp, (uintptr_t)call_site);
}

FN_API void __cyg_profile_func_exit(void *this_fn, void *call_site) {
  (void)call_site;
  uintptr_t addr = (uintptr_t)this_fn, sp = (uintptr_t)__builtin_frame_address(0) + 16;
  fn_thread_t *t = fn_tls;
  if (__builtin_expect(t && !t->busy && t->overflow == 0 && t->depth > 0, 1)) {
    fn_frame_t *fr = &t->frames[t->depth - 1];
    if (fr->sp >= sp && fr->direct && !fr->forked &&
        atomic_load_explicit(&fr->fn->addr, memory_order_relaxed) == addr) {
      ++t->busy;
      atomic_signal_fence(memory_order_seq_cst);
      bool done = fn_rec_end(t, fr->fn);
      if (done) {
        --t->recorded;
        --t->depth;
      }
      atomic_signal_fence(memory_order_seq_cst);
      --t->busy;
      if (done)
        return;
    }
  }
  fn_exit_cyg(addr, sp);
}

/* ---- patched entries (fn_tramp.S calls these) ---------------------------------- */

/* The trampolines' first try, saving general-purpose registers only: the
 * common case whole, or nothing changed and 0 (the trampoline then saves
 * everything and calls the general function below). */
FN_GPR int fn_enter_fast(fn_func_t *fn, uintptr_t *slot) {
  fn_thread_t *t = fn_tls;
  if (!t || t->busy || fn_cfg.min_duration || t->depth >= FN_MAX_DEPTH ||
      !atomic_load_explicit(&fn_live, memory_order_relaxed))
    return 0;
  uintptr_t ret = *slot;
  /* A tail call (its slot already ours) or frames to end first: general. */
  if (t->depth > 0 && t->frames[t->depth - 1].sp <= (uintptr_t)slot)
    return 0;
  bool record = t->recorded < fn_cfg.depth, direct = false;
  ++t->busy;
  atomic_signal_fence(memory_order_seq_cst);
  if (record && !(direct = fn_rec_begin(t, fn)) &&
      !fn_direct(XPTI_TRACE_FUNCTION_BEGIN, fn->event)) {
    atomic_signal_fence(memory_order_seq_cst);
    --t->busy;
    return 0;
  }
  fn_frame_init(&t->frames[t->depth], (uintptr_t)slot, fn, ret, record, direct);
  t->recorded += record;
  ++t->depth;
  t->hijacked = true; /* the stub's call puts fn->landing in the slot */
  atomic_signal_fence(memory_order_seq_cst);
  --t->busy;
  return 1;
}

/* The real return address, or 0: the general function below decides. */
FN_GPR uintptr_t fn_exit_fast(uintptr_t *slot) {
  fn_thread_t *t = fn_tls;
  if (!t || t->busy || fn_cfg.min_duration || t->depth == 0)
    return 0;
  fn_frame_t *fr = &t->frames[t->depth - 1];
  if (fr->sp != (uintptr_t)slot)
    return 0;
  ++t->busy;
  atomic_signal_fence(memory_order_seq_cst);
  if (fr->recorded && !fr->forked &&
      !(fr->direct ? fn_rec_end(t, fr->fn) : fn_direct(XPTI_TRACE_FUNCTION_END, fr->fn->event))) {
    atomic_signal_fence(memory_order_seq_cst);
    --t->busy;
    return 0;
  }
  uintptr_t ret = fr->ret; /* before the pop: a signal's hooks may reuse the frame */
  t->recorded -= fr->recorded;
  --t->depth;
  atomic_signal_fence(memory_order_seq_cst);
  --t->busy;
  return ret;
}

/* 1: a frame was pushed, and the trampoline enters the function through
 * the stub's call, which puts fn->landing in the slot (the return comes
 * through fn_tramp_exit, which asks for the real address back); 0: the
 * function runs untouched. */
int fn_enter_patched(fn_func_t *fn, uintptr_t *slot) {
  fn_thread_t *t = fn_thread();
  if (!t || t->busy || !atomic_load_explicit(&fn_live, memory_order_relaxed))
    return 0;
  ++t->busy;
  /* A tail call from a traced function reuses its slot: the real return
   * address is the one kept for it. */
  uintptr_t ret = *slot;
  if (t->depth > 0) {
    const fn_frame_t *top = &t->frames[t->depth - 1];
    if (top->sp == (uintptr_t)slot && top->ret && ret == top->fn->landing)
      ret = top->ret;
  }
  fn_pop_dead(t, (uintptr_t)slot, true);
  fn_frame_t *fr = fn_push(t, fn, (uintptr_t)slot);
  if (fr) {
    fr->ret = ret;
    t->hijacked = true;
  }
  --t->busy;
  return fr != NULL;
}

uintptr_t fn_exit_patched(uintptr_t *slot) {
  fn_thread_t *t = fn_tls;
  ++t->busy;
  fn_pop_dead(t, (uintptr_t)slot, false);
  if (t->depth == 0 || t->frames[t->depth - 1].sp != (uintptr_t)slot) {
    /* Cannot happen unless the program moved its own return address. */
    xpt_msg("xpti: functions: a patched function returned to an unknown frame; aborting");
    abort();
  }
  uintptr_t ret = t->frames[t->depth - 1].ret;
  fn_pop(t);
  --t->busy;
  return ret;
}

/* ---- -pg builds: mcount and __fentry__ (fn_tramp.S) ----------------------------- */

/* pc: the hook's return address, in the function (its key); slot: the
 * function's return address.  The slot is hijacked to fn_tramp_exit, as
 * a patched entry's is to its landing.  Returns 1 when done, 0 when the
 * general function below must decide (it then saves every register). */
FN_GPR int fn_enter_mcount_fast(uintptr_t pc, uintptr_t *slot) {
  fn_func_t *f = &fn_map[fn_hash(pc)];
  if (atomic_load_explicit(&f->addr, memory_order_acquire) != pc)
    return 0;
  if (!f->event)
    return 1; /* not selected */
  uintptr_t landing = f->landing;
  if (!landing || !fn_enter_fast(f, slot))
    return 0;
  *slot = landing;
  return 1;
}

void fn_enter_mcount(uintptr_t pc, uintptr_t *slot) {
  if (!atomic_load_explicit(&fn_live, memory_order_relaxed))
    return; /* before our constructor: no settings, no stream */
  fn_thread_t *t = fn_thread();
  if (!t || t->busy)
    return;
  ++t->busy; /* a signal's hooks must not wait for the map's lock */
  fn_func_t *f = fn_func_get_landing(pc, (uintptr_t)fn_tramp_exit);
  --t->busy;
  if (!f || !f->event || !f->landing)
    return;
  if (fn_enter_patched(f, slot))
    *slot = f->landing;
}

/* Only a slot that still holds our landing is given its address back: a
 * frame a jump left without our seeing it (a longjmp inside the C
 * library) lies in memory that may now be live frames of the caller. */
void fn_unwind_begin(void) {
  fn_thread_t *t = fn_tls;
  if (!t || !t->hijacked)
    return;
  for (uint32_t i = 0; i < t->depth; ++i) {
    fn_frame_t *fr = &t->frames[i];
    if (fr->ret && *(uintptr_t *)fr->sp == fr->fn->landing)
      *(uintptr_t *)fr->sp = fr->ret;
  }
  t->hijacked = false;
}

void fn_unwind_jump(uintptr_t target_sp) {
  fn_thread_t *t = fn_tls;
  if (!t || t == &fn_thread_ended || t->busy)
    return;
  ++t->busy;
  fn_pop_dead(t, target_sp, false);
  --t->busy;
}

void fn_unwind_caught(uintptr_t sp) {
  fn_thread_t *t = fn_tls;
  if (!t || t->busy)
    return;
  ++t->busy;
  fn_pop_dead(t, sp, false);
  for (uint32_t i = 0; i < t->depth; ++i) {
    fn_frame_t *fr = &t->frames[i];
    if (fr->ret && *(uintptr_t *)fr->sp == fr->ret) {
      *(uintptr_t *)fr->sp = fr->fn->landing;
      t->hijacked = true;
    }
  }
  --t->busy;
}

/* ---- start and end ------------------------------------------------------------- */

static void fn_settings_read(void) {
  fn_cfg.depth = FN_MAX_DEPTH;
  const char *text = getenv("XPTRACE_FUNCTIONS");
  if (text && *text) {
    if (fn_regex_compile(text, &fn_cfg.select)) {
      fn_cfg.has_select = true;
      fn_cfg.select_text = text;
    } else {
      xpt_msg("xpti: functions: XPTRACE_FUNCTIONS='%s' is not a regular expression; "
              "tracing no function", text);
      fn_cfg.select_text = text;
      fn_cfg.has_select = fn_regex_compile("$^", &fn_cfg.select);
    }
  }
  text = getenv("XPTRACE_FUNCTIONS_EXCLUDE");
  if (text && *text) {
    if (fn_regex_compile(text, &fn_cfg.exclude))
      fn_cfg.has_exclude = true;
    else
      xpt_msg("xpti: functions: XPTRACE_FUNCTIONS_EXCLUDE='%s' is not a regular expression; "
              "ignored", text);
  }
  text = getenv("XPTRACE_FUNCTIONS_DEPTH");
  if (text && *text && !fn_parse_depth(text, &fn_cfg.depth))
    xpt_msg("xpti: functions: XPTRACE_FUNCTIONS_DEPTH='%s' is not a depth from 1 to %u; "
            "using %u", text, FN_MAX_DEPTH, FN_MAX_DEPTH);
  text = getenv("XPTRACE_FUNCTIONS_MIN_DURATION");
  if (text && *text && !fn_parse_duration(text, &fn_cfg.min_duration))
    xpt_msg("xpti: functions: XPTRACE_FUNCTIONS_MIN_DURATION='%s' is not a duration "
            "(e.g. 10us, 1ms); recording every call", text);
}

/* exit() from deep inside: the calls still open on this thread end here,
 * before the collectors finish (in their libraries' destructors).  The
 * atexit handler alone does not order that: registered in our constructor,
 * before __libc_start_main registers the loader's destructor pass, it runs
 * inside that pass (glibc: with our library's destructors, by luck before
 * the collectors') or after it (under TSan's interceptor: every collector
 * had reported three calls unclosed).  So exit itself is wrapped too. */
static void fn_at_exit(void) { fn_end_open_calls(); }

void fn_end_open_calls(void) {
  fn_thread_t *t = fn_tls;
  if (!t || t == &fn_thread_ended)
    return;
  ++t->busy;
  fn_unwind_begin();
  fn_thread_end_all(t);
  --t->busy;
}

typedef void (*fn_exit_t)(int);

FN_API void exit(int status) {
  FN_NEXT(fn_exit_t, "exit");
  fn_at_exit();
  if (next)
    next(status);
  _exit(status); /* no exit to call: cannot happen with a C library loaded */
}

/* A forked child: the calls open at the fork began in the parent's
 * trace.  Those appended directly have no begin in the child's recording
 * and hold no room there: their ends are not recorded (the collector
 * judges those that went the ordinary way, as every slice open at a
 * fork). */
static void fn_fork_child(void) {
  fn_thread_t *t = fn_tls;
  if (!t || t == &fn_thread_ended)
    return;
  for (uint32_t i = 0; i < t->depth; ++i)
    t->frames[i].forked = t->frames[i].direct;
  t->w = NULL;
}

__attribute__((constructor(200))) static void fn_start(void) {
  fn_thread_ended.busy = 1;
  fn_settings_read();
  if (pthread_key_create(&fn_key, fn_thread_gone) != 0)
    return;
  if (xptiInitialize("xptrace.functions", 1, 0, "1.0") == XPTI_RESULT_FAIL)
    return; /* no dispatcher: nothing can listen */
  fn_stream = xptiRegisterStream("xptrace.functions");
  if (fn_stream == XPTI_INVALID_STREAM_ID)
    return;
  fn_direct_find();
  if (fn_cfg.min_duration) {
    fn_timed_type = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
    if (!fn_timed_type) {
      xpt_msg("xpti: functions: no timed slice type from the dispatcher; --min-duration off");
      fn_cfg.min_duration = 0;
    }
  }
  atexit(fn_at_exit);
  pthread_atfork(NULL, NULL, fn_fork_child);
  atomic_store(&fn_live, true);
  bool cyg = fn_program_has_cyg_hooks();
  if (!cyg || fn_cfg.has_select) {
    /* Patching calls libraries it may patch (libdw's liblzma, zlib): those
     * calls are ours, not the program's. */
    fn_thread_t *t = fn_thread();
    if (t)
      ++t->busy;
    fn_patch_program(!cyg);
    pthread_mutex_lock(&fn_map_lock);
    fn_names_release();
    pthread_mutex_unlock(&fn_map_lock);
    if (t)
      --t->busy;
  }
}

__attribute__((destructor)) static void fn_stop(void) {
  atomic_store(&fn_live, false);
  fn_unpatch_program();
  fn_got_unhook();
}
