/* The text collector's formatting of what it is given: libxpti_text.so
 * is loaded as a subscriber and notified with random names, files,
 * metadata objects and user data (quoting, hex, object types, type
 * names).  Output goes to /dev/null. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

static uint8_t g_stream;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setenv("XPTI_TEXT_OUTPUT", "/dev/null", 1);
  void *h = dlopen(XPTRACE_TEXT_COLLECTOR, RTLD_NOW | RTLD_LOCAL);
  void *sym = h ? dlsym(h, "xptiTraceInit") : NULL;
  xpti_trace_init_fn_t init;
  if (!sym) {
    fprintf(stderr, "cannot load %s: %s\n", XPTRACE_TEXT_COLLECTOR, dlerror());
    abort();
  }
  memcpy(&init, &sym, sizeof init);
  xptiForceSetTraceEnabled(true);
  init(1, 0, "1.0", "fuzz.text");
  g_stream = xptiRegisterStream("fuzz.text");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4)
    return 0;
  uint16_t type = (uint16_t)(data[0] << 8 | data[1]);
  uint8_t object_type = data[2];
  size_t cut = data[3] % (size - 3); /* name | object bytes */
  const char *rest = (const char *)data + 4;
  size_t rest_len = size - 4;
  if (cut > rest_len)
    cut = rest_len;
  char *name = strndup(rest, cut);
  if (!name)
    return 0;
  xpti_payload_t p = xpti_payload_make(*name ? name : NULL, "fuzz_text.c", 1, 1, NULL);
  xpti_trace_event_data_t *e =
      xptiMakeEvent(NULL, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  int32_t obj = xptiRegisterObject(rest + cut, rest_len - cut, object_type);
  if (e && obj >= 0)
    xptiAddMetadata(e, "k", obj);
  /* User data is whatever the type says it is: a name only for function
   * begin/end (a timed slice or function_with_args points at a struct). */
  bool named = type == XPTI_TRACE_FUNCTION_BEGIN || type == XPTI_TRACE_FUNCTION_END;
  xptiNotifySubscribers(g_stream, type, NULL, e, 1, named ? name : NULL);
  xptiNotifySubscribers(g_stream, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, 2, name);
  free(name);
  return 0;
}
