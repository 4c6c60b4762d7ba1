/* The framework's XPTI_TRACE_ENABLE and XPTI_SUBSCRIBERS parsing
 * (src/framework/config.c, compiled in).  Items handed out must be
 * non-empty, trimmed, comma-free and fit in the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct seen {
  const char *begin, *end;
  size_t bytes;
} seen_t;

static void check_item(char *item, void *ctx) {
  seen_t *s = ctx;
  size_t n = strlen(item);
  if (item < s->begin || item + n > s->end || n == 0 || strchr(item, ',') ||
      item[0] == ' ' || item[0] == '\t' || item[n - 1] == ' ' || item[n - 1] == '\t')
    abort();
  s->bytes += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  int on = config_trace_enable(text);
  if (on != -1 && on != 0 && on != 1)
    abort();
  size_t len = strlen(text);
  seen_t s = {text, text + len, 0};
  size_t n = config_each_item(text, check_item, &s);
  if (s.bytes > len || n > len)
    abort();
  free(text);
  return 0;
}
