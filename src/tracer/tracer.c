/* Generic tracer core; see xpt_tracer.h for the model. */
#include "xpt_tracer.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct xpt_tracer {
  xpt_tracer_domain_t *domain;
  uint32_t slot;
  bool enabled; /* under domain lock */
  void *user_data;
  xpt_tracer_fn_t callbacks[]; /* fn_count prologues, then fn_count epilogues; under lock */
};

/* One allocation holding every non-empty list of one publication. */
struct tracer_block {
  tracer_block_t *next; /* retired chain */
  size_t size;          /* bytes of data[] */
  _Alignas(16) unsigned char data[];
};

__thread xpt_tracer_thread_t xpt_tracer_self __attribute__((tls_model("initial-exec")));

/* ---- thread registry: only writers scan it ---------------------------- */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static xpt_tracer_thread_t *registry_head;
static uint64_t registry_threads;
static pthread_key_t registry_key;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;

static void registry_unlink_locked(xpt_tracer_thread_t *t) {
  if (t->prev)
    t->prev->next = t->next;
  else
    registry_head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  t->next = t->prev = NULL;
}

static void registry_thread_exit(void *arg) {
  xpt_tracer_thread_t *t = arg;
  pthread_mutex_lock(&registry_lock);
  registry_unlink_locked(t);
  t->state = XPT_TRACER_THREAD_NEW; /* a later call from a destructor registers again */
  pthread_mutex_unlock(&registry_lock);
}

/* A forked child has one thread: forget the others (they may have died
 * holding pins). */
static void registry_after_fork_child(void) {
  pthread_mutex_init(&registry_lock, NULL);
  xpt_tracer_thread_t *self = &xpt_tracer_self;
  registry_head = NULL;
  self->next = self->prev = NULL;
  if (self->state != XPT_TRACER_THREAD_NEW)
    registry_head = self;
}

static void registry_init(void) {
  (void)pthread_key_create(&registry_key, registry_thread_exit);
  (void)pthread_atfork(NULL, NULL, registry_after_fork_child);
}

static void registry_add_self(void) {
  xpt_tracer_thread_t *t = &xpt_tracer_self;
  pthread_once(&registry_once, registry_init);
  pthread_mutex_lock(&registry_lock);
  t->last_id = ++registry_threads << 40;
  t->next = registry_head;
  t->prev = NULL;
  if (registry_head)
    registry_head->prev = t;
  registry_head = t;
  t->state = XPT_TRACER_THREAD_READY;
  pthread_mutex_unlock(&registry_lock);
  (void)pthread_setspecific(registry_key, t);
}

bool xpt_tracer_thread_slow(void) {
  if (xpt_tracer_self.state != XPT_TRACER_THREAD_NEW)
    return false;
  registry_add_self();
  return true;
}

uint64_t xpt_tracer_next_correlation_id(void) {
  if (xpt_tracer_self.state == XPT_TRACER_THREAD_NEW)
    registry_add_self();
  return xpt_tracer_new_id();
}

/* ---- publication ------------------------------------------------------ */

static void domain_init_locked(xpt_tracer_domain_t *d) {
  if (d->initialised)
    return;
  /* membarrier makes the readers' plain pin stores visible before we scan,
   * so readers need no fence.  Without it (or under TSan, which does not
   * model it) readers pin with a sequentially consistent exchange. */
  long failed = 1;
#ifndef XPT_TRACER_TSAN
  failed = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
#endif
  d->reader_fence = failed != 0;
  d->initialised = true;
}

/* Every pin stored before this point is visible to the scan after it.
 * With reader_fence, pins and lists are sequentially consistent already. */
static void domain_barrier(xpt_tracer_domain_t *d) {
  if (!d->reader_fence)
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

static bool block_holds(const tracer_block_t *b, const void *p) {
  return (const unsigned char *)p >= b->data && (const unsigned char *)p < b->data + b->size;
}

static bool pinned_by_any_thread(const tracer_block_t *b) {
  bool pinned = false;
  pthread_mutex_lock(&registry_lock);
  for (xpt_tracer_thread_t *t = registry_head; t && !pinned; t = t->next)
    pinned = block_holds(b, atomic_load_explicit(&t->pin, memory_order_seq_cst));
  pthread_mutex_unlock(&registry_lock);
  return pinned;
}

/* Frees the retired blocks no thread pins; true when none is left. */
static bool domain_reclaim_locked(xpt_tracer_domain_t *d) {
  if (!d->retired)
    return true;
  domain_barrier(d);
  tracer_block_t **link = &d->retired;
  while (*link) {
    tracer_block_t *b = *link;
    if (pinned_by_any_thread(b)) {
      link = &b->next;
    } else {
      *link = b->next;
      free(b);
    }
  }
  return d->retired == NULL;
}

/* Builds and publishes every function's list from the enabled tracers.
 * Returns OUT_OF_RESOURCES (lists unchanged) when allocation fails. */
static int domain_publish_locked(xpt_tracer_domain_t *d) {
  uint32_t n = d->fn_count;
  xpt_tracer_t *on[XPT_TRACER_MAX];
  uint32_t count = 0;
  for (uint32_t s = 0; s < XPT_TRACER_MAX; s++)
    if (d->slots[s] && d->slots[s]->enabled)
      on[count++] = d->slots[s];
  size_t size = 0;
  for (uint32_t fn = 0; fn < n; fn++) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < count; i++)
      k += on[i]->callbacks[fn] || on[i]->callbacks[n + fn];
    if (k)
      size += sizeof(xpt_tracer_list_t) + k * sizeof(xpt_tracer_entry_t);
  }
  tracer_block_t *b = NULL;
  if (size) {
    b = malloc(sizeof(*b) + size);
    if (!b)
      return XPT_TRACER_OUT_OF_RESOURCES;
    b->next = NULL;
    b->size = size;
  }
  unsigned char *at = b ? b->data : NULL;
  for (uint32_t fn = 0; fn < n; fn++) {
    xpt_tracer_list_t *l = (xpt_tracer_list_t *)at;
    uint32_t k = 0, members = 0;
    for (uint32_t i = 0; i < count; i++) {
      xpt_tracer_fn_t pro = on[i]->callbacks[fn], epi = on[i]->callbacks[n + fn];
      if (!pro && !epi)
        continue;
      l->entry[k++] = (xpt_tracer_entry_t){pro, epi, on[i]->user_data};
      members |= 1u << on[i]->slot;
    }
    if (k) {
      l->count = k;
      l->members = members;
      at += sizeof(xpt_tracer_list_t) + k * sizeof(xpt_tracer_entry_t);
    } else {
      l = NULL;
    }
    /* Release: a call that loads the list sees its entries. */
    atomic_store_explicit(&d->lists[fn], l, memory_order_seq_cst);
  }
  if (d->current) {
    d->current->next = d->retired;
    d->retired = d->current;
  }
  d->current = b;
  (void)domain_reclaim_locked(d);
  return XPT_TRACER_OK;
}

/* ---- tracers ---------------------------------------------------------- */

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
  d->slots[t->slot] = t;
  pthread_mutex_unlock(&d->lock);
  *out = t;
  return XPT_TRACER_OK;
}

/* Callbacks change only while disabled, so published lists never hold a
 * callback the tracer no longer has. */
static int tracer_set_range(xpt_tracer_t *t, uint32_t first, uint32_t count,
                            const xpt_tracer_fn_t *values) {
  int rc = XPT_TRACER_OK;
  pthread_mutex_lock(&t->domain->lock);
  if (t->enabled)
    rc = XPT_TRACER_ENABLED;
  else if (values)
    memcpy(&t->callbacks[first], values, count * sizeof(values[0]));
  else
    memset(&t->callbacks[first], 0, count * sizeof(t->callbacks[0]));
  pthread_mutex_unlock(&t->domain->lock);
  return rc;
}

int xpt_tracer_set_callback(xpt_tracer_t *t, bool epilogue, uint32_t fn, xpt_tracer_fn_t cb) {
  if (!t || fn >= t->domain->fn_count)
    return XPT_TRACER_INVALID_ARGUMENT;
  return tracer_set_range(t, (epilogue ? t->domain->fn_count : 0) + fn, 1, &cb);
}

int xpt_tracer_set_all(xpt_tracer_t *t, bool epilogue, const xpt_tracer_fn_t *table) {
  if (!t || !table)
    return XPT_TRACER_INVALID_ARGUMENT;
  return tracer_set_range(t, epilogue ? t->domain->fn_count : 0, t->domain->fn_count, table);
}

int xpt_tracer_reset(xpt_tracer_t *t) {
  if (!t)
    return XPT_TRACER_INVALID_ARGUMENT;
  return tracer_set_range(t, 0, 2 * t->domain->fn_count, NULL);
}

int xpt_tracer_set_enabled(xpt_tracer_t *t, bool enabled) {
  if (!t)
    return XPT_TRACER_INVALID_ARGUMENT;
  xpt_tracer_domain_t *d = t->domain;
  int rc = XPT_TRACER_OK;
  pthread_mutex_lock(&d->lock);
  if (t->enabled != enabled) {
    t->enabled = enabled;
    rc = domain_publish_locked(d);
    if (rc != XPT_TRACER_OK)
      t->enabled = !enabled;
  }
  pthread_mutex_unlock(&d->lock);
  return rc;
}

/* True while some thread pins a list that holds the tracer in `bit`.  A
 * pin is only trusted when it is the start of a list of a live block (a
 * stale pin may point anywhere); the lock keeps the blocks alive. */
static bool domain_tracer_pinned_locked(xpt_tracer_domain_t *d, uint32_t bit) {
  bool pinned = false;
  domain_barrier(d);
  pthread_mutex_lock(&registry_lock);
  for (xpt_tracer_thread_t *t = registry_head; t && !pinned; t = t->next) {
    const void *p = atomic_load_explicit(&t->pin, memory_order_seq_cst);
    for (tracer_block_t *b = d->retired; p && b && !pinned; b = b->next) {
      if (!block_holds(b, p))
        continue;
      for (const unsigned char *at = b->data; at < b->data + b->size;) {
        const xpt_tracer_list_t *l = (const xpt_tracer_list_t *)at;
        if ((const void *)l == p) {
          pinned = (l->members & bit) != 0;
          break;
        }
        at += sizeof(*l) + l->count * sizeof(l->entry[0]);
      }
    }
  }
  pthread_mutex_unlock(&registry_lock);
  return pinned;
}

int xpt_tracer_destroy(xpt_tracer_t *t) {
  if (!t)
    return XPT_TRACER_INVALID_ARGUMENT;
  xpt_tracer_domain_t *d = t->domain;
  uint32_t bit = 1u << t->slot;
  /* Waiting for our own call would never end.  Our pin cannot be freed
   * under us, so it is safe to read. */
  const xpt_tracer_list_t *own = atomic_load_explicit(&xpt_tracer_self.pin, memory_order_relaxed);
  if (xpt_tracer_self.state >= XPT_TRACER_THREAD_IN_CALL && own && (own->members & bit))
    return XPT_TRACER_IN_CALLBACK;
  pthread_mutex_lock(&d->lock);
  if (t->enabled) {
    t->enabled = false;
    if (domain_publish_locked(d) != XPT_TRACER_OK) {
      t->enabled = true;
      pthread_mutex_unlock(&d->lock);
      return XPT_TRACER_OUT_OF_RESOURCES;
    }
  }
  pthread_mutex_unlock(&d->lock);
  /* Only lists published before the line above hold the tracer.  Wait,
   * without holding the lock between looks, until no call runs them. */
  struct timespec nap = {0, 50000};
  for (unsigned spins = 0;; spins++) {
    pthread_mutex_lock(&d->lock);
    bool busy = domain_tracer_pinned_locked(d, bit);
    if (!busy) {
      (void)domain_reclaim_locked(d);
      d->slots[t->slot] = NULL;
      d->used_mask &= ~bit;
    }
    pthread_mutex_unlock(&d->lock);
    if (!busy)
      break;
    if (spins < 64)
      sched_yield();
    else
      nanosleep(&nap, NULL);
  }
  free(t);
  return XPT_TRACER_OK;
}

size_t xpt_tracer_retired_blocks(xpt_tracer_domain_t *d) {
  size_t n = 0;
  pthread_mutex_lock(&d->lock);
  (void)domain_reclaim_locked(d);
  for (tracer_block_t *b = d->retired; b; b = b->next)
    n++;
  pthread_mutex_unlock(&d->lock);
  return n;
}
