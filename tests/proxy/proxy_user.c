/* A shared library that links libxpti.a: none of the stubs may be
 * exported from it (check_exports.sh). */
#include "xpti/xpti_trace_framework.h"

__attribute__((visibility("default"))) bool proxy_user_trace_enabled(void) {
  return xptiTraceEnabled();
}
