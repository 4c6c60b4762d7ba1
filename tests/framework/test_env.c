/* Environment handling of the dispatcher when linked directly: prints
 * whether tracing is enabled; tests/framework/test_env.sh checks the
 * answer and stderr for each environment. */
#include <stdio.h>

#include "xpti/xpti_trace_framework.h"

int main(void) {
  xpti_result_t r = xptiInitialize("env.stream", 1, 0, "1.0");
  printf("enabled=%d init=%s\n", xptiTraceEnabled(),
         r == XPTI_RESULT_SUCCESS ? "success" : r == XPTI_RESULT_FALSE ? "false" : "other");
  xptiFinalize("env.stream");
  return 0;
}
