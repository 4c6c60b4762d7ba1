/* Generic API tracer core: tracers with one prologue and one epilogue per
 * function of an API table.  API-agnostic; each API (OpenCL, ...) owns one
 * domain and a generated table of function ids.
 *
 * Concurrency model: the set of enabled tracers is one atomic bit mask.
 * A call snapshots it once, pins that snapshot in its thread's record and
 * runs exactly the pinned tracers' prologues and epilogues.  Destroy
 * clears the tracer's bit, makes every thread's pin visible (membarrier,
 * or a full fence on the reader side when membarrier is unavailable) and
 * waits until no thread pins the tracer.  No lock on the call path, no
 * allocation after a thread's first traced call. */
#ifndef XPT_TRACER_H
#define XPT_TRACER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define XPT_TRACER_MAX 32

typedef enum xpt_tracer_result_t {
  XPT_TRACER_OK = 0,
  XPT_TRACER_INVALID_ARGUMENT = -1,
  XPT_TRACER_ENABLED = -2,        /* callbacks may change only while disabled */
  XPT_TRACER_OUT_OF_RESOURCES = -3,
  XPT_TRACER_IN_CALLBACK = -4     /* destroy from a call that pinned the tracer */
} xpt_tracer_result_t;

/* One callback: params struct, pointer to the result (NULL in a prologue
 * and for void functions), tracer user data, per-call instance slot,
 * correlation id of the call. */
typedef void (*xpt_tracer_fn_t)(void *params, void *result, void *user_data,
                                void **instance_user_data, uint64_t correlation_id);

typedef struct xpt_tracer xpt_tracer_t;

typedef struct xpt_tracer_domain {
  _Atomic uint32_t enabled_mask;
  _Atomic bool reader_fence; /* true when membarrier is unavailable */
  uint32_t fn_count;
  pthread_mutex_t lock;      /* create / destroy / enable bookkeeping */
  uint32_t used_mask;        /* under lock */
  bool initialised;          /* under lock */
  _Atomic(xpt_tracer_t *) slots[XPT_TRACER_MAX];
} xpt_tracer_domain_t;

#define XPT_TRACER_DOMAIN_INIT(count) \
  { .fn_count = (count), .lock = PTHREAD_MUTEX_INITIALIZER }

/* The state of one traced call, kept on the caller's stack. */
typedef struct xpt_tracer_call {
  uint32_t active; /* tracers whose epilogue runs */
  uint32_t fn;
  uint64_t correlation_id;
  xpt_tracer_fn_t epilogue[XPT_TRACER_MAX];
  void *user_data[XPT_TRACER_MAX];
  void *instance[XPT_TRACER_MAX];
} xpt_tracer_call_t;

int xpt_tracer_create(xpt_tracer_domain_t *domain, void *user_data, xpt_tracer_t **out);
/* Set prologue (epilogue=false) or epilogue of one function. */
int xpt_tracer_set_callback(xpt_tracer_t *tracer, bool epilogue, uint32_t fn, xpt_tracer_fn_t cb);
/* Set every prologue or epilogue from a table of fn_count entries. */
int xpt_tracer_set_all(xpt_tracer_t *tracer, bool epilogue, const xpt_tracer_fn_t *table);
int xpt_tracer_reset(xpt_tracer_t *tracer);
int xpt_tracer_set_enabled(xpt_tracer_t *tracer, bool enabled);
int xpt_tracer_destroy(xpt_tracer_t *tracer);

/* Call path.  xpt_tracer_any is one load: with it false, call directly. */
static inline bool xpt_tracer_any(xpt_tracer_domain_t *domain) {
  return atomic_load_explicit(&domain->enabled_mask, memory_order_relaxed) != 0;
}
/* Runs the prologues; returns false when no epilogue needs xpt_tracer_end
 * (nothing pinned, or a call made from inside a callback). */
bool xpt_tracer_begin(xpt_tracer_domain_t *domain, xpt_tracer_call_t *call, uint32_t fn,
                      void *params);
void xpt_tracer_end(xpt_tracer_call_t *call, void *params, void *result);
/* True while this thread runs a tracer callback (its API calls are not traced). */
bool xpt_tracer_in_callback(void);
/* Process-unique, never-zero call id (per-thread counter, no shared atomic). */
uint64_t xpt_tracer_next_correlation_id(void);

#endif
