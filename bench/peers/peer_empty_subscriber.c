/* A subscriber whose callbacks do nothing: the dispatch cost alone. */
#include "xpti/xpti_trace_framework.h"

static void peer_empty_callback(uint16_t trace_type, xpti_trace_event_data_t *parent,
                                xpti_trace_event_data_t *event, uint64_t instance,
                                const void *user_data) {
  (void)trace_type, (void)parent, (void)event, (void)instance, (void)user_data;
  __asm__ volatile("");
}

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream) {
  (void)major, (void)minor, (void)version;
  uint8_t id = xptiRegisterStream(stream);
  xptiRegisterCallback(id, XPTI_TRACE_TASK_BEGIN, peer_empty_callback);
  xptiRegisterCallback(id, XPTI_TRACE_TASK_END, peer_empty_callback);
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) { (void)stream; }
