/* A subscriber without xptiTraceFinish: the dispatcher must refuse it,
 * so this init must never run. */
#include <stdio.h>

#include <xpti/xpti_data_types.h>

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  (void)major, (void)minor, (void)version;
  fprintf(stderr, "nofinish subscriber: init called for %s\n", stream);
}
