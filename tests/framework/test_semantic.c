/* The document's semantic tests: strings, trace points, notifications. */
#include <string.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

#define N 1000
static uint64_t seen[64][16]; /* [trace point][visit] counts */
static int tp_index_of(const xpti_trace_event_data_t *e);
static xpti_trace_event_data_t *events[30];

static void count_cb(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e,
                     uint64_t instance, const void *u) {
  (void)t, (void)p, (void)u;
  int i = tp_index_of(e);
  if (i >= 0 && instance < 16)
    seen[i][instance]++;
}
static int tp_index_of(const xpti_trace_event_data_t *e) {
  for (int i = 0; i < 30; i++)
    if (events[i] == e)
      return i;
  return -1;
}

int main(void) {
  xptiForceSetTraceEnabled(true);
  /* 1. string table: insert, lookup, duplicate */
  uint32_t ids[N];
  char buf[64];
  for (int i = 0; i < N; i++) {
    snprintf(buf, sizeof buf, "string-%d", i);
    char *copy;
    ids[i] = xptiRegisterString(buf, &copy);
    CHECK(ids[i] != XPTI_INVALID_STRING_ID && !strcmp(copy, buf));
  }
  for (int i = 0; i < N; i++) {
    snprintf(buf, sizeof buf, "string-%d", i);
    CHECK(!strcmp(xptiLookupString(ids[i]), buf));
    char *copy;
    CHECK_EQ(xptiRegisterString(buf, &copy), ids[i]);
    for (int j = 0; j < i; j += 97)
      CHECK(ids[i] != ids[j]);
  }

  /* 2. trace points: create, lookup, duplicate, payload */
  uint64_t uids[N];
  for (int i = 0; i < N; i++) {
    snprintf(buf, sizeof buf, "tp-%d", i);
    xpti_payload_t p = xpti_payload_make(buf, "semantic.c", (uint32_t)i, 0, NULL);
    uint64_t inst;
    xpti_trace_event_data_t *e = xptiMakeEvent(buf, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst);
    CHECK(e != NULL);
    CHECK_EQ(inst, 1);
    uids[i] = e->unique_id;
  }
  for (int i = 0; i < N; i++) {
    snprintf(buf, sizeof buf, "tp-%d", i);
    const xpti_trace_event_data_t *e = xptiFindEvent(uids[i]);
    CHECK(e && e->unique_id == uids[i]);
    xpti_payload_t p = xpti_payload_make(buf, "semantic.c", (uint32_t)i, 0, NULL);
    uint64_t inst;
    CHECK(xptiMakeEvent(buf, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst) == e);
    CHECK_EQ(inst, 2);
    const xpti_payload_t *q = xptiQueryPayloadByUID(uids[i]);
    CHECK(q && !strcmp(q->name, buf) && q->line_no == (uint32_t)i);
    if (i)
      CHECK(uids[i] != uids[i - 1]);
  }

  /* 3. notifications: 30 trace points, visit k gets instance k, each
   * callback count exact */
  uint8_t s = xptiRegisterStream("semantic");
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, count_cb), XPTI_RESULT_SUCCESS);
  for (int i = 0; i < 30; i++) {
    snprintf(buf, sizeof buf, "notify-%d", i);
    for (int visit = 1; visit <= 1 + i % 10; visit++) {
      xpti_payload_t p = xpti_payload_make(buf, "semantic.c", 1000, 0, NULL);
      uint64_t inst;
      events[i] = xptiMakeEvent(buf, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst);
      CHECK_EQ(inst, visit);
      CHECK_EQ(xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, events[i], inst, NULL),
               XPTI_RESULT_SUCCESS);
    }
  }
  for (int i = 0; i < 30; i++)
    for (int visit = 1; visit < 16; visit++)
      CHECK_EQ(seen[i][visit], visit <= 1 + i % 10 ? 1 : 0);
  return CHECK_DONE();
}
