/* Strings, objects, payloads, trace point events and their metadata. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

intern_table_t g_strings;
intern_table_t g_objects;

uint32_t string_intern(const char *s, const char **copy) {
  const intern_entry_t *e = NULL;
  uint32_t id = intern(&g_strings, s, strlen(s), STRING_TAG, &e);
  if (copy)
    *copy = e ? e->data : NULL;
  return id;
}

/* Both arguments are required, as in Intel's framework. */
XPTI_EXPORT_API uint32_t xptiRegisterString(const char *string, char **table_string) {
  if (!table_string)
    return XPTI_INVALID_STRING_ID;
  *table_string = NULL;
  if (!string)
    return XPTI_INVALID_STRING_ID;
  const char *copy;
  uint32_t id = string_intern(string, &copy);
  *table_string = (char *)copy;
  return id == UINT32_MAX ? XPTI_INVALID_STRING_ID : id;
}

XPTI_EXPORT_API const char *xptiLookupString(uint32_t id) {
  const intern_entry_t *e = intern_lookup(&g_strings, id);
  return e ? e->data : NULL;
}

XPTI_EXPORT_API int32_t xptiRegisterObject(const char *data, size_t size, uint8_t type) {
  if (!data)
    return XPTI_INVALID_OBJECT_ID;
  uint32_t id = intern(&g_objects, data, size, type, NULL);
  return id > INT32_MAX ? XPTI_INVALID_OBJECT_ID : (int32_t)id;
}

XPTI_EXPORT_API xpti_object_data_t xptiLookupObject(int32_t id) {
  xpti_object_data_t o = {0, NULL, 0};
  const intern_entry_t *e = id < 0 ? NULL : intern_lookup(&g_objects, (uint32_t)id);
  if (e) {
    o.size = e->len;
    o.data = e->data;
    o.type = e->tag;
  }
  return o;
}

/* ---- trace points ------------------------------------------------------ */

static struct {
  _Atomic(hindex_t *) slots;
  idvec_t by_uid;
  pthread_mutex_t lock;     /* growth of slots */
  pthread_mutex_t md_lock;  /* metadata writers */
  /* universal IDs handed out: 1..count; on a line of its own, away from
   * what every lookup reads */
  _Alignas(64) _Atomic uint64_t count;
} g_reg = {.lock = PTHREAD_MUTEX_INITIALIZER, .md_lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint64_t g_epoch = 1; /* bumped by xptiReset */
#define TP_INITIAL_SLOTS 4096
#define NO_STRING ((uint64_t)UINT32_MAX)

static pthread_key_t g_cache_key;
static _Atomic bool g_cache_key_ready;

static void thread_state_free(void *state);

/* Every thread's state, so that a forked child, where the other threads
 * are gone with their TLS, still holds theirs: a leak checker in the child
 * would otherwise report each (freeing them there is not safe: the
 * sanitizers' allocators are not fork-safe). */
static pthread_mutex_t g_states_lock = PTHREAD_MUTEX_INITIALIZER;
static struct thread_state *g_states;

/* Called by the constructor: no pthread_once left that fork could catch
 * half-done in another thread. */
void registry_init(void) {
  if (!atomic_load(&g_cache_key_ready) && pthread_key_create(&g_cache_key, thread_state_free) == 0)
    atomic_store(&g_cache_key_ready, true);
}

void registry_fork_lock(void) {
  pthread_mutex_lock(&g_reg.lock);
  pthread_mutex_lock(&g_reg.md_lock);
  pthread_mutex_lock(&g_states_lock);
}

void registry_fork_unlock(void) {
  pthread_mutex_unlock(&g_states_lock);
  pthread_mutex_unlock(&g_reg.md_lock);
  pthread_mutex_unlock(&g_reg.lock);
}

void registry_reset(void) {
  pthread_mutex_lock(&g_reg.lock);
  atomic_fetch_add(&g_epoch, 1); /* every thread's cache and arena are stale */
  atomic_store(&g_reg.slots, NULL); /* kept: blocks live for the process */
  for (int k = 0; k < IDVEC_SEGMENTS; k++)
    atomic_store(&g_reg.by_uid.seg[k], NULL);
  atomic_store(&g_reg.count, 0);
  pthread_mutex_unlock(&g_reg.lock);
}

/* ---- per-thread state: a cache of recent trace points and an arena ---- */
/* The cache is keyed by the caller's string pointers and numbers and
 * validated by content (strcmp), so a revisit skips hashing and the shared
 * index while a reused buffer with new text still finds its own trace
 * point.  The arena holds the thread's new trace points and strings, so
 * creation takes no lock; its chunks stay for the process (retired), as
 * the records in them do, when the thread ends.  xptiReset bumps the
 * epoch: both start again. */
#define TP_CACHE_SIZE 64
typedef struct tp_cache_entry {
  const char *name, *file;
  const void *code;
  uint64_t line_column;
  uint64_t epoch;
  tracepoint_t *tp;
} tp_cache_entry_t;

typedef struct thread_state {
  tp_cache_entry_t cache[TP_CACHE_SIZE];
  thread_alloc_t alloc;
  struct thread_state *prev, *next; /* g_states */
} thread_state_t;

static __thread thread_state_t *tls_state __attribute__((tls_model("initial-exec")));


/* At thread exit; a later destructor's call in this thread starts afresh. */
static void thread_state_free(void *state) {
  thread_state_t *ts = state;
  tls_state = NULL;
  pthread_mutex_lock(&g_states_lock);
  if (ts->prev)
    ts->prev->next = ts->next;
  else
    g_states = ts->next;
  if (ts->next)
    ts->next->prev = ts->prev;
  pthread_mutex_unlock(&g_states_lock);
  free(ts);
}

static thread_state_t *thread_state(void) {
  if (LIKELY(tls_state != NULL))
    return tls_state;
  if (!atomic_load_explicit(&g_cache_key_ready, memory_order_acquire))
    return NULL; /* before the constructor: no cache, still correct */
  thread_state_t *ts = calloc(1, sizeof *ts);
  if (!ts)
    return NULL;
  pthread_mutex_lock(&g_states_lock);
  ts->next = g_states;
  if (g_states)
    g_states->prev = ts;
  g_states = ts;
  pthread_mutex_unlock(&g_states_lock);
  tls_state = ts;
  pthread_setspecific(g_cache_key, ts); /* freed at thread exit */
  return ts;
}

thread_alloc_t *thread_alloc(void) {
  thread_state_t *ts = thread_state();
  if (UNLIKELY(!ts))
    return NULL;
  uint64_t epoch = atomic_load_explicit(&g_epoch, memory_order_relaxed);
  if (UNLIKELY(ts->alloc.epoch != epoch))
    ts->alloc = (thread_alloc_t){.epoch = epoch};
  return &ts->alloc;
}

/* A trace point is its (source file, function, line, column) by content,
 * or the code pointer when there is neither a name nor a file.  Lookups
 * hash that content in one pass and compare it with the trace point's own
 * copies, so revisiting needs no string table; the 128-bit key (string
 * ids, exact by construction) is made once, at creation. */
typedef struct tp_probe {
  const char *name, *file; /* the caller's */
  uint32_t name_len, file_len;
  uint64_t line_column;
  uint64_t code;
  uint64_t name_hash, file_hash;
  uint64_t hash;
} tp_probe_t;

#define ABSENT_NAME_SEED 0x6e6f6e616d65ull /* NULL and "" must differ */
#define ABSENT_FILE_SEED 0x6e6f66696c65ull

/* The name's and file's hashes are the string table's, so creation interns
 * them without hashing again. */
static bool probe_make(const xpti_payload_t *p, const char *fallback_name, tp_probe_t *q) {
  q->name = p->name ? p->name : fallback_name;
  q->file = p->source_file;
  if (!q->name && !q->file && !p->code_ptr_va)
    return false;
  size_t name_len = q->name ? strlen(q->name) : 0, file_len = q->file ? strlen(q->file) : 0;
  if (name_len >= UINT32_MAX || file_len >= UINT32_MAX)
    return false;
  q->name_len = (uint32_t)name_len;
  q->file_len = (uint32_t)file_len;
  q->line_column = (uint64_t)p->line_no << 32 | p->column_no;
  q->code = q->file ? 0 : (uint64_t)(uintptr_t)p->code_ptr_va;
  q->name_hash = q->name ? intern_hash(q->name, name_len, STRING_TAG) : ABSENT_NAME_SEED;
  q->file_hash = q->file ? intern_hash(q->file, file_len, STRING_TAG) : ABSENT_FILE_SEED;
  q->hash = hash_mix(q->name_hash ^ hash_mix(q->file_hash ^ 0x9e3779b97f4a7c15ull) ^
                     hash_mix(q->line_column ^ hash_mix(q->code)));
  return true;
}

static inline bool same_text_len(const char *a, uint32_t a_len, const char *copy,
                                 uint32_t copy_len) {
  if (!a || !copy)
    return a == copy;
  return a_len == copy_len && memcmp(a, copy, a_len) == 0;
}

static inline bool tp_matches(const tracepoint_t *tp, const tp_probe_t *q) {
  return tp->hash == q->hash && tp->payload.uid.p2 == q->line_column &&
         tp->payload.uid.p3 == q->code &&
         same_text_len(q->name, q->name_len, tp->payload.name, tp->name_len) &&
         same_text_len(q->file, q->file_len, tp->payload.source_file, tp->file_len);
}

static bool tp_equals(const void *found, const void *key) { return tp_matches(found, key); }
static uint64_t tp_hash(const void *element) { return ((const tracepoint_t *)element)->hash; }

/* Lock-free, like intern(): the record is built in the thread's arena, given
 * a universal ID, made findable by it, then offered to the index; the loser
 * of a race to create the same trace point takes the winner's. */
static tracepoint_t *tp_create(const xpti_payload_t *p, const tp_probe_t *q, uint16_t event_type,
                               uint16_t activity) {
  const char *name = NULL, *file = NULL;
  uint64_t name_id = NO_STRING, file_id = NO_STRING;
  const intern_entry_t *e = NULL;
  if (q->name) {
    if ((name_id = intern_hashed(&g_strings, q->name, q->name_len, STRING_TAG, q->name_hash,
                                 &e)) == UINT32_MAX)
      return NULL;
    name = e->data;
  }
  if (q->file) {
    if ((file_id = intern_hashed(&g_strings, q->file, q->file_len, STRING_TAG, q->file_hash,
                                 &e)) == UINT32_MAX)
      return NULL;
    file = e->data;
  }
  thread_alloc_t *ta = thread_alloc();
  arena_t *a = ta ? &ta->arena : NULL;
  tracepoint_t *tp = a ? arena_alloc(a, sizeof *tp, 64) : shared_alloc(sizeof *tp, 64);
  if (!tp)
    return NULL;
  uint64_t uid;
  if (LIKELY(ta != NULL)) {
    if (UNLIKELY(ta->tracepoints.next == ta->tracepoints.end)) {
      ta->tracepoints.next =
          atomic_fetch_add_explicit(&g_reg.count, ID_BLOCK, memory_order_relaxed) + 1;
      ta->tracepoints.end = ta->tracepoints.next + ID_BLOCK;
    }
    uid = ta->tracepoints.next++;
  } else {
    uid = atomic_fetch_add_explicit(&g_reg.count, 1, memory_order_relaxed) + 1;
  }
  tp->hash = q->hash;
  tp->name_len = q->name_len;
  tp->file_len = q->file_len;
  xpti_payload_t *copy = &tp->payload;
  copy->name = name;
  copy->source_file = file;
  copy->line_no = p->line_no;
  copy->column_no = p->column_no;
  copy->code_ptr_va = p->code_ptr_va;
  copy->internal = uid;
  copy->uid.p1 = file_id << 32 | name_id; /* the 128-bit key: p1, p2 */
  copy->uid.p2 = q->line_column;
  copy->uid.p3 = q->code;
  copy->flags = (name ? XPTI_PAYLOAD_NAME_AVAILABLE : 0) |
                (file ? XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE | XPTI_PAYLOAD_LINE_INFO_AVAILABLE |
                            XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE
                      : 0) |
                (p->code_ptr_va ? XPTI_PAYLOAD_CODE_PTR_AVAILABLE : 0) |
                XPTI_PAYLOAD_REGISTERED | XPTI_PAYLOAD_HASH_AVAILABLE;
  if (p->line_no == XPTI_INVALID_LINE)
    copy->flags &= ~(uint64_t)XPTI_PAYLOAD_LINE_INFO_AVAILABLE;
  if (p->column_no == XPTI_INVALID_LINE)
    copy->flags &= ~(uint64_t)XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE;
  xpti_trace_event_data_t *ev = &tp->event;
  ev->unique_id = uid;
  ev->event_type = event_type;
  ev->activity_type = activity;
  ev->reserved.payload = copy;
  ev->reserved.framework_private[0] = tp; /* marks events the framework owns */
  ev->flags = XPTI_EVENT_UID_AVAILABLE | XPTI_EVENT_TYPE_AVAILABLE |
              XPTI_EVENT_ACTIVITY_TYPE_AVAILABLE | XPTI_EVENT_PAYLOAD_AVAILABLE;
  if (!idvec_set(&g_reg.by_uid, uid - 1, tp)) {
    arena_unalloc(a, tp, sizeof *tp);
    return NULL;
  }
  tracepoint_t *in = hindex_insert(&g_reg.slots, &g_reg.lock, tp, q->hash, tp_equals, q,
                                   TP_INITIAL_SLOTS);
  if (in != tp) { /* created by another thread meanwhile, or no memory */
    idvec_set(&g_reg.by_uid, uid - 1, NULL);
    arena_unalloc(a, tp, sizeof *tp);
    return in;
  }
  hindex_t *h = atomic_load_explicit(&g_reg.slots, memory_order_acquire);
  if (h)
    hindex_grow_if_needed(&g_reg.slots, h, uid, &g_reg.lock, tp_hash);
  return tp;
}

static inline bool same_text(const char *a, const char *table_copy) {
  return a ? table_copy && strcmp(a, table_copy) == 0 : table_copy == NULL;
}

/* register: write the registration back into the caller's payload, as
 * xptiRegisterPayload does; xptiMakeEvent leaves it alone, as Intel's
 * does (threads may share one payload). */
static tracepoint_t *tp_get(xpti_payload_t *payload, const char *fallback_name,
                            uint16_t event_type, uint16_t activity, bool register_it) {
  if (!payload)
    return NULL;
  const char *name = payload->name ? payload->name : fallback_name;
  const char *file = payload->source_file;
  const void *code = file ? NULL : payload->code_ptr_va;
  uint64_t line_column = (uint64_t)payload->line_no << 32 | payload->column_no;
  uint64_t epoch = atomic_load_explicit(&g_epoch, memory_order_relaxed);
  thread_state_t *ts = thread_state();
  tp_cache_entry_t *cache = ts ? ts->cache : NULL, *slot = NULL;
  tracepoint_t *tp = NULL;
  if (LIKELY(cache != NULL)) {
    uintptr_t h = (uintptr_t)name * 31 ^ (uintptr_t)file * 17 ^ (uintptr_t)code ^ line_column;
    slot = &cache[hash_mix(h) & (TP_CACHE_SIZE - 1)];
    if (slot->epoch == epoch && slot->name == name && slot->file == file &&
        slot->code == code && slot->line_column == line_column &&
        same_text(name, slot->tp->payload.name) && same_text(file, slot->tp->payload.source_file))
      tp = slot->tp;
  }
  if (!tp) {
    tp_probe_t q;
    if (!probe_make(payload, fallback_name, &q))
      return NULL;
    tp = hindex_find(&g_reg.slots, q.hash, tp_equals, &q);
    if (UNLIKELY(!tp)) {
      /* A new one looks up both its strings: their index misses overlap
       * (with threads creating at once, each a miss to the other core). */
      if (q.name)
        hindex_prefetch(&g_strings.slots, q.name_hash);
      if (q.file)
        hindex_prefetch(&g_strings.slots, q.file_hash);
      if (!(tp = tp_create(payload, &q, event_type, activity)))
        return NULL;
    }
    if (slot)
      *slot = (tp_cache_entry_t){name, file, code, line_column, epoch, tp};
  }
  if (register_it) {
    payload->internal = tp->event.unique_id;
    payload->uid = tp->payload.uid;
    payload->flags |= XPTI_PAYLOAD_REGISTERED | XPTI_PAYLOAD_HASH_AVAILABLE;
  }
  return tp;
}

XPTI_EXPORT_API uint64_t xptiRegisterPayload(xpti_payload_t *payload) {
  tracepoint_t *tp = tp_get(payload, NULL, XPTI_EVENT_UNKNOWN, XPTI_ACTIVITY_UNKNOWN, true);
  return tp ? tp->event.unique_id : XPTI_INVALID_UID;
}

XPTI_EXPORT_API xpti_trace_event_data_t *xptiMakeEvent(const char *name, xpti_payload_t *payload,
                                                       uint16_t event_type,
                                                       xpti_trace_activity_type_t activity,
                                                       uint64_t *instance_no) {
  tracepoint_t *tp = tp_get(payload, name, event_type, (uint16_t)activity, false);
  if (!tp)
    return NULL;
  if (UNLIKELY(__atomic_load_n(&tp->event.event_type, __ATOMIC_RELAXED) == XPTI_EVENT_UNKNOWN) &&
      event_type != XPTI_EVENT_UNKNOWN)
    __atomic_store_n(&tp->event.event_type, event_type, __ATOMIC_RELAXED); /* first typed use */
  uint64_t n = atomic_fetch_add_explicit(&tp->instances, 1, memory_order_relaxed) + 1;
  __atomic_store_n(&tp->event.instance_id, n, __ATOMIC_RELAXED);
  if (instance_no)
    *instance_no = n;
  return &tp->event;
}

/* by_uid holds universal ID u at u - 1: a thread's block of IDs (8m+1 ..
 * 8m+8) is then one cache line, not two shared with another thread's. */
static inline tracepoint_t *tp_by_uid(uint64_t uid) {
  return uid ? idvec_get(&g_reg.by_uid, uid - 1) : NULL;
}

tracepoint_t *tracepoint_from_event(const xpti_trace_event_data_t *event) {
  if (!event)
    return NULL;
  if (event->reserved.framework_private[0] == (const void *)event)
    return (tracepoint_t *)event;
  return tp_by_uid(event->unique_id); /* a caller's copy of one of ours */
}

XPTI_EXPORT_API const xpti_trace_event_data_t *xptiFindEvent(uint64_t universal_id) {
  tracepoint_t *tp = tp_by_uid(universal_id);
  return tp ? &tp->event : NULL;
}

XPTI_EXPORT_API const xpti_payload_t *xptiQueryPayload(xpti_trace_event_data_t *event) {
  if (!event)
    return NULL;
  if (event->reserved.payload)
    return event->reserved.payload;
  tracepoint_t *tp = tracepoint_from_event(event);
  return tp ? &tp->payload : NULL;
}

XPTI_EXPORT_API const xpti_payload_t *xptiQueryPayloadByUID(uint64_t universal_id) {
  tracepoint_t *tp = tp_by_uid(universal_id);
  return tp ? &tp->payload : NULL;
}

XPTI_EXPORT_API void xptiReleaseEvent(xpti_trace_event_data_t *event) {
  tracepoint_t *tp = tracepoint_from_event(event);
  if (tp) {
    atomic_store_explicit(&tp->instances, 0, memory_order_relaxed);
    __atomic_store_n(&tp->event.instance_id, 0, __ATOMIC_RELAXED);
  }
}

/* ---- metadata --------------------------------------------------------- */

static int metadata_find(const metadata_block_t *b, uint32_t key) {
  if (!b)
    return -1;
  uint32_t n = atomic_load_explicit(&((metadata_block_t *)b)->count, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (b->item[i].key == key)
      return (int)i;
  return -1;
}

XPTI_EXPORT_API xpti_result_t xptiAddMetadata(xpti_trace_event_data_t *event, const char *key,
                                              int32_t value_object_id) {
  tracepoint_t *tp = tracepoint_from_event(event);
  if (!tp || !key || value_object_id < 0 ||
      !intern_lookup(&g_objects, (uint32_t)value_object_id))
    return XPTI_RESULT_INVALIDARG;
  uint32_t key_id = string_intern(key, NULL);
  if (key_id == UINT32_MAX)
    return XPTI_RESULT_FAIL;
  xpti_result_t r = XPTI_RESULT_SUCCESS;
  pthread_mutex_lock(&g_reg.md_lock);
  metadata_block_t *b = atomic_load_explicit(&tp->metadata, memory_order_relaxed);
  /* Intel's: a key already there gets the new value, and says DUPLICATE. */
  int at = metadata_find(b, key_id);
  if (at >= 0) {
    void *old_map = atomic_load_explicit(&tp->cxx_map, memory_order_relaxed);
    if (old_map && !compat_map_insert(old_map, key_id, value_object_id)) {
      r = XPTI_RESULT_FAIL;
      goto out;
    }
    __atomic_store_n(&b->item[at].value, value_object_id, __ATOMIC_RELAXED);
    r = XPTI_RESULT_DUPLICATE;
    goto out;
  }
  uint32_t n = b ? atomic_load_explicit(&b->count, memory_order_relaxed) : 0;
  if (!b || n == b->cap) {
    uint32_t cap = b ? b->cap * 2 : 4;
    metadata_block_t *bigger = xcalloc(1, sizeof *bigger + cap * sizeof bigger->item[0]);
    if (!bigger) {
      r = XPTI_RESULT_FAIL;
      goto out;
    }
    bigger->cap = cap;
    if (b) {
      memcpy(bigger->item, b->item, n * sizeof b->item[0]);
      retire(b);
    }
    atomic_store_explicit(&bigger->count, n, memory_order_relaxed);
    atomic_store_explicit(&tp->metadata, bigger, memory_order_release);
    b = bigger;
  }
  /* Intel's map, once someone asked for it, gets every item too. */
  void *map = atomic_load_explicit(&tp->cxx_map, memory_order_relaxed);
  if (map && !compat_map_insert(map, key_id, value_object_id)) {
    r = XPTI_RESULT_FAIL;
    goto out;
  }
  b->item[n].key = key_id;
  b->item[n].value = value_object_id;
  atomic_store_explicit(&b->count, n + 1, memory_order_release);
out:
  pthread_mutex_unlock(&g_reg.md_lock);
  return r;
}

XPTI_EXPORT_API xpti_result_t xptiLookupMetadata(const xpti_trace_event_data_t *event,
                                                 const char *key, int32_t *value_object_id) {
  tracepoint_t *tp = tracepoint_from_event(event);
  if (!tp || !key || !value_object_id)
    return XPTI_RESULT_INVALIDARG;
  metadata_block_t *b = atomic_load_explicit(&tp->metadata, memory_order_acquire);
  if (!b)
    return XPTI_RESULT_NOTFOUND;
  uint32_t key_id = string_intern(key, NULL);
  int i = metadata_find(b, key_id);
  if (i < 0)
    return XPTI_RESULT_NOTFOUND;
  *value_object_id = __atomic_load_n(&b->item[i].value, __ATOMIC_RELAXED);
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API uint32_t xptiMetadataCount(const xpti_trace_event_data_t *event) {
  tracepoint_t *tp = tracepoint_from_event(event);
  metadata_block_t *b = tp ? atomic_load_explicit(&tp->metadata, memory_order_acquire) : NULL;
  return b ? atomic_load_explicit(&b->count, memory_order_acquire) : 0;
}

XPTI_EXPORT_API xpti_result_t xptiMetadataAt(const xpti_trace_event_data_t *event, uint32_t index,
                                             uint32_t *key_string_id, int32_t *value_object_id) {
  tracepoint_t *tp = tracepoint_from_event(event);
  if (!tp)
    return XPTI_RESULT_INVALIDARG;
  metadata_block_t *b = atomic_load_explicit(&tp->metadata, memory_order_acquire);
  if (!b || index >= atomic_load_explicit(&b->count, memory_order_acquire))
    return XPTI_RESULT_NOTFOUND;
  if (key_string_id)
    *key_string_id = b->item[index].key;
  if (value_object_id)
    *value_object_id = __atomic_load_n(&b->item[index].value, __ATOMIC_RELAXED);
  return XPTI_RESULT_SUCCESS;
}

/* ---- Intel's C++ views, made once per trace point ------------------- */

void *tracepoint_cxx_map(const xpti_trace_event_data_t *event) {
  tracepoint_t *tp = tracepoint_from_event(event);
  if (!tp)
    return NULL;
  void *map = atomic_load_explicit(&tp->cxx_map, memory_order_acquire);
  if (LIKELY(map != NULL))
    return map;
  pthread_mutex_lock(&g_reg.md_lock);
  map = atomic_load_explicit(&tp->cxx_map, memory_order_relaxed);
  if (!map && (map = compat_map_new()) != NULL) {
    metadata_block_t *b = atomic_load_explicit(&tp->metadata, memory_order_relaxed);
    uint32_t n = b ? atomic_load_explicit(&b->count, memory_order_relaxed) : 0;
    for (uint32_t i = 0; i < n; i++)
      if (!compat_map_insert(map, b->item[i].key, b->item[i].value)) {
        map = NULL; /* leaked: rare, and never half-published */
        break;
      }
    if (map)
      atomic_store_explicit(&tp->cxx_map, map, memory_order_release);
  }
  pthread_mutex_unlock(&g_reg.md_lock);
  return map;
}

void *tracepoint_cxx_objects(const xpti_trace_event_data_t *event) {
  tracepoint_t *tp = tracepoint_from_event(event);
  if (!tp)
    return NULL;
  void *o = atomic_load_explicit(&tp->cxx_objects, memory_order_acquire);
  if (LIKELY(o != NULL))
    return o;
  pthread_mutex_lock(&g_reg.md_lock);
  o = atomic_load_explicit(&tp->cxx_objects, memory_order_relaxed);
  if (!o && (o = compat_objects_new(&tp->event)) != NULL)
    atomic_store_explicit(&tp->cxx_objects, o, memory_order_release);
  pthread_mutex_unlock(&g_reg.md_lock);
  return o;
}

XPTI_EXPORT_API xpti_metadata_map_t *xptiQueryMetadata(xpti_trace_event_data_t *event) {
  return (xpti_metadata_map_t *)tracepoint_cxx_map(event);
}
