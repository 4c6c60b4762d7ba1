/* xptiTraceTryToEnable: start with no environment, then retry with a
 * missing dispatcher, with tracing disabled, and with a good one.
 * Usage: proxy_try_enable <fake dispatcher> <missing path> */
#include <stdlib.h>

#include "api_cases.h"
#include "proxy_test.h"

static int all_default(void) {
  for (size_t i = 0; i < APC_NCASES; i++)
    if (!apc_cases[i].call_is_default())
      return 0;
  return 1;
}

static int all_forwarded(void) {
  for (size_t i = 0; i < APC_NCASES; i++)
    if (!apc_cases[i].call_is_forwarded())
      return 0;
  return 1;
}

int main(int argc, char **argv) {
  const char *fake, *missing;
  if (argc != 3) {
    printf("usage: %s <fake dispatcher> <missing path>\n", argv[0]);
    return 2;
  }
  fake = argv[1];
  missing = argv[2];

  /* No environment: off, silent. */
  PTEST_CHECK(all_default());
  PTEST_CHECK(!xptiTraceTryToEnable());
  PTEST_CHECK(all_default());

  /* A path that does not load: one message, however often retried. */
  setenv("XPTI_FRAMEWORK_DISPATCHER", missing, 1);
  PTEST_CHECK(!xptiTraceTryToEnable());
  PTEST_CHECK(!xptiTraceTryToEnable());
  PTEST_CHECK(all_default());

  /* A good path with tracing disabled: off, silent, not loaded. */
  setenv("XPTI_FRAMEWORK_DISPATCHER", fake, 1);
  setenv("XPTI_TRACE_ENABLE", "false", 1);
  PTEST_CHECK(!xptiTraceTryToEnable());
  PTEST_CHECK(!ptest_is_loaded(fake));
  PTEST_CHECK(all_default());

  /* Enabled: loads, and the stubs forward from now on. */
  unsetenv("XPTI_TRACE_ENABLE");
  PTEST_CHECK(xptiTraceTryToEnable());
  PTEST_CHECK(all_forwarded());
  /* Once loaded, a retry neither reloads nor reads the environment. */
  setenv("XPTI_FRAMEWORK_DISPATCHER", missing, 1);
  PTEST_CHECK(xptiTraceTryToEnable());
  PTEST_CHECK(ptest_fake_calls(fake) == (long)APC_NCASES + 2);
  PTEST_CHECK(ptest_drop_references(fake) == 1);
  return ptest_failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
