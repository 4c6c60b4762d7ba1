/* xptrace function hooks — settings and their parsers.  Header-only so
 * that libxptrace_functions.so and `xptrace run --functions` accept
 * exactly the same spellings (the command refuses what the library would
 * ignore). */
#ifndef XPTRACE_FN_CONFIG_H
#define XPTRACE_FN_CONFIG_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FN_MAX_DEPTH 4096u /* frames tracked per thread (memory bound) */

/* --depth N: 1 to FN_MAX_DEPTH. */
static inline bool fn_parse_depth(const char *text, unsigned *depth) {
  if (!text || !*text || strlen(text) > 5)
    return false;
  unsigned v = 0;
  for (const char *p = text; *p; ++p) {
    if (*p < '0' || *p > '9')
      return false;
    v = v * 10 + (unsigned)(*p - '0');
  }
  if (v == 0 || v > FN_MAX_DEPTH)
    return false;
  *depth = v;
  return true;
}

/* --min-duration: an integer with a unit ns, us, ms or s ("10us"). */
static inline bool fn_parse_duration(const char *text, uint64_t *ns) {
  if (!text || !*text || strlen(text) > 16)
    return false;
  uint64_t v = 0;
  const char *p = text;
  for (; *p >= '0' && *p <= '9'; ++p)
    v = v * 10 + (uint64_t)(*p - '0');
  if (p == text)
    return false;
  uint64_t scale;
  if (strcmp(p, "ns") == 0)
    scale = 1;
  else if (strcmp(p, "us") == 0)
    scale = 1000;
  else if (strcmp(p, "ms") == 0)
    scale = 1000000;
  else if (strcmp(p, "s") == 0)
    scale = 1000000000;
  else
    return false;
  if (v > UINT64_MAX / scale / 2)
    return false;
  *ns = v * scale;
  return true;
}

/* A selection or exclusion regex: POSIX extended, searched in the
 * (demangled) name as uftrace and omnitrace do (`^`, `$` anchor it).
 * Returns false when it does not compile. */
static inline bool fn_regex_compile(const char *text, regex_t *re) {
  if (!text || strlen(text) >= 4096)
    return false;
  return regcomp(re, text, REG_EXTENDED | REG_NOSUB) == 0;
}

#endif /* XPTRACE_FN_CONFIG_H */
