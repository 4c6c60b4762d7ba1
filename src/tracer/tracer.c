/* Generic tracer core; see xpt_tracer.h for the model. */
#include "xpt_tracer.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct xpt_tracer {
  xpt_tracer_domain_t *domain;
  uint32_t slot;
  bool enabled; /* under domain lock */
  void *user_data;
  /* fn_count prologues, then fn_count epilogues; atomics because a call
   * pinned before a disable may still read them. */
  _Atomic(xpt_tracer_fn_t) callbacks[];
};

/* Per-thread record.  Initial-exec TLS: small, and the library may be
 * dlopened (a large initial-exec object would make dlopen fail). */
typedef struct tracer_thread {
  _Atomic uint32_t pinned;         /* slots this thread's current call pinned */
  xpt_tracer_domain_t *pinned_domain;
  uint32_t depth;                  /* > 0 while running callbacks */
  bool registered;
  uint64_t thread_no;
  uint64_t sequence;
  struct tracer_thread *next, *prev;
} tracer_thread_t;

static __thread tracer_thread_t tracer_self __attribute__((tls_model("initial-exec")));

/* Registry of threads that made a traced call; only destroy scans it. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static tracer_thread_t *registry_head;
static uint64_t registry_threads;
static pthread_key_t registry_key;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;

static void registry_unlink_locked(tracer_thread_t *t) {
  if (t->prev)
    t->prev->next = t->next;
  else
    registry_head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  t->next = t->prev = NULL;
  t->registered = false;
}

static void registry_thread_exit(void *arg) {
  tracer_thread_t *t = arg;
  pthread_mutex_lock(&registry_lock);
  registry_unlink_locked(t);
  pthread_mutex_unlock(&registry_lock);
}

/* A forked child has one thread: forget the others (they may have died
 * holding pins). */
static void registry_after_fork_child(void) {
  pthread_mutex_init(&registry_lock, NULL);
  tracer_thread_t *self = &tracer_self;
  bool was_registered = self->registered;
  registry_head = NULL;
  self->next = self->prev = NULL;
  if (was_registered)
    registry_head = self;
}

static void registry_init(void) {
  (void)pthread_key_create(&registry_key, registry_thread_exit);
  (void)pthread_atfork(NULL, NULL, registry_after_fork_child);
}

static void registry_add_self(void) {
  tracer_thread_t *t = &tracer_self;
  pthread_once(&registry_once, registry_init);
  pthread_mutex_lock(&registry_lock);
  t->thread_no = ++registry_threads;
  t->next = registry_head;
  t->prev = NULL;
  if (registry_head)
    registry_head->prev = t;
  registry_head = t;
  t->registered = true;
  pthread_mutex_unlock(&registry_lock);
  (void)pthread_setspecific(registry_key, t);
}

static bool registry_pins(uint32_t bit) {
  bool pinned = false;
  pthread_mutex_lock(&registry_lock);
  for (tracer_thread_t *t = registry_head; t && !pinned; t = t->next)
    pinned = (atomic_load_explicit(&t->pinned, memory_order_seq_cst) & bit) != 0;
  pthread_mutex_unlock(&registry_lock);
  return pinned;
}

#if defined(__SANITIZE_THREAD__)
#define TRACER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TRACER_TSAN 1
#endif
#endif

static bool domain_init_locked(xpt_tracer_domain_t *d) {
  if (d->initialised)
    return true;
  /* membarrier makes the readers' plain pin stores visible before we scan,
   * so readers need no fence.  Without it (or under TSan, which does not
   * model it) readers pin with a sequentially consistent exchange. */
  long failed = 1;
#ifndef TRACER_TSAN
  failed = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
#endif
  atomic_store_explicit(&d->reader_fence, failed != 0, memory_order_relaxed);
  d->initialised = true;
  return true;
}

static void domain_barrier(xpt_tracer_domain_t *d) {
  if (!atomic_load_explicit(&d->reader_fence, memory_order_relaxed))
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

int xpt_tracer_create(xpt_tracer_domain_t *d, void *user_data, xpt_tracer_t **out) {
  if (!d || !out)
    return XPT_TRACER_INVALID_ARGUMENT;
  xpt_tracer_t *t = calloc(1, sizeof(*t) + 2 * (size_t)d->fn_count * sizeof(t->callbacks[0]));
  if (!t)
    return XPT_TRACER_OUT_OF_RESOURCES;
  t->domain = d;
  t->user_data = user_data;
  pthread_mutex_lock(&d->lock);
  domain_init_locked(d);
  uint32_t free_slots = ~d->used_mask;
  if (!free_slots) {
    pthread_mutex_unlock(&d->lock);
    free(t);
    return XPT_TRACER_OUT_OF_RESOURCES;
  }
  t->slot = (uint32_t)__builtin_ctz(free_slots);
  d->used_mask |= 1u << t->slot;
  atomic_store_explicit(&d->slots[t->slot], t, memory_order_release);
  pthread_mutex_unlock(&d->lock);
  *out = t;
  return XPT_TRACER_OK;
}

int xpt_tracer_set_callback(xpt_tracer_t *t, bool epilogue, uint32_t fn, xpt_tracer_fn_t cb) {
  if (!t || fn >= t->domain->fn_count)
    return XPT_TRACER_INVALID_ARGUMENT;
  int rc = XPT_TRACER_OK;
  pthread_mutex_lock(&t->domain->lock);
  if (t->enabled)
    rc = XPT_TRACER_ENABLED;
  else
    atomic_store_explicit(&t->callbacks[(epilogue ? t->domain->fn_count : 0) + fn], cb,
                          memory_order_relaxed);
  pthread_mutex_unlock(&t->domain->lock);
  return rc;
}

int xpt_tracer_set_all(xpt_tracer_t *t, bool epilogue, const xpt_tracer_fn_t *table) {
  if (!t || !table)
    return XPT_TRACER_INVALID_ARGUMENT;
  int rc = XPT_TRACER_OK;
  uint32_t n = t->domain->fn_count;
  pthread_mutex_lock(&t->domain->lock);
  if (t->enabled)
    rc = XPT_TRACER_ENABLED;
  else
    for (uint32_t i = 0; i < n; i++)
      atomic_store_explicit(&t->callbacks[(epilogue ? n : 0) + i], table[i], memory_order_relaxed);
  pthread_mutex_unlock(&t->domain->lock);
  return rc;
}

int xpt_tracer_reset(xpt_tracer_t *t) {
  if (!t)
    return XPT_TRACER_INVALID_ARGUMENT;
  int rc = XPT_TRACER_OK;
  pthread_mutex_lock(&t->domain->lock);
  if (t->enabled)
    rc = XPT_TRACER_ENABLED;
  else
    for (uint32_t i = 0; i < 2 * t->domain->fn_count; i++)
      atomic_store_explicit(&t->callbacks[i], NULL, memory_order_relaxed);
  pthread_mutex_unlock(&t->domain->lock);
  return rc;
}

int xpt_tracer_set_enabled(xpt_tracer_t *t, bool enabled) {
  if (!t)
    return XPT_TRACER_INVALID_ARGUMENT;
  xpt_tracer_domain_t *d = t->domain;
  uint32_t bit = 1u << t->slot;
  pthread_mutex_lock(&d->lock);
  t->enabled = enabled;
  /* Release: a call that sees the bit sees the callbacks set before. */
  if (enabled)
    atomic_fetch_or_explicit(&d->enabled_mask, bit, memory_order_seq_cst);
  else
    atomic_fetch_and_explicit(&d->enabled_mask, ~bit, memory_order_seq_cst);
  pthread_mutex_unlock(&d->lock);
  return XPT_TRACER_OK;
}

int xpt_tracer_destroy(xpt_tracer_t *t) {
  if (!t)
    return XPT_TRACER_INVALID_ARGUMENT;
  xpt_tracer_domain_t *d = t->domain;
  uint32_t bit = 1u << t->slot;
  tracer_thread_t *self = &tracer_self;
  /* Waiting for our own pin would never end. */
  if (self->pinned_domain == d && (atomic_load_explicit(&self->pinned, memory_order_relaxed) & bit))
    return XPT_TRACER_IN_CALLBACK;
  pthread_mutex_lock(&d->lock);
  t->enabled = false;
  atomic_fetch_and_explicit(&d->enabled_mask, ~bit, memory_order_seq_cst);
  pthread_mutex_unlock(&d->lock);
  /* The slot stays used until no call pins it; the wait holds no lock that
   * a call needs. */
  domain_barrier(d);
  struct timespec nap = {0, 50000};
  for (unsigned spins = 0; registry_pins(bit); spins++) {
    if (spins < 64)
      sched_yield();
    else
      nanosleep(&nap, NULL);
  }
  pthread_mutex_lock(&d->lock);
  atomic_store_explicit(&d->slots[t->slot], NULL, memory_order_relaxed);
  d->used_mask &= ~bit;
  pthread_mutex_unlock(&d->lock);
  free(t);
  return XPT_TRACER_OK;
}

bool xpt_tracer_in_callback(void) { return tracer_self.depth != 0; }

uint64_t xpt_tracer_next_correlation_id(void) {
  tracer_thread_t *self = &tracer_self;
  if (!self->registered)
    registry_add_self();
  return (self->thread_no << 40) | ++self->sequence;
}

bool xpt_tracer_begin(xpt_tracer_domain_t *d, xpt_tracer_call_t *call, uint32_t fn, void *params) {
  tracer_thread_t *self = &tracer_self;
  if (self->depth)
    return false;
  uint32_t mask = atomic_load_explicit(&d->enabled_mask, memory_order_acquire);
  if (!mask)
    return false;
  if (!self->registered)
    registry_add_self();
  /* Pin the snapshot, then re-read: a tracer whose bit is still set after
   * the pin is visible to its destroyer, which will wait for us. */
  self->pinned_domain = d;
  if (atomic_load_explicit(&d->reader_fence, memory_order_relaxed)) {
    atomic_exchange_explicit(&self->pinned, mask, memory_order_seq_cst);
  } else {
    atomic_store_explicit(&self->pinned, mask, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
  }
  mask &= atomic_load_explicit(&d->enabled_mask, memory_order_seq_cst);
  atomic_store_explicit(&self->pinned, mask, memory_order_relaxed);

  /* Locals, not call->: the callbacks are opaque calls that could alias
   * the call record, so every store through it would be repeated. */
  uint32_t n = d->fn_count;
  uint32_t active = 0;
  uint64_t correlation_id = (self->thread_no << 40) | ++self->sequence;
  call->fn = fn;
  call->correlation_id = correlation_id;
  self->depth++;
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    xpt_tracer_t *t = atomic_load_explicit(&d->slots[i], memory_order_acquire);
    if (!t)
      continue;
    xpt_tracer_fn_t pro = atomic_load_explicit(&t->callbacks[fn], memory_order_relaxed);
    xpt_tracer_fn_t epi = atomic_load_explicit(&t->callbacks[n + fn], memory_order_relaxed);
    void *user_data = t->user_data;
    call->instance[i] = NULL;
    if (pro)
      pro(params, NULL, user_data, &call->instance[i], correlation_id);
    if (epi) {
      call->epilogue[i] = epi;
      call->user_data[i] = user_data;
      active |= 1u << i;
    }
  }
  self->depth--;
  call->active = active;
  /* Keep pinned only the tracers whose epilogue is still to run. */
  atomic_store_explicit(&self->pinned, active, memory_order_release);
  return active != 0;
}

void xpt_tracer_end(xpt_tracer_call_t *call, void *params, void *result) {
  tracer_thread_t *self = &tracer_self;
  uint64_t correlation_id = call->correlation_id;
  self->depth++;
  for (uint32_t m = call->active; m;) {
    uint32_t i = 31u - (uint32_t)__builtin_clz(m);
    m &= ~(1u << i);
    call->epilogue[i](params, result, call->user_data[i], &call->instance[i], correlation_id);
  }
  self->depth--;
  atomic_store_explicit(&self->pinned, 0, memory_order_release);
}
