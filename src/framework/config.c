/* The framework's environment, parsed without side effects so that the
 * fuzz targets in tests/fuzz drive exactly the code the dispatcher runs. */
#include <string.h>

#include "internal.h"

int config_trace_enable(const char *value) {
  if (!value || !strcmp(value, "1") || !strcmp(value, "true"))
    return 1;
  if (!strcmp(value, "0") || !strcmp(value, "false"))
    return 0;
  return -1;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* Splits in place: commas end items, blanks around an item are dropped,
 * empty items skipped.  Returns the number of items given to fn. */
size_t config_each_item(char *list, void (*fn)(char *item, void *ctx), void *ctx) {
  size_t n = 0;
  char *p = list;
  while (p && *p) {
    char *comma = strchr(p, ',');
    char *next = comma ? comma + 1 : NULL;
    char *end = comma ? comma : p + strlen(p);
    while (p < end && is_blank(*p))
      p++;
    while (end > p && is_blank(end[-1]))
      end--;
    if (end > p) {
      *end = '\0';
      fn(p, ctx);
      n++;
    }
    p = next;
  }
  return n;
}
