/* Random sequences of API calls against the dispatcher (compiled in, so
 * libFuzzer sees its branches): strings, objects, trace points,
 * metadata, streams, callbacks and notification.  Every answer is
 * checked against what the sequence itself registered.  No xptiReset
 * between inputs: it keeps what it retires, so memory would grow with
 * the number of runs rather than with distinct content. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

typedef struct input {
  const uint8_t *p;
  size_t n;
} input_t;

static uint8_t take(input_t *in) {
  if (!in->n)
    return 0;
  in->n--;
  return *in->p++;
}

/* A NUL-terminated string of up to 31 input bytes (NULs end it early). */
static void take_string(input_t *in, char out[32]) {
  size_t len = take(in) % 32;
  size_t i = 0;
  for (; i < len && in->n; i++)
    out[i] = (char)take(in);
  out[i] = '\0';
}

static uint64_t delivered;
static void count(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e, uint64_t i,
                  const void *u) {
  (void)t, (void)p, (void)i, (void)u;
  if (e && xptiFindEvent(e->unique_id) != e)
    abort(); /* only events the framework made are notified here */
  delivered++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  char a[32] = "", b[32] = "";
  xpti_trace_event_data_t *event = NULL;
  int32_t object = XPTI_INVALID_OBJECT_ID;
  uint32_t string = XPTI_INVALID_STRING_ID;
  uint8_t stream = XPTI_INVALID_STREAM_ID;
  xptiForceSetTraceEnabled(true);
  while (in.n) {
    switch (take(&in) % 11) {
    case 0: {
      take_string(&in, a);
      char *copy = NULL;
      string = xptiRegisterString(a, &copy);
      if (string == XPTI_INVALID_STRING_ID || !copy || strcmp(copy, a) ||
          xptiLookupString(string) != copy)
        abort();
      break;
    }
    case 1:
      (void)xptiLookupString(take(&in));
      break;
    case 2: {
      take_string(&in, a);
      object = xptiRegisterObject(a, strlen(a), take(&in));
      xpti_object_data_t o = xptiLookupObject(object);
      if (object < 0 || o.size != strlen(a) || memcmp(o.data, a, o.size))
        abort();
      break;
    }
    case 3:
      (void)xptiLookupObject((int32_t)take(&in) - 8);
      break;
    case 4: {
      take_string(&in, a);
      take_string(&in, b);
      uint32_t line = take(&in) % 4, column = take(&in) % 3;
      xpti_payload_t p = xpti_payload_make(*a ? a : NULL, *b ? b : NULL, line, column,
                                           (void *)(uintptr_t)(take(&in) % 3));
      uint64_t instance = 0;
      xpti_trace_event_data_t *e =
          xptiMakeEvent(NULL, &p, take(&in) % 4, XPTI_ACTIVITY_ACTIVE, &instance);
      if (e && (xptiFindEvent(e->unique_id) != e || instance == 0 ||
                xptiQueryPayload(e) != xptiQueryPayloadByUID(e->unique_id)))
        abort();
      if (e)
        event = e;
      break;
    }
    case 5:
      take_string(&in, a);
      if (event && object >= 0) {
        xpti_result_t r = xptiAddMetadata(event, a, object);
        int32_t value = -1;
        if (r == XPTI_RESULT_SUCCESS &&
            (xptiLookupMetadata(event, a, &value) != XPTI_RESULT_SUCCESS || value != object))
          abort();
      }
      break;
    case 6:
      if (event) {
        uint32_t n = xptiMetadataCount(event), key;
        int32_t value;
        for (uint32_t i = 0; i < n; i++)
          if (xptiMetadataAt(event, i, &key, &value) != XPTI_RESULT_SUCCESS ||
              !xptiLookupString(key))
            abort();
      }
      break;
    case 7: {
      uint16_t type = (uint16_t)(take(&in) << 8 | take(&in));
      uint64_t before = delivered;
      xpti_result_t r = xptiNotifySubscribers(stream, type, NULL, event, 0, event ? NULL : a);
      if (r == XPTI_RESULT_SUCCESS && type && xptiCheckTraceEnabled(stream, type) && event &&
          delivered == before)
        abort(); /* enabled, yet nobody was called */
      break;
    }
    case 8:
      take_string(&in, a);
      stream = xptiRegisterStream(a);
      if (stream != XPTI_INVALID_STREAM_ID) {
        uint16_t type = (uint16_t)(take(&in) | 1);
        if (take(&in) & 1)
          xptiRegisterCallback(stream, type, count);
        else
          xptiUnregisterCallback(stream, type, count);
      }
      break;
    case 9:
      (void)xptiFindEvent(take(&in));
      (void)xptiQueryPayloadByUID(take(&in));
      break;
    case 10:
      take_string(&in, a);
      (void)xptiRegisterUserDefinedTracePoint(a, take(&in));
      (void)xptiLookupToolName(take(&in));
      break;
    }
  }
  (void)string;
  return 0;
}
