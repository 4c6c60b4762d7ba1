// The public headers compile as C++ and the API links from C++.
#include <cstdio>
#include <cstring>

#include "xpti/xpti_trace_framework.h"

static int hits;
static void on_task(uint16_t, xpti_trace_event_data_t *, xpti_trace_event_data_t *, uint64_t,
                    const void *) {
  ++hits;
}

int main() {
  xptiForceSetTraceEnabled(true);
  uint8_t stream = xptiRegisterStream("cxx");
  if (xptiRegisterCallback(stream, XPTI_TRACE_TASK_BEGIN, on_task) != XPTI_RESULT_SUCCESS ||
      xptiRegisterCallback(stream, XPTI_TRACE_TASK_END, on_task) != XPTI_RESULT_SUCCESS)
    return 1;
  xpti_payload_t p = XPTI_PAYLOAD_HERE();
  uint64_t instance = 0;
  xpti_trace_event_data_t *e =
      xptiMakeEvent("cxx", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
  {
    XPTI_SCOPED_NOTIFY(stream, XPTI_TRACE_TASK_BEGIN, nullptr, e, instance, nullptr);
    if (hits != 1)
      return 2;
  }
  const xpti_payload_t *q = xptiQueryPayload(e);
  if (hits != 2 || !q || std::strcmp(q->name, "main") != 0 || instance != 1)
    return 3;
  static_assert(sizeof(xpti_trace_event_data_t) == 128, "event layout seen from C++");
  std::puts("cxx ok");
  return 0;
}
