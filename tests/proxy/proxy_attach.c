/* One attach case of the proxy.  Usage:
 *   proxy_attach off [dispatcher]   every stub returns its default; the
 *                                   dispatcher, if named, is not loaded
 *   proxy_attach fake <dispatcher>  every stub forwards to the fake
 *                                   dispatcher, which was loaded once
 *   proxy_attach intel48 <dispatcher>  a fake with Intel's 48 only: they
 *                                   forward, xptrace's extras default
 * run_case.sh sets the environment and checks stderr. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api_cases.h"
#include "proxy_test.h"

static void check_off(const char *dispatcher) {
  for (size_t i = 0; i < APC_NCASES; i++)
    if (!apc_cases[i].call_is_default()) {
      printf("FAIL: %s did not return its default\n", apc_cases[i].name);
      ptest_failures++;
    }
  /* The documented values, written out rather than taken from api.def. */
  PTEST_CHECK(!xptiTraceEnabled());
  PTEST_CHECK(!xptiCheckTraceEnabled(0, 0));
  PTEST_CHECK(xptiInitialize("s", 1, 0, "1.0") == XPTI_RESULT_FAIL);
  PTEST_CHECK(xptiRegisterStream("s") == 0xff);
  PTEST_CHECK(xptiRegisterString("s", NULL) == 0xffffffffu);
  PTEST_CHECK(xptiLookupString(0) == NULL);
  PTEST_CHECK(xptiRegisterObject("s", 1, 0) == -1);
  PTEST_CHECK(xptiLookupObject(0).data == NULL && xptiLookupObject(0).size == 0);
  PTEST_CHECK(xptiGetUniqueId() == 0);
  PTEST_CHECK(xptiRegisterUserDefinedTracePoint("tool", 1) == 0);
  PTEST_CHECK(xptiNotifySubscribers(0, XPTI_TRACE_TASK_BEGIN, NULL, NULL, 0, NULL) ==
              XPTI_RESULT_FAIL);
  /* A retry meets the same environment: still off, no second message. */
  PTEST_CHECK(!xptiTraceTryToEnable());
  if (dispatcher)
    PTEST_CHECK(!ptest_is_loaded(dispatcher));
}

static void check_fake(const char *dispatcher) {
  for (size_t i = 0; i < APC_NCASES; i++)
    if (!apc_cases[i].call_is_forwarded()) {
      printf("FAIL: %s was not forwarded\n", apc_cases[i].name);
      ptest_failures++;
    }
  PTEST_CHECK(ptest_fake_calls(dispatcher) == (long)APC_NCASES);
  PTEST_CHECK(xptiTraceTryToEnable()); /* the fake's xptiTraceEnabled: true */
  PTEST_CHECK(ptest_fake_calls(dispatcher) == (long)APC_NCASES + 1);
  /* A forked child keeps forwarding. */
  {
    int status = -1;
    pid_t child;
    fflush(NULL);
    child = fork();
    if (child == 0)
      _exit(xptiTraceEnabled() && apc_cases[0].call_is_forwarded() ? 0 : 1);
    PTEST_CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0);
  }
  PTEST_CHECK(ptest_drop_references(dispatcher) == 1);
}

/* xptrace's extensions, written out: what the proxy must not require. */
static const char *const extras[] = {
    "xptiRegisterStreamCallback", "xptiUnregisterStreamCallback", "xptiLookupStreamName",
    "xptiLookupToolName",         "xptiLookupMetadata",           "xptiMetadataCount",
    "xptiMetadataAt"};
enum { NEXTRAS = sizeof extras / sizeof *extras };

static int is_extra(const char *name) {
  for (size_t i = 0; i < NEXTRAS; i++)
    if (strcmp(name, extras[i]) == 0)
      return 1;
  return 0;
}

/* A dispatcher with Intel's 48 only: loaded; those forward, the extras
 * answer their defaults without reaching it. */
static void check_intel48(const char *dispatcher) {
  size_t found = 0;
  for (size_t i = 0; i < APC_NCASES; i++) {
    int extra = is_extra(apc_cases[i].name);
    found += (size_t)extra;
    if (extra ? !apc_cases[i].call_is_default() : !apc_cases[i].call_is_forwarded()) {
      printf("FAIL: %s %s\n", apc_cases[i].name,
             extra ? "did not return its default" : "was not forwarded");
      ptest_failures++;
    }
  }
  PTEST_CHECK(found == NEXTRAS);
  PTEST_CHECK(APC_NCASES - NEXTRAS == 48);
  PTEST_CHECK(ptest_fake_calls(dispatcher) == (long)(APC_NCASES - NEXTRAS));
  PTEST_CHECK(xptiTraceEnabled());
  PTEST_CHECK(ptest_drop_references(dispatcher) == 1);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "off") == 0)
    check_off(argc >= 3 ? argv[2] : NULL);
  else if (argc >= 3 && strcmp(argv[1], "fake") == 0)
    check_fake(argv[2]);
  else if (argc >= 3 && strcmp(argv[1], "intel48") == 0)
    check_intel48(argv[2]);
  else {
    printf("usage: %s off [dispatcher] | fake|intel48 <dispatcher>\n", argv[0]);
    return 2;
  }
  return ptest_failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
