/* A program built against the installed package only. */
#include <stdio.h>
#include <xpti/xpti_trace_framework.h>

int main(void) {
  uint8_t stream = xptiRegisterStream("consumer");
  xptiInitialize("consumer", 1, 0, "1.0");
  for (int i = 0; i < 3; i++) {
    xpti_payload_t p = XPTI_PAYLOAD_HERE();
    uint64_t instance = 0;
    xpti_trace_event_data_t *e =
        xptiMakeEvent("consumer_task", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
    XPTI_SCOPED_NOTIFY(stream, XPTI_TRACE_TASK_BEGIN, NULL, e, instance, NULL);
  }
  xptiFinalize("consumer");
  printf("consumer done, tracing %s\n", xptiTraceEnabled() ? "on" : "off");
  return 0;
}
