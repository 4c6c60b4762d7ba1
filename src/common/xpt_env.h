/* xptrace common — environment and size parsing. */
#ifndef XPT_ENV_H
#define XPT_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "xpt_msg.h"

/* Trace buffer sizes: below one 64 KiB chunk every event would be
 * dropped, so smaller sizes are refused. */
#define XPT_BUFFER_MIN (UINT64_C(64) << 10)
#define XPT_BUFFER_DEFAULT (UINT64_C(64) << 20)
/* Larger budgets are mistakes (a typo, a unit too many): refused.  The
 * recorder also bounds a budget by the output's free space. */
#define XPT_BUFFER_MAX (UINT64_C(1) << 40)
/* A recording larger than this is said once while it runs (unless
 * XPTRACE_MAX_SIZE bounds it). */
#define XPT_RECORDING_NOTICE (UINT64_C(1) << 30)

/* Parse a size: decimal digits with an optional K, M, G or T suffix (powers
 * of 1024; "KB"/"KiB" spellings too).  Returns false for anything else,
 * including an empty string, a sign, or a value over 2^63. */
XPT_COMMON_API bool xpt_parse_size(const char *text, uint64_t *value);

/* Size from env var `name`.  Unset or empty: the default.  Malformed:
 * one line per process "xpti: <name>='<v>' is not a size; using <default>"
 * and the default. */
XPT_COMMON_API uint64_t xpt_env_size(const char *name, uint64_t default_value);

/* XPTRACE_BUFFER_SIZE: XPT_BUFFER_DEFAULT when unset; malformed, below
 * XPT_BUFFER_MIN or above XPT_BUFFER_MAX: one line per process
 * ("xpti: XPTRACE_BUFFER_SIZE='1K' is below the minimum of 64K; using
 * 64M") and the default. */
XPT_COMMON_API uint64_t xpt_env_buffer_size(void);

/* "64M", "1536K", "123": the shortest exact spelling of a size. */
XPT_COMMON_API const char *xpt_size_text(uint64_t size, char *buf, unsigned len);

#endif /* XPT_ENV_H */
