/* A subscriber whose constructor calls the API while XPTI_SUBSCRIBERS is
 * being loaded (issue 8, row 6).  It records what each call answered; the
 * program reads the record through dlsym and checks it is the default,
 * and that the subscriber still works once loading is done. */
#include <stdatomic.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

typedef struct reentrant_record {
  int ctor_ran;
  int framework_initialize, initialize, framework_finalize;
  int trace_enabled, check_enabled;
  int stream_id; /* registered from the constructor */
  int callback, string_ok, event_ok;
} reentrant_record_t;

XPTI_CALLBACK_API reentrant_record_t reentrant_record;
XPTI_CALLBACK_API atomic_uint reentrant_inits, reentrant_hits;

static void count(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e, uint64_t i,
                  const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  atomic_fetch_add(&reentrant_hits, 1);
}

__attribute__((constructor)) static void reentrant_ctor(void) {
  reentrant_record_t *r = &reentrant_record;
  r->framework_initialize = (int)xptiFrameworkInitialize();
  r->initialize = (int)xptiInitialize("reentrant.ctor", 1, 0, "1.0");
  xptiFinalize("reentrant.ctor");
  r->framework_finalize = (int)xptiFrameworkFinalize();
  r->trace_enabled = xptiTraceEnabled();
  uint8_t s = xptiRegisterStream("reentrant.ctor");
  r->stream_id = s;
  r->check_enabled = xptiCheckTraceEnabled(s, XPTI_TRACE_TASK_BEGIN);
  r->callback = (int)xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, count);
  char *copy;
  r->string_ok = xptiRegisterString("reentrant.string", &copy) != XPTI_INVALID_STRING_ID;
  xpti_payload_t p = xpti_payload_make("reentrant", "reentrant.c", 1, 1, NULL);
  r->event_ok = xptiMakeEvent("reentrant", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE,
                              NULL) != NULL;
  r->ctor_ran = 1;
}

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  (void)major, (void)minor, (void)version;
  atomic_fetch_add(&reentrant_inits, 1);
  xptiRegisterCallback(xptiRegisterStream(stream), XPTI_TRACE_TASK_BEGIN, count);
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) { (void)stream; }
