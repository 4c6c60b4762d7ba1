/* A subscriber built against a newer API: it references a function no
 * dispatcher of ours has, on a path it never takes.  Loaded lazily, it
 * still works (issue 12). */
#include "xpti/xpti_trace_framework.h"

void xptiFunctionFromTheFuture(void); /* defined nowhere */
static int g_calls;
static void count(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e, uint64_t i,
                  const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  if (++g_calls < 0)
    xptiFunctionFromTheFuture();
}
XPTI_CALLBACK_API int lazy_subscriber_calls(void) { return g_calls; }
XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  (void)major, (void)minor, (void)version;
  xptiRegisterCallback(xptiRegisterStream(stream), XPTI_TRACE_TASK_BEGIN, count);
}
XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) { (void)stream; }
