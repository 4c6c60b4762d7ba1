/* xptrace causal profiling: progress points (see docs/causal.md).
 *
 *   XPTRACE_PROGRESS("frame done");   one unit of work finished (throughput)
 *   XPTRACE_BEGIN("request");         a transaction starts ...
 *   XPTRACE_END("request");           ... and ends (latency)
 *
 * Without `xptrace causal` (libxptrace_causal.so not loaded) each costs one
 * load and one branch: the hook is a weak symbol that stays null.  Weak
 * references need a PIE or shared object (Debian's gcc default); a non-PIE
 * executable linked without the library resolves it to 0 at link time and
 * the points then never count.
 *
 * Coz's spellings (COZ_PROGRESS, COZ_PROGRESS_NAMED, COZ_BEGIN, COZ_END)
 * are here too, with Coz's semantics, so Coz-instrumented code builds
 * against this header unchanged; a program built with Coz's own coz.h
 * finds our `_coz_get_counter` the way coz.h looks for Coz's.  Include
 * either this header or coz.h in a file, not both. */
#ifndef XPTRACE_CAUSAL_H
#define XPTRACE_CAUSAL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { XPTRACE_CAUSAL_THROUGHPUT = 1, XPTRACE_CAUSAL_BEGIN = 2, XPTRACE_CAUSAL_END = 3 };

/* One site of XPTRACE_PROGRESS/BEGIN/END; `counter` is the library's. */
typedef struct xptrace_progress_site {
  const char *name;
  int type;
  void *counter;
} xptrace_progress_site_t;

/* Defined by libxptrace_causal.so only. */
extern void xptrace_causal_hit(xptrace_progress_site_t *site) __attribute__((weak));

#define XPTRACE__POINT(type_, name_)                                                          \
  do {                                                                                       \
    static xptrace_progress_site_t xptrace__site_ = {(name_), (type_), NULL};                \
    if (xptrace_causal_hit)                                                                  \
      xptrace_causal_hit(&xptrace__site_);                                                   \
  } while (0)
#define XPTRACE_PROGRESS(name) XPTRACE__POINT(XPTRACE_CAUSAL_THROUGHPUT, name)
#define XPTRACE_BEGIN(name) XPTRACE__POINT(XPTRACE_CAUSAL_BEGIN, name)
#define XPTRACE_END(name) XPTRACE__POINT(XPTRACE_CAUSAL_END, name)

/* ---- Coz compatibility (coz.h's names, values and layout) ---------------- */
#ifndef COZ_H
#define COZ_COUNTER_TYPE_THROUGHPUT 1
#define COZ_COUNTER_TYPE_BEGIN 2
#define COZ_COUNTER_TYPE_END 3

typedef struct {
  size_t count;   /* incremented atomically by the program */
  size_t backoff; /* unused, as in Coz */
} coz_counter_t;

extern coz_counter_t *_coz_get_counter(int type, const char *name) __attribute__((weak));

#define XPTRACE__STR2(x) #x
#define XPTRACE__STR(x) XPTRACE__STR2(x)
#define XPTRACE__COZ(type_, name_)                                                           \
  do {                                                                                       \
    static coz_counter_t *xptrace__coz_;                                                     \
    static int xptrace__coz_init_;                                                           \
    if (!__atomic_load_n(&xptrace__coz_init_, __ATOMIC_ACQUIRE)) {                           \
      if (_coz_get_counter)                                                                  \
        __atomic_store_n(&xptrace__coz_, _coz_get_counter((type_), (name_)),                 \
                         __ATOMIC_RELAXED);                                                  \
      __atomic_store_n(&xptrace__coz_init_, 1, __ATOMIC_RELEASE);                            \
    }                                                                                        \
    coz_counter_t *xptrace__c_ = __atomic_load_n(&xptrace__coz_, __ATOMIC_RELAXED);          \
    if (xptrace__c_)                                                                         \
      __atomic_add_fetch(&xptrace__c_->count, 1, __ATOMIC_RELAXED);                          \
  } while (0)
#define COZ_PROGRESS_NAMED(name) XPTRACE__COZ(COZ_COUNTER_TYPE_THROUGHPUT, name)
#define COZ_PROGRESS XPTRACE__COZ(COZ_COUNTER_TYPE_THROUGHPUT, __FILE__ ":" XPTRACE__STR(__LINE__))
#define COZ_BEGIN(name) XPTRACE__COZ(COZ_COUNTER_TYPE_BEGIN, name)
#define COZ_END(name) XPTRACE__COZ(COZ_COUNTER_TYPE_END, name)
#endif

#ifdef __cplusplus
}
#endif

#endif /* XPTRACE_CAUSAL_H */
