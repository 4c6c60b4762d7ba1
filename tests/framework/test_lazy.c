/* XPTI_SUBSCRIBERS names lazy_subscriber.so (argv[1]): it loads and its
 * callback runs although it references a symbol nobody defines. */
#include <dlfcn.h>
#include <stdio.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  CHECK(xptiTraceEnabled());
  CHECK_EQ(xptiInitialize("lazy", 1, 0, "1"), XPTI_RESULT_SUCCESS);
  xpti_payload_t p = XPTI_PAYLOAD_HERE();
  xpti_trace_event_data_t *e = xptiMakeEvent(NULL, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  CHECK_EQ(xptiNotifySubscribers(xptiRegisterStream("lazy"), XPTI_TRACE_TASK_BEGIN, NULL, e, 1, NULL),
           XPTI_RESULT_SUCCESS);
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  CHECK(h != NULL);
  int (*calls)(void) = h ? (int (*)(void))dlsym(h, "lazy_subscriber_calls") : NULL;
  CHECK(calls && calls() == 1);
  xptiFinalize("lazy");
  return CHECK_DONE();
}
