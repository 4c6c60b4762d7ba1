/* Issue 8, row 3: a program that closes fds 0, 1 and 2, then traces.
 * Files opened by the collectors then take fds 0-2; nothing of ours may
 * be written into them.  Usage: closed_fds early|late
 *   early: tracing starts (collectors load) before the fds are closed;
 *   late:  the first XPTI call, after they are closed, loads them. */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <xpti/xpti_trace_framework.h>

int main(int argc, char **argv) {
  bool early = argc > 1 && strcmp(argv[1], "early") == 0;
  if (early)
    xptiInitialize("closed", 1, 0, "1.0");
  close(0);
  close(1);
  close(2);
  if (!early)
    xptiInitialize("closed", 1, 0, "1.0");
  uint8_t stream = xptiRegisterStream("closed");
  xpti_payload_t p = xpti_payload_make("work", "closed_fds.c", 20, 0, NULL);
  xpti_trace_event_data_t *ev =
      xptiMakeEvent("work", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  for (uint64_t i = 0; i < 100; ++i) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, i, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, i, NULL);
  }
  xptiFinalize("closed");
  return 0;
}
