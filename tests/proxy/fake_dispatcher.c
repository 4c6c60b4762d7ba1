/* A fake dispatcher generated from src/api.def: every API function
 * counts the call and answers with bytes of 0x01.  Defining
 * FAKE_OMIT_<name> as "~, 1" before including this file renames <name>
 * to fake_omitted_<name>, making a dispatcher that lacks one symbol. */
#include <stdatomic.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

static atomic_ulong fake_calls;

/* Number of API calls this dispatcher has answered (found by the tests
 * with dlopen(RTLD_NOLOAD) + dlsym). */
XPTI_EXPORT_API unsigned long fake_dispatcher_calls(void) {
  return atomic_load(&fake_calls);
}

/* FAKE_OMITTED(name) is 1 when FAKE_OMIT_<name> is defined as "~, 1". */
#define FAKE_SECOND_(a, b, ...) b
#define FAKE_SECOND(...) FAKE_SECOND_(__VA_ARGS__)
#define FAKE_OMITTED(name) FAKE_SECOND(FAKE_OMIT_##name, 0, ~)
#define FAKE_CAT_(a, b) a##b
#define FAKE_CAT(a, b) FAKE_CAT_(a, b)
#define FAKE_NAME_0(name) name
#define FAKE_NAME_1(name) fake_omitted_##name
#define FAKE_NAME(name) FAKE_CAT(FAKE_NAME_, FAKE_OMITTED(name))(name)

#define XPTI_API(ret, name, params, args, off)                                              \
  XPTI_EXPORT_API ret FAKE_NAME(name) params {                                                   \
    ret answer;                                                                             \
    atomic_fetch_add(&fake_calls, 1);                                                       \
    memset(&answer, 0x01, sizeof answer);                                                   \
    return answer;                                                                          \
  }
#define XPTI_API_VOID(name, params, args)                                                   \
  XPTI_EXPORT_API void FAKE_NAME(name) params { atomic_fetch_add(&fake_calls, 1); }
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID
