/* Many threads notify at once, some through user-defined types of tools
 * registered while the others run: every line arrives whole, exactly once.
 * CTest sets XPTI_SUBSCRIBERS to the collector and XPTI_TEXT_OUTPUT. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xpti/xpti_trace_framework.h>

enum { THREADS = 8, VISITS = 2000, TOOL_VISITS = 100 };

static uint8_t stream;
static pthread_barrier_t start;

static void *thread_main(void *arg) {
  int t = (int)(intptr_t)arg;
  char name[32];
  snprintf(name, sizeof name, "work %d", t);
  xpti_payload_t p = xpti_payload_make(name, "threads.c", (uint32_t)t, 0, NULL);
  xpti_trace_event_data_t *ev =
      xptiMakeEvent(NULL, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  int32_t who = t;
  xptiAddMetadata(ev, "thread", xptiRegisterObject((const char *)&who, sizeof who,
                                                   XPTI_METADATA_SIGNED_INTEGER));
  pthread_barrier_wait(&start);
  for (int i = 0; i < VISITS; i++) {
    XPTI_SCOPED_NOTIFY(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, (uint64_t)i, NULL);
  }
  /* a tool of this thread's own, appearing while the others notify */
  snprintf(name, sizeof name, "tool%d", t);
  uint16_t type = xptiRegisterUserDefinedTracePoint(name, XPTI_TRACE_POINT_BEGIN(5));
  for (int i = 0; i < TOOL_VISITS; i++)
    xptiNotifySubscribers(stream, type, NULL, ev, (uint64_t)i, NULL);
  return NULL;
}

/* "<digits> <digits>:<digits> threads <type> "work <t>" uid=... | thread=<t>" */
static bool well_formed(const char *line, int *thread, bool *user) {
  const char *p = line;
  int digits = 0;
  while (*p >= '0' && *p <= '9')
    p++, digits++;
  if (!digits || *p++ != ' ')
    return false;
  unsigned pid, tid;
  int t, t2, used = 0;
  char type[64];
  if (sscanf(p, "%u:%u threads %63s \"work %d\"%n", &pid, &tid, type, &t, &used) != 4 || !used)
    return false;
  const char *meta = strstr(p + used, " | thread=");
  if (!meta || sscanf(meta, " | thread=%d", &t2) != 1 || t2 != t || t < 0 || t >= THREADS)
    return false;
  *thread = t;
  char expect_user[32];
  snprintf(expect_user, sizeof expect_user, "tool%d:user5_begin", t);
  *user = strcmp(type, expect_user) == 0;
  return *user || strcmp(type, "task_begin") == 0 || strcmp(type, "task_end") == 0;
}

int main(void) {
  const char *out = getenv("XPTI_TEXT_OUTPUT");
  if (!out || !xptiTraceEnabled()) {
    fprintf(stderr, "needs XPTI_TEXT_OUTPUT and the text collector\n");
    return 1;
  }
  xptiInitialize("threads", 1, 0, "1");
  stream = xptiRegisterStream("threads");
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++)
    pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
  for (int t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);
  xptiFinalize("threads");

  FILE *f = fopen(out, "r");
  if (!f) {
    perror(out);
    return 1;
  }
  int tasks[THREADS] = {0}, users[THREADS] = {0}, bad = 0, other = 0;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    int t;
    bool user;
    if (strstr(line, " xptiTrace"))
      other++;
    else if (well_formed(line, &t, &user))
      (user ? users : tasks)[t]++;
    else if (bad++ < 5)
      fprintf(stderr, "malformed: %s", line);
  }
  fclose(f);
  /* "threads" and Intel's default stream "xpti.framework": init and finish */
  int failures = bad != 0 || other != 4;
  for (int t = 0; t < THREADS; t++)
    if (tasks[t] != 2 * VISITS || users[t] != TOOL_VISITS) {
      fprintf(stderr, "thread %d: %d task lines (want %d), %d tool lines (want %d)\n", t,
              tasks[t], 2 * VISITS, users[t], TOOL_VISITS);
      failures = 1;
    }
  return failures;
}
