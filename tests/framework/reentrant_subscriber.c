/* A subscriber that calls the API back where it hurts (issue 24):
 * - its constructor starts a thread that calls the API and joins it
 *   (the thread waited for the load its own constructor was part of);
 * - its xptiTraceInit initializes the stream again and its
 *   xptiTraceFinish finalizes it again (finish recursed until the stack
 *   overflowed);
 * It counts what it was called with, for test_reentrant.c. */
#include <pthread.h>
#include <stdatomic.h>

#include "xpti/xpti_trace_framework.h"

XPTI_CALLBACK_API _Atomic int reentrant_inits, reentrant_finishes, reentrant_thread_ran;

static void *from_constructor(void *arg) {
  (void)arg;
  (void)xptiRegisterStream("reentrant.ctor");
  (void)xptiInitialize("reentrant.ctor", 1, 0, "1.0"); /* needs the subscribers loaded */
  (void)xptiTraceEnabled();
  atomic_store(&reentrant_thread_ran, 1);
  return NULL;
}

__attribute__((constructor)) static void start_and_join(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, from_constructor, NULL) == 0)
    pthread_join(t, NULL);
}

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  atomic_fetch_add(&reentrant_inits, 1);
  (void)xptiInitialize(stream, major, minor, version);
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) {
  atomic_fetch_add(&reentrant_finishes, 1);
  xptiFinalize(stream);
}
