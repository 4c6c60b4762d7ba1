/* A traced program forks: parent and child keep creating and notifying. */
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

static int hits;
static void cb(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e, uint64_t i,
               const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  hits++;
}

static int exercise(uint8_t s, const char *who) {
  int before = hits;
  xpti_payload_t p = xpti_payload_make(who, "fork.c", 1, 1, NULL);
  uint64_t inst;
  xpti_trace_event_data_t *e = xptiMakeEvent(who, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst);
  if (!e || xptiFindEvent(e->unique_id) != e)
    return 1;
  for (int i = 0; i < 100; i++)
    xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, inst, NULL);
  return hits - before == 100 ? 0 : 1;
}

int main(void) {
  xptiForceSetTraceEnabled(true);
  uint8_t s = xptiRegisterStream("fork");
  xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, cb);
  CHECK_EQ(exercise(s, "before"), 0);
  pid_t pid = fork();
  if (pid == 0) {
    int r = exercise(s, "child") | exercise(s, "before");
    r |= xptiRegisterStream("child-only") == XPTI_INVALID_STREAM_ID;
    _exit(r);
  }
  CHECK(pid > 0);
  CHECK_EQ(exercise(s, "parent"), 0);
  int status = 0;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return CHECK_DONE();
}
