/* Tools' user-defined types, unique ids and per-thread values (the
 * universal id, the stashed tuple). */
#include "dispatch.h"

static _Atomic(const char *) g_tool[MAX_TOOLS + 1]; /* tool id -> name */
static _Atomic uint64_t g_next_unique_id;

static __thread uint64_t tls_universal_id __attribute__((tls_model("initial-exec")));
static __thread const char *tls_stash_key __attribute__((tls_model("initial-exec")));
static __thread uint64_t tls_stash_value __attribute__((tls_model("initial-exec")));

/* ---- user-defined types --------------------------------------------- */

static uint8_t tool_id(const char *tool_name) {
  const char *copy;
  if (string_intern(tool_name, &copy) == UINT32_MAX)
    return 0;
  for (int i = 1; i <= MAX_TOOLS; i++) {
    const char *t = atomic_load_explicit(&g_tool[i], memory_order_acquire);
    if (t == copy)
      return (uint8_t)i;
    if (!t) { /* first free: claim it under the lock */
      pthread_mutex_lock(&g_fw.lock);
      for (; i <= MAX_TOOLS; i++) {
        t = atomic_load_explicit(&g_tool[i], memory_order_relaxed);
        if (t == copy || !t) {
          if (!t)
            atomic_store_explicit(&g_tool[i], copy, memory_order_release);
          pthread_mutex_unlock(&g_fw.lock);
          return (uint8_t)i;
        }
      }
      pthread_mutex_unlock(&g_fw.lock);
      break;
    }
  }
  static _Atomic bool said;
  report_once(&said, "xpti: more than %d tools register user-defined types", MAX_TOOLS);
  return 0;
}

static uint16_t user_defined(const char *tool_name, uint8_t value) {
  if (!tool_name || value > 0x7f)
    return 0;
  uint8_t id = tool_id(tool_name);
  return id ? (uint16_t)(XPTI_PACK_TOOL_ID(id) | XPTI_USER_DEFINED(value)) : 0;
}

XPTI_EXPORT_API uint16_t xptiRegisterUserDefinedTracePoint(const char *tool_name,
                                                           uint8_t user_defined_tp) {
  return user_defined(tool_name, user_defined_tp);
}

XPTI_EXPORT_API uint16_t xptiRegisterUserDefinedEventType(const char *tool_name,
                                                          uint8_t user_defined_event) {
  return user_defined(tool_name, user_defined_event);
}

XPTI_EXPORT_API const char *xptiLookupToolName(uint8_t id) {
  return id ? atomic_load_explicit(&g_tool[id], memory_order_acquire) : NULL;
}

/* ---- identifiers and thread-local state ----------------------------- */

XPTI_EXPORT_API uint64_t xptiGetUniqueId(void) {
  return atomic_fetch_add_explicit(&g_next_unique_id, 1, memory_order_relaxed) + 1;
}

XPTI_EXPORT_API uint64_t xptiGetUniversalId(void) { return tls_universal_id; }

XPTI_EXPORT_API void xptiSetUniversalId(uint64_t universal_id) {
  tls_universal_id = universal_id;
}

XPTI_EXPORT_API xpti_result_t xptiStashTuple(const char *key, uint64_t value) {
  if (!key)
    return XPTI_RESULT_INVALIDARG;
  const char *copy; /* a second stash replaces the first, as Intel's does */
  if (string_intern(key, &copy) == UINT32_MAX)
    return XPTI_RESULT_FAIL;
  tls_stash_key = copy;
  tls_stash_value = value;
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API xpti_result_t xptiGetStashedTuple(char **key, uint64_t *value) {
  if (!key || !value)
    return XPTI_RESULT_INVALIDARG;
  if (!tls_stash_key)
    return XPTI_RESULT_NOTFOUND;
  *key = (char *)tls_stash_key;
  *value = tls_stash_value;
  return XPTI_RESULT_SUCCESS;
}

XPTI_EXPORT_API void xptiUnstashTuple(void) { tls_stash_key = NULL; }

void ids_reset(void) {
  pthread_mutex_lock(&g_fw.lock);
  for (int i = 0; i <= MAX_TOOLS; i++)
    atomic_store(&g_tool[i], NULL);
  pthread_mutex_unlock(&g_fw.lock);
  tls_stash_key = NULL;
  tls_universal_id = 0;
}
