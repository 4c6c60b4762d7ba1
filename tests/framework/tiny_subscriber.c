/* The smallest valid subscriber: copies of it fill XPTI_SUBSCRIBERS. */
#include "xpti/xpti_trace_framework.h"

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  (void)major, (void)minor, (void)version, (void)stream;
}
XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) { (void)stream; }
