/* Generated from src/api.def: every API function called with all-zero
 * arguments, and checks of what it returned.  The fake dispatchers
 * answer every call with a value whose bytes are all 0x01, which differs
 * from every documented "off" default. */
#ifndef PROXY_TEST_API_CASES_H
#define PROXY_TEST_API_CASES_H

#include <string.h>

#include "xpti/xpti_trace_framework.h"

/* Argument count of a parenthesised name list; "()" counts 0 (GNU ##). */
#define APC_COUNT_(_0, _1, _2, _3, _4, _5, _6, _7, _8, n, ...) n
#define APC_COUNT(...) APC_COUNT_(_, ##__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define APC_ZEROS_0
#define APC_ZEROS_1 0
#define APC_ZEROS_2 0, 0
#define APC_ZEROS_3 0, 0, 0
#define APC_ZEROS_4 0, 0, 0, 0
#define APC_ZEROS_5 0, 0, 0, 0, 0
#define APC_ZEROS_6 0, 0, 0, 0, 0, 0
#define APC_ZEROS_7 0, 0, 0, 0, 0, 0, 0
#define APC_ZEROS_8 0, 0, 0, 0, 0, 0, 0, 0
#define APC_CAT_(a, b) a##b
#define APC_CAT(a, b) APC_CAT_(a, b)
/* name APC_ZERO_ARGS (a, b, c)  ->  name (0, 0, 0) */
#define APC_ZERO_ARGS(...) (APC_CAT(APC_ZEROS_, APC_COUNT(__VA_ARGS__)))

#define APC_FORWARDED_BYTE 0x01

static inline int apc_equal_bytes(const void *a, const void *b, size_t size) {
  return memcmp(a, b, size) == 0;
}
/* Field by field: the struct's padding is indeterminate. */
static inline int apc_equal_object(const void *a, const void *b, size_t size) {
  const xpti_object_data_t *x = a, *y = b;
  (void)size;
  return x->size == y->size && x->data == y->data && x->type == y->type;
}
#define APC_EQUAL(x, y)                                                                     \
  _Generic((x), xpti_object_data_t: apc_equal_object, default: apc_equal_bytes)(           \
      &(x), &(y), sizeof(x))

typedef struct apc_case {
  const char *name;
  /* Each makes one call; 1 when the result is the documented default /
   * the fake dispatcher's answer (void functions: always 1). */
  int (*call_is_default)(void);
  int (*call_is_forwarded)(void);
} apc_case;

#define XPTI_API(ret, name, params, args, off)                                              \
  static int apc_default_##name(void) {                                                     \
    ret result = name APC_ZERO_ARGS args;                                                   \
    ret expected = off;                                                                     \
    return APC_EQUAL(result, expected);                                                     \
  }                                                                                         \
  static int apc_forwarded_##name(void) {                                                   \
    ret result = name APC_ZERO_ARGS args;                                                   \
    ret expected;                                                                           \
    memset(&expected, APC_FORWARDED_BYTE, sizeof expected);                                 \
    return APC_EQUAL(result, expected);                                                     \
  }
#define XPTI_API_VOID(name, params, args)                                                   \
  static int apc_default_##name(void) {                                                     \
    name APC_ZERO_ARGS args;                                                                \
    return 1;                                                                               \
  }                                                                                         \
  static int apc_forwarded_##name(void) {                                                   \
    name APC_ZERO_ARGS args;                                                                \
    return 1;                                                                               \
  }
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID

static const apc_case apc_cases[] __attribute__((unused)) = {
#define XPTI_API(ret, name, params, args, off) {#name, apc_default_##name, apc_forwarded_##name},
#define XPTI_API_VOID(name, params, args) {#name, apc_default_##name, apc_forwarded_##name},
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID
};
#define APC_NCASES (sizeof apc_cases / sizeof apc_cases[0])

#endif
