/* The sampler's settings parsers (src/sampler/sampler_config.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  double hz;
  unsigned depth;
  bool on[SAMPLER_NCLOCKS];
  sampler_period_t periods[SAMPLER_MAX_PERIODS];
  size_t count = 0;
  char bad[64];
  if (sampler_parse_freq(text, &hz) && !(hz > 0 && hz <= SAMPLER_MAX_FREQ))
    abort();
  if (sampler_parse_depth(text, &depth) && depth > SAMPLER_MAX_DEPTH)
    abort();
  (void)sampler_parse_clock(text, on);
  if (sampler_parse_periods(text, periods, &count, bad, sizeof bad) &&
      (count == 0 || count > SAMPLER_MAX_PERIODS))
    abort();
  double d;
  (void)sampler_parse_decimal(text, size, &d);
  free(text);
  return 0;
}
