/* Concurrent first calls: 16 threads, released together by a barrier,
 * each make their first xpti call at once, each a different function.
 * Every round runs in a fresh child process so the proxy starts
 * unloaded every time.  Usage:
 *   proxy_concurrent fake <dispatcher> <rounds>  all forwarded, loaded once
 *   proxy_concurrent off  <dispatcher> <rounds>  all defaults, not loaded */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api_cases.h"
#include "proxy_test.h"

#define THREADS 16

static pthread_barrier_t start_line;
static int expect_forwarded;

static void *racer(void *arg) {
  const apc_case *c = &apc_cases[(size_t)arg % APC_NCASES];
  pthread_barrier_wait(&start_line);
  return (void *)(size_t)(expect_forwarded ? c->call_is_forwarded() : c->call_is_default());
}

static int one_round(const char *dispatcher) {
  pthread_t threads[THREADS];
  pthread_barrier_init(&start_line, NULL, THREADS);
  for (size_t i = 0; i < THREADS; i++)
    if (pthread_create(&threads[i], NULL, racer, (void *)i) != 0) {
      printf("FAIL: pthread_create\n");
      return 1;
    }
  for (size_t i = 0; i < THREADS; i++) {
    void *ok;
    pthread_join(threads[i], &ok);
    if (!ok) {
      printf("FAIL: thread %zu (%s): wrong result\n", i, apc_cases[i % APC_NCASES].name);
      ptest_failures++;
    }
  }
  pthread_barrier_destroy(&start_line);
  if (expect_forwarded) {
    PTEST_CHECK(ptest_fake_calls(dispatcher) == THREADS);
    PTEST_CHECK(ptest_drop_references(dispatcher) == 1);
  } else {
    PTEST_CHECK(!ptest_is_loaded(dispatcher));
  }
  return ptest_failures != 0;
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "fake") != 0 && strcmp(argv[1], "off") != 0)) {
    printf("usage: %s fake|off <dispatcher> <rounds>\n", argv[0]);
    return 2;
  }
  expect_forwarded = strcmp(argv[1], "fake") == 0;
  return ptest_rounds(atoi(argv[3]), one_round, argv[2]) ? EXIT_FAILURE : EXIT_SUCCESS;
}
