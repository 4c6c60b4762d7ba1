/* Good setup: the real dispatcher and a counting subscriber.  Built
 * twice: linked with the proxy (XPTI_FRAMEWORK_DISPATCHER names
 * libxptifw.so) and linked with libxptifw.so directly.
 * Usage: proxy_real <subscriber path>   (XPTI_SUBSCRIBERS names it too) */
#include <stdlib.h>

#include "proxy_test.h"
#include "xpti/xpti_trace_framework.h"

#define STREAM "xptrace.proxy.test"
#define VISITS 1000

static unsigned (*subscriber_count)(const char *what);
static const char *(*subscriber_first_stream)(void);

static int find_subscriber(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  void *symbol;
  if (!handle)
    return 0;
  symbol = dlsym(handle, "test_subscriber_count");
  memcpy(&subscriber_count, &symbol, sizeof symbol);
  symbol = dlsym(handle, "test_subscriber_first_stream");
  memcpy(&subscriber_first_stream, &symbol, sizeof symbol);
  dlclose(handle); /* the dispatcher still holds it */
  return subscriber_count && subscriber_first_stream;
}

int main(int argc, char **argv) {
  xpti_payload_t payload = xpti_payload_make("proxy_work", __FILE__, __LINE__, 0, NULL);
  xpti_trace_event_data_t *event;
  uint64_t instance = 0;
  uint8_t stream;
  if (argc != 2) {
    printf("usage: %s <subscriber>\n", argv[0]);
    return 2;
  }
  PTEST_CHECK(xptiTraceEnabled());
  PTEST_CHECK(xptiTraceTryToEnable());
  PTEST_CHECK(xptiFrameworkInitialize() == XPTI_RESULT_SUCCESS);
  if (!find_subscriber(argv[1])) {
    printf("FAIL: subscriber %s not loaded\n", argv[1]);
    return EXIT_FAILURE;
  }

  PTEST_CHECK(xptiInitialize(STREAM, XPTI_VERSION_MAJOR, XPTI_VERSION_MINOR,
                             XPTI_VERSION_STRING) == XPTI_RESULT_SUCCESS);
  /* Intel's default stream is initialised first, once */
  PTEST_CHECK(subscriber_count("inits") == 2);
  PTEST_CHECK(strcmp(subscriber_first_stream(), "xpti.framework") == 0);

  stream = xptiRegisterStream(STREAM);
  PTEST_CHECK(stream != XPTI_INVALID_STREAM_ID);
  PTEST_CHECK(xptiLookupStreamName(stream) && strcmp(xptiLookupStreamName(stream), STREAM) == 0);
  PTEST_CHECK(xptiCheckTraceEnabled(stream, XPTI_TRACE_TASK_BEGIN));
  PTEST_CHECK(xptiCheckTraceEnabled(stream, 0));
  PTEST_CHECK(!xptiCheckTraceEnabled(stream, XPTI_TRACE_BARRIER_BEGIN));

  event = xptiMakeEvent("proxy_work", &payload, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE,
                        &instance);
  PTEST_CHECK(event != NULL);
  PTEST_CHECK(instance == 1);
  if (event) {
    PTEST_CHECK(xptiFindEvent(event->unique_id) == event);
    for (int i = 0; i < VISITS; i++) {
      PTEST_CHECK(xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, event, instance,
                                        NULL) == XPTI_RESULT_SUCCESS);
      PTEST_CHECK(xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, event, instance,
                                        NULL) == XPTI_RESULT_SUCCESS);
    }
    /* No callback for this type: nothing counted. */
    xptiNotifySubscribers(stream, XPTI_TRACE_BARRIER_BEGIN, NULL, event, instance, NULL);
  }
  PTEST_CHECK(subscriber_count("task_begins") == VISITS);
  PTEST_CHECK(subscriber_count("task_ends") == VISITS);

  xptiFinalize(STREAM); /* finishes the default stream too */
  PTEST_CHECK(subscriber_count("finishes") == 2);
  return ptest_failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
