/* Generic API tracer core: tracers with one prologue and one epilogue per
 * function of an API table.  API-agnostic; each API (OpenCL, ...) owns one
 * domain and a generated table of function ids.
 *
 * Concurrency model: for every function the domain publishes an immutable
 * list of the enabled tracers that have a callback on it (prologue,
 * epilogue, user data), rebuilt under the domain lock when a tracer is
 * enabled, disabled or destroyed.  A call loads its function's list once,
 * pins it in its thread's record (a hazard pointer), runs the list's
 * prologues, the function and the list's epilogues, and unpins.  Replaced
 * lists are freed once no thread pins them; destroy waits until no thread
 * pins a list holding the tracer.  Pins are plain stores made visible by
 * membarrier on the writer side (a sequentially consistent exchange when
 * membarrier is unavailable or under TSan).  No lock, no allocation and no
 * shared write on the call path. */
#ifndef XPT_TRACER_H
#define XPT_TRACER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XPT_TRACER_MAX 32

typedef enum xpt_tracer_result_t {
  XPT_TRACER_OK = 0,
  XPT_TRACER_INVALID_ARGUMENT = -1,
  XPT_TRACER_ENABLED = -2,        /* callbacks may change only while disabled */
  XPT_TRACER_OUT_OF_RESOURCES = -3,
  XPT_TRACER_IN_CALLBACK = -4     /* destroy from a call that runs the tracer */
} xpt_tracer_result_t;

/* One callback: params struct, pointer to the result (NULL in a prologue
 * and for void functions), tracer user data, per-call instance slot,
 * correlation id of the call. */
typedef void (*xpt_tracer_fn_t)(void *params, void *result, void *user_data,
                                void **instance_user_data, uint64_t correlation_id);

typedef struct xpt_tracer xpt_tracer_t;

typedef struct xpt_tracer_entry {
  xpt_tracer_fn_t prologue, epilogue; /* either may be NULL, not both */
  void *user_data;
} xpt_tracer_entry_t;

/* The tracers of one function, in creation-slot order.  Immutable once
 * published. */
typedef struct xpt_tracer_list {
  uint32_t count;   /* > 0 */
  uint32_t members; /* slot bits of the tracers in entry[] */
  xpt_tracer_entry_t entry[];
} xpt_tracer_list_t;

typedef struct tracer_block tracer_block_t;

typedef struct xpt_tracer_domain {
  _Atomic(const xpt_tracer_list_t *) *lists; /* fn_count entries; NULL: no tracer */
  uint32_t fn_count;
  bool reader_fence;       /* set before the first list is published */
  pthread_mutex_t lock;    /* everything below */
  bool initialised;
  uint32_t used_mask;
  xpt_tracer_t *slots[XPT_TRACER_MAX];
  tracer_block_t *current; /* the block holding the published lists */
  tracer_block_t *retired; /* replaced blocks not yet freed */
} xpt_tracer_domain_t;

/* Defines a domain `name` for an API of `count` functions. */
#define XPT_TRACER_DOMAIN_DEFINE(storage, name, count)                                       \
  static _Atomic(const xpt_tracer_list_t *) name##_lists[(count)];                          \
  storage xpt_tracer_domain_t name = {                                                       \
      .lists = name##_lists, .fn_count = (count), .lock = PTHREAD_MUTEX_INITIALIZER}

int xpt_tracer_create(xpt_tracer_domain_t *domain, void *user_data, xpt_tracer_t **out);
/* Set prologue (epilogue=false) or epilogue of one function. */
int xpt_tracer_set_callback(xpt_tracer_t *tracer, bool epilogue, uint32_t fn, xpt_tracer_fn_t cb);
/* Set every prologue or epilogue from a table of fn_count entries. */
int xpt_tracer_set_all(xpt_tracer_t *tracer, bool epilogue, const xpt_tracer_fn_t *table);
int xpt_tracer_reset(xpt_tracer_t *tracer);
int xpt_tracer_set_enabled(xpt_tracer_t *tracer, bool enabled);
int xpt_tracer_destroy(xpt_tracer_t *tracer);
/* Replaced list blocks not freed yet (pinned by a call in flight); tests. */
size_t xpt_tracer_retired_blocks(xpt_tracer_domain_t *domain);

/* ---- call path --------------------------------------------------------- */

/* A thread's state: NEW until registered; IN_CALL from a successful
 * enter to the end of the epilogues (a call made meanwhile, e.g. by an
 * XPTI subscriber, runs no tracer: one pin per thread); IN_CALLBACK while
 * a prologue or epilogue runs. */
enum {
  XPT_TRACER_THREAD_NEW = 0,
  XPT_TRACER_THREAD_READY = 1,
  XPT_TRACER_THREAD_IN_CALL = 2,
  XPT_TRACER_THREAD_IN_CALLBACK = 3
};

/* Per-thread record.  Initial-exec TLS: small, and the layer may be
 * dlopened (a large initial-exec object would make dlopen fail). */
typedef struct xpt_tracer_thread {
  _Atomic(const xpt_tracer_list_t *) pin; /* list of this thread's call in flight */
  uint32_t state;                         /* XPT_TRACER_THREAD_* */
  uint64_t last_id;                       /* thread number << 40 | calls */
  struct xpt_tracer_thread *next, *prev;  /* registry, under its lock */
} xpt_tracer_thread_t;

extern __thread xpt_tracer_thread_t xpt_tracer_self __attribute__((tls_model("initial-exec")));

#if defined(__SANITIZE_THREAD__)
#define XPT_TRACER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define XPT_TRACER_TSAN 1
#endif
#endif

/* Registers a new thread; false when the thread is inside a traced call
 * or a callback (its API calls are not traced). */
bool xpt_tracer_thread_slow(void);

/* True when some tracer has a callback on fn: a hint for the wrapper,
 * which then calls a traced path that uses xpt_tracer_enter. */
static inline bool xpt_tracer_hooked(xpt_tracer_domain_t *d, uint32_t fn) {
  return atomic_load_explicit(&d->lists[fn], memory_order_relaxed) != NULL;
}

/* True when some tracer has a callback on any function (not for hot paths). */
static inline bool xpt_tracer_any(xpt_tracer_domain_t *d) {
  for (uint32_t fn = 0; fn < d->fn_count; fn++)
    if (xpt_tracer_hooked(d, fn))
      return true;
  return false;
}

/* Pins and returns the list in slot (&d->lists[fn]; naming the array of
 * XPT_TRACER_DOMAIN_DEFINE, name##_lists, saves a load), or NULL: nothing
 * to run (no tracer on fn, or a call made inside a traced call).  A list
 * returned must go to xpt_tracer_prologues, then xpt_tracer_epilogues
 * (which unpins it). */
static inline const xpt_tracer_list_t *xpt_tracer_enter_at(xpt_tracer_domain_t *d,
                                                           _Atomic(const xpt_tracer_list_t *) *slot) {
  xpt_tracer_thread_t *self = &xpt_tracer_self;
  if (__builtin_expect(self->state != XPT_TRACER_THREAD_READY, 0) && !xpt_tracer_thread_slow())
    return NULL;
  const xpt_tracer_list_t *l = atomic_load_explicit(slot, memory_order_acquire);
  while (l) {
    /* Pin, then check the list is still the published one: a list
     * replaced before our pin was visible may already be freed. */
#ifdef XPT_TRACER_TSAN
    (void)d;
    atomic_exchange_explicit(&self->pin, l, memory_order_seq_cst);
    const xpt_tracer_list_t *now = atomic_load_explicit(slot, memory_order_seq_cst);
#else
    if (__builtin_expect(d->reader_fence, 0)) {
      atomic_exchange_explicit(&self->pin, l, memory_order_seq_cst);
    } else {
      atomic_store_explicit(&self->pin, l, memory_order_relaxed);
      atomic_signal_fence(memory_order_seq_cst); /* the writer's membarrier does the rest */
    }
    const xpt_tracer_list_t *now = atomic_load_explicit(slot, memory_order_acquire);
#endif
    if (__builtin_expect(now == l, 1)) {
      self->state = XPT_TRACER_THREAD_IN_CALL;
      return l;
    }
    l = now;
  }
  atomic_store_explicit(&self->pin, NULL, memory_order_release);
  return NULL;
}

/* The same, for the list of fn of d. */
static inline const xpt_tracer_list_t *xpt_tracer_enter(xpt_tracer_domain_t *d, uint32_t fn) {
  return xpt_tracer_enter_at(d, &d->lists[fn]);
}

/* A process-unique, never-zero call id: no shared counter. */
static inline uint64_t xpt_tracer_new_id(void) { return ++xpt_tracer_self.last_id; }

/* Runs the prologues; instance must hold l->count slots. */
static inline void xpt_tracer_prologues(const xpt_tracer_list_t *l, void *params, void **instance,
                                        uint64_t correlation_id) {
  xpt_tracer_self.state = XPT_TRACER_THREAD_IN_CALLBACK;
  uint32_t n = l->count;
  for (uint32_t i = 0; i < n; i++) {
    instance[i] = NULL;
    if (l->entry[i].prologue)
      l->entry[i].prologue(params, NULL, l->entry[i].user_data, &instance[i], correlation_id);
  }
  xpt_tracer_self.state = XPT_TRACER_THREAD_IN_CALL;
}

/* Runs the epilogues in reverse order and unpins the list. */
static inline void xpt_tracer_epilogues(const xpt_tracer_list_t *l, void *params, void *result,
                                        void **instance, uint64_t correlation_id) {
  xpt_tracer_self.state = XPT_TRACER_THREAD_IN_CALLBACK;
  for (uint32_t i = l->count; i-- > 0;)
    if (l->entry[i].epilogue)
      l->entry[i].epilogue(params, result, l->entry[i].user_data, &instance[i], correlation_id);
  xpt_tracer_self.state = XPT_TRACER_THREAD_READY;
  atomic_store_explicit(&xpt_tracer_self.pin, NULL, memory_order_release);
}

/* True while this thread runs a tracer callback (its API calls are not traced). */
static inline bool xpt_tracer_in_callback(void) {
  return xpt_tracer_self.state == XPT_TRACER_THREAD_IN_CALLBACK;
}
/* A correlation id for a call that runs no tracer (registers the thread). */
uint64_t xpt_tracer_next_correlation_id(void);

/* A whole traced call for simple wrappers: CALL is the API call, made
 * whether or not tracers run. */
#define XPT_TRACER_CALL(domain, fn, params_ptr, result_ptr, CALL)                            \
  do {                                                                                      \
    const xpt_tracer_list_t *xpt_list_ = xpt_tracer_enter((domain), (fn));                  \
    if (xpt_list_) {                                                                        \
      void *xpt_instance_[XPT_TRACER_MAX];                                                  \
      uint64_t xpt_id_ = xpt_tracer_new_id();                                               \
      xpt_tracer_prologues(xpt_list_, (params_ptr), xpt_instance_, xpt_id_);                \
      CALL;                                                                                 \
      xpt_tracer_epilogues(xpt_list_, (params_ptr), (result_ptr), xpt_instance_, xpt_id_);  \
    } else {                                                                                \
      CALL;                                                                                 \
    }                                                                                       \
  } while (0)

#endif
