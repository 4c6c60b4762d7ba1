/* test_reentrant SUBSCRIBER: the framework under a subscriber that calls
 * it back from its constructor's thread, its init and its finish
 * (reentrant_subscriber.c): no deadlock, no recursion, each callback
 * once per initialize / finalize. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

int main(int argc, char **argv) {
  CHECK(argc == 2);
  CHECK(xptiInitialize("reentrant.test", 1, 0, "1.0") == XPTI_RESULT_SUCCESS);
  void *sub = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  CHECK(sub != NULL);
  if (!sub)
    return CHECK_DONE();
  _Atomic int *inits = dlsym(sub, "reentrant_inits");
  _Atomic int *finishes = dlsym(sub, "reentrant_finishes");
  _Atomic int *ran = dlsym(sub, "reentrant_thread_ran");
  CHECK(inits && finishes && ran);
  if (!inits || !finishes || !ran)
    return CHECK_DONE();
  CHECK(atomic_load(ran) == 1);
  int after_init = atomic_load(inits);
  CHECK(after_init >= 1 && after_init <= 2); /* the default stream announced too */
  xptiFinalize("reentrant.test");
  CHECK(atomic_load(finishes) >= 1 && atomic_load(finishes) <= 2);
  int f = atomic_load(finishes);
  xptiFinalize("reentrant.test");
  CHECK(atomic_load(finishes) == f + 1);
  dlclose(sub);
  if (!check_failures)
    puts("test_reentrant: ok");
  return CHECK_DONE();
}
