/* xptrace sampler — settings and their parsers.  Header-only so that the
 * sampler library and the `xptrace sample` command accept exactly the
 * same spellings (the command refuses what the library would ignore). */
#ifndef XPTRACE_SAMPLER_CONFIG_H
#define XPTRACE_SAMPLER_CONFIG_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLER_DEFAULT_FREQ 100.0
#define SAMPLER_MAX_FREQ 100000.0
#define SAMPLER_DEFAULT_DEPTH 256u
#define SAMPLER_MAX_DEPTH 512u
#define SAMPLER_MAX_PERIODS 32u

enum sampler_clock { SAMPLER_CPUTIME = 0, SAMPLER_REALTIME = 1, SAMPLER_NCLOCKS = 2 };

/* The clock a capture window is measured on. */
enum sampler_period_clock {
  SAMPLER_PERIOD_REALTIME,        /* wall time (CLOCK_MONOTONIC) */
  SAMPLER_PERIOD_CPUTIME,         /* CPU time of the main thread */
  SAMPLER_PERIOD_PROCESS_CPUTIME, /* CPU time of the whole process */
};

/* clock:delay:duration:cycles — `cycles` times (0: forever) wait `delay`
 * seconds without sampling, then sample for `duration` seconds. */
typedef struct sampler_period {
  enum sampler_period_clock clock;
  double delay;
  double duration;
  uint64_t cycles;
} sampler_period_t;

/* A decimal number of seconds, Hz, ...: digits with an optional fraction,
 * nothing else (no sign, exponent, hex, inf or nan). */
static inline bool sampler_parse_decimal(const char *text, size_t len, double *value) {
  if (!text || len == 0 || len >= 64)
    return false;
  bool digits = false, dot = false;
  for (size_t i = 0; i < len; ++i) {
    if (text[i] >= '0' && text[i] <= '9')
      digits = true;
    else if (text[i] == '.' && !dot)
      dot = true;
    else
      return false;
  }
  if (!digits)
    return false;
  char copy[64];
  memcpy(copy, text, len);
  copy[len] = '\0';
  *value = strtod(copy, NULL);
  return isfinite(*value);
}

static inline bool sampler_parse_freq(const char *text, double *hz) {
  double v;
  if (!text || !sampler_parse_decimal(text, strlen(text), &v) || v <= 0 || v > SAMPLER_MAX_FREQ)
    return false;
  *hz = v;
  return true;
}

static inline bool sampler_parse_depth(const char *text, unsigned *depth) {
  if (!text || !*text || strlen(text) > 6)
    return false;
  unsigned v = 0;
  for (const char *p = text; *p; ++p) {
    if (*p < '0' || *p > '9')
      return false;
    v = v * 10 + (unsigned)(*p - '0');
  }
  if (v == 0 || v > SAMPLER_MAX_DEPTH)
    return false;
  *depth = v;
  return true;
}

/* cputime | realtime | both. */
static inline bool sampler_parse_clock(const char *text, bool on[SAMPLER_NCLOCKS]) {
  if (!text)
    return false;
  if (strcmp(text, "cputime") == 0) {
    on[SAMPLER_CPUTIME] = true, on[SAMPLER_REALTIME] = false;
  } else if (strcmp(text, "realtime") == 0) {
    on[SAMPLER_CPUTIME] = false, on[SAMPLER_REALTIME] = true;
  } else if (strcmp(text, "both") == 0) {
    on[SAMPLER_CPUTIME] = on[SAMPLER_REALTIME] = true;
  } else {
    return false;
  }
  return true;
}

/* One spec: clock:delay:duration:cycles, or delay:duration:cycles
 * (realtime).  `len` bytes of `text`. */
static inline bool sampler_parse_period(const char *text, size_t len, sampler_period_t *p) {
  const char *field[4];
  size_t flen[4];
  size_t n = 0;
  const char *start = text, *end = text + len;
  for (const char *c = text; c <= end; ++c) {
    if (c == end || *c == ':') {
      if (n == 4)
        return false;
      field[n] = start;
      flen[n] = (size_t)(c - start);
      ++n;
      start = c + 1;
    }
  }
  if (n != 3 && n != 4)
    return false;
  size_t first = 0;
  p->clock = SAMPLER_PERIOD_REALTIME;
  if (n == 4) {
    first = 1;
    if (flen[0] == 8 && memcmp(field[0], "realtime", 8) == 0)
      p->clock = SAMPLER_PERIOD_REALTIME;
    else if (flen[0] == 7 && memcmp(field[0], "cputime", 7) == 0)
      p->clock = SAMPLER_PERIOD_CPUTIME;
    else if (flen[0] == 15 && memcmp(field[0], "process_cputime", 15) == 0)
      p->clock = SAMPLER_PERIOD_PROCESS_CPUTIME;
    else
      return false;
  }
  double cycles;
  if (!sampler_parse_decimal(field[first], flen[first], &p->delay) ||
      !sampler_parse_decimal(field[first + 1], flen[first + 1], &p->duration) ||
      p->duration <= 0 || p->delay > 1e9 || p->duration > 1e9)
    return false;
  /* Cycles: a whole number. */
  if (memchr(field[first + 2], '.', flen[first + 2]) ||
      !sampler_parse_decimal(field[first + 2], flen[first + 2], &cycles) || cycles > 1e15)
    return false;
  p->cycles = (uint64_t)cycles;
  return true;
}

/* Space-separated specs, run one after the other.  On failure `bad`
 * (if given) receives the first malformed spec. */
static inline bool sampler_parse_periods(const char *text, sampler_period_t *out, size_t *count,
                                         char *bad, size_t badlen) {
  size_t n = 0;
  const char *p = text;
  if (bad && badlen)
    bad[0] = '\0';
  if (!text)
    return false;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == '\n')
      ++p;
    if (!*p)
      break;
    const char *start = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n')
      ++p;
    size_t len = (size_t)(p - start);
    if (n == SAMPLER_MAX_PERIODS || !sampler_parse_period(start, len, &out[n])) {
      if (bad && badlen)
        snprintf(bad, badlen, "%.*s", (int)len, start);
      return false;
    }
    ++n;
  }
  if (n == 0)
    return false;
  *count = n;
  return true;
}

#endif /* XPTRACE_SAMPLER_CONFIG_H */
