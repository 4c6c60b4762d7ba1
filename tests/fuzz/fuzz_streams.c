/* xpt_stream_selected (src/collectors/common): XPTRACE_STREAMS is read
 * once per process, so the list is fixed here with awkward patterns
 * (blanks, empty items, brackets, one over the 255-byte pattern limit)
 * and the fuzzer drives the stream names matched against it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xpt_collector.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  static char list[1024];
  char *p = list;
  p += sprintf(p, " sycl* ,, [a-z]?x\t,*[!0-9],\\,[,");
  memset(p, 'a', 300);
  p[300] = '\0';
  setenv("XPTRACE_STREAMS", list, 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *name = malloc(size + 1);
  if (!name)
    return 0;
  memcpy(name, data, size);
  name[size] = '\0';
  bool selected = xpt_stream_selected(name);
  if (size >= 4 && !memcmp(name, "sycl", 4) && !memchr(name, '\0', size) && !selected)
    abort(); /* "sycl*" is listed */
  free(name);
  return 0;
}
