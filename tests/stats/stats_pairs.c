/* stats_pairs: shapes of begin/end pairing that every collector must
 * read alike (the trace pairs by universal ID and instance, innermost
 * first).  10,000 of each, on one thread:
 *   "owned"     begun with a caller-owned event, ended with a copy of it
 *   "copied"    a registered event begun, ended with a struct copy
 *   "instanced" the same event nested in itself, told apart by instance
 *               and ended in the order begun (1 2 ... ends 2 1)
 * tests/stats/CMakeLists.txt runs it under `xptrace run -c stats,perfetto`
 * and wants 10,000 matched pairs of each in both, none unmatched.
 * `stats_pairs paced`: a 1 ms pause every 500 rounds, so that a busy
 * machine still lets the recorder's thread copy chunks out (the budget
 * test wants drops from its size limit, not from a recorder left behind). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "xpti/xpti_trace_framework.h"

#define N 10000

int main(int argc, char **argv) {
  int paced = argc > 1 && strcmp(argv[1], "paced") == 0;
  xptiInitialize("pairs.test", 1, 0, "1.0");
  uint8_t s = xptiRegisterStream("pairs.test");
  xpti_payload_t po = xpti_payload_make("owned", "stats_pairs.c", 1, 0, NULL);
  xpti_trace_event_data_t owned;
  memset(&owned, 0, sizeof owned);
  owned.unique_id = 0x5eed00000001ull;
  owned.reserved.payload = &po;
  xpti_payload_t pc = xpti_payload_make("copied", "stats_pairs.c", 2, 0, NULL);
  xpti_trace_event_data_t *copied =
      xptiMakeEvent("copied", &pc, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  xpti_payload_t pi = xpti_payload_make("instanced", "stats_pairs.c", 3, 0, NULL);
  xpti_trace_event_data_t *inst =
      xptiMakeEvent("instanced", &pi, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  if (!copied || !inst)
    return 1;
  for (int i = 0; i < N; i++) {
    if (paced && i % 500 == 499)
      usleep(1000);
    xpti_trace_event_data_t end_copy = owned;
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, &owned, 0, NULL);
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_END, NULL, &end_copy, 0, NULL);
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, copied, 0, NULL);
    xpti_trace_event_data_t copy = *copied;
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_END, NULL, &copy, 0, NULL);
  }
  for (int i = 0; i < N; i += 2) {
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, inst, (uint64_t)i + 1, NULL);
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, inst, (uint64_t)i + 2, NULL);
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_END, NULL, inst, (uint64_t)i + 2, NULL);
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_END, NULL, inst, (uint64_t)i + 1, NULL);
  }
  xptiFinalize("pairs.test");
  puts("stats_pairs: done");
  return 0;
}
