/* xptrace common — environment and size parsing (see xpt_env.h). */
#include "xpt_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool xpt_parse_size(const char *text, uint64_t *value) {
  if (!text || *text < '0' || *text > '9')
    return false;
  uint64_t n = 0;
  const char *p = text;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (n > (UINT64_MAX - 9) / 10)
      return false;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  unsigned shift = 0;
  switch (*p) {
  case '\0':
    break;
  case 'k': case 'K': shift = 10; ++p; break;
  case 'm': case 'M': shift = 20; ++p; break;
  case 'g': case 'G': shift = 30; ++p; break;
  case 't': case 'T': shift = 40; ++p; break;
  default:
    return false;
  }
  if (shift && *p) {
    if (strcmp(p, "B") == 0 || strcmp(p, "b") == 0 || strcmp(p, "iB") == 0)
      p += strlen(p);
    else
      return false;
  }
  if (*p)
    return false;
  if (n > (UINT64_C(1) << 63) >> shift)
    return false;
  *value = n << shift;
  return true;
}

const char *xpt_size_text(uint64_t size, char *buf, unsigned len) {
  static const char units[] = "GMK";
  for (int i = 0; i < 3; ++i) {
    unsigned shift = 30u - 10u * (unsigned)i;
    if (size && (size & ((UINT64_C(1) << shift) - 1)) == 0) {
      snprintf(buf, len, "%llu%c", (unsigned long long)(size >> shift), units[i]);
      return buf;
    }
  }
  snprintf(buf, len, "%llu", (unsigned long long)size);
  return buf;
}

uint64_t xpt_env_size(const char *name, uint64_t default_value) {
  const char *text = getenv(name);
  if (!text || !*text)
    return default_value;
  uint64_t value;
  if (xpt_parse_size(text, &value))
    return value;
  char key[96];
  snprintf(key, sizeof key, "env-size:%s", name);
  xpt_msg_once(key, "xpti: %s='%s' is not a size; using %llu", name, text,
               (unsigned long long)default_value);
  return default_value;
}

uint64_t xpt_env_buffer_size(void) {
  const char *text = getenv("XPTRACE_BUFFER_SIZE");
  if (!text || !*text)
    return XPT_BUFFER_DEFAULT;
  char def[24], min[24];
  xpt_size_text(XPT_BUFFER_DEFAULT, def, sizeof def);
  uint64_t value;
  if (!xpt_parse_size(text, &value)) {
    xpt_msg_once("env-buffer-size", "xpti: XPTRACE_BUFFER_SIZE='%s' is not a size; using %s",
                 text, def);
    return XPT_BUFFER_DEFAULT;
  }
  if (value < XPT_BUFFER_MIN) {
    xpt_msg_once("env-buffer-size",
                 "xpti: XPTRACE_BUFFER_SIZE='%s' is below the minimum of %s; using %s", text,
                 xpt_size_text(XPT_BUFFER_MIN, min, sizeof min), def);
    return XPT_BUFFER_DEFAULT;
  }
  if (value > XPT_BUFFER_MAX) {
    xpt_msg_once("env-buffer-size",
                 "xpti: XPTRACE_BUFFER_SIZE='%s' is above the maximum of %s; using %s", text,
                 xpt_size_text(XPT_BUFFER_MAX, min, sizeof min), def);
    return XPT_BUFFER_DEFAULT;
  }
  return value;
}
