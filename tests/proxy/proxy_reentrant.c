/* A subscriber calling the API from its constructor must not keep main
 * from running (issue 8, row 6).  Built twice: with the proxy (which
 * loads the dispatcher, which loads the subscriber) and with
 * libxptifw.so linked directly.  The subscriber links libxptifw.so, so
 * its calls reach the dispatcher mid-load either way (libxpti.a exports
 * nothing), and each must have answered the dispatcher's default.
 * Usage: proxy_reentrant <subscriber> */
#include <stdatomic.h>
#include <stdlib.h>

#include "proxy_test.h"
#include "xpti/xpti_trace_framework.h"

typedef struct reentrant_record {
  int ctor_ran;
  int framework_initialize, initialize, framework_finalize;
  int trace_enabled, check_enabled;
  int stream_id;
  int callback, string_ok, event_ok;
} reentrant_record_t;

int main(int argc, char **argv) {
  if (argc != 2) {
    printf("usage: %s <subscriber>\n", argv[0]);
    return 2;
  }
  PTEST_CHECK(xptiTraceEnabled()); /* loads everything through the proxy */
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  PTEST_CHECK(h != NULL);
  if (!h)
    return EXIT_FAILURE;
  const reentrant_record_t *r = dlsym(h, "reentrant_record");
  atomic_uint *inits = dlsym(h, "reentrant_inits"), *hits = dlsym(h, "reentrant_hits");
  PTEST_CHECK(r && inits && hits);
  if (!r || !inits || !hits)
    return EXIT_FAILURE;
  PTEST_CHECK(r->ctor_ran);
  PTEST_CHECK(!r->trace_enabled);
  PTEST_CHECK(!r->check_enabled);
  /* the dispatcher's answers while it loads: defaults for what needs
   * the subscribers, and registration works */
  PTEST_CHECK(r->framework_initialize == (int)XPTI_RESULT_FALSE);
  PTEST_CHECK(r->initialize == (int)XPTI_RESULT_FALSE);
  PTEST_CHECK(r->framework_finalize == (int)XPTI_RESULT_FALSE);
  PTEST_CHECK(r->stream_id != XPTI_INVALID_STREAM_ID);
  PTEST_CHECK(r->callback == (int)XPTI_RESULT_SUCCESS);
  PTEST_CHECK(r->string_ok && r->event_ok);
  PTEST_CHECK(*inits == 0); /* nothing announced during the load */

  /* Loaded: the subscriber is told about streams and gets events. */
  PTEST_CHECK(xptiFrameworkInitialize() == XPTI_RESULT_SUCCESS);
  PTEST_CHECK(xptiInitialize("reentrant.main", 1, 0, "1.0") == XPTI_RESULT_SUCCESS);
  PTEST_CHECK(*inits == 2); /* "xpti.framework" first, as Intel's */
  uint8_t s = xptiRegisterStream("reentrant.main");
  xpti_payload_t p = xpti_payload_make("main", __FILE__, __LINE__, 1, NULL);
  uint64_t instance = 0;
  xpti_trace_event_data_t *e =
      xptiMakeEvent("main", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
  PTEST_CHECK(e != NULL);
  for (int i = 0; i < 10; i++)
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, instance, NULL);
  PTEST_CHECK(*hits == 10);
  /* the callback registered from the constructor works too */
  xptiNotifySubscribers((uint8_t)r->stream_id, XPTI_TRACE_TASK_BEGIN, NULL, e, instance, NULL);
  PTEST_CHECK(*hits == 11);
  xptiFinalize("reentrant.main");
  return ptest_failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
