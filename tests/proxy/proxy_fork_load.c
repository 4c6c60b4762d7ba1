/* fork() while another thread's first call loads the dispatcher through
 * the proxy: every child can call the API at once and exits (no lock
 * left held, no lock-order inversion between the proxy's fork handling
 * and the dispatcher's).  Each round is a fresh process, so each round
 * loads again.
 *   proxy_fork_load <rounds>   (XPTI_FRAMEWORK_DISPATCHER names libxptifw.so) */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proxy_test.h"
#include "xpti/xpti_trace_framework.h"

/* gcc 12's ASan and TSan allocators are not fork-safe (a child forked
 * while the loader is inside malloc waits forever): those builds fork
 * after the load, which still records both lock orders for TSan. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FORK_AFTER_LOAD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FORK_AFTER_LOAD 1
#endif
#endif

#define FORKS_PER_ROUND 8

static atomic_int loaded;

static void *loader(void *arg) {
  (void)arg;
  atomic_store(&loaded, xptiTraceEnabled() ? 1 : 2);
  return NULL;
}

/* The child's whole life: the API answers and the process ends. */
static void child_calls(void) {
  alarm(20); /* a hang becomes SIGALRM, seen by the parent */
  (void)xptiTraceEnabled();
  (void)xptiRegisterStream("xptrace.proxy.fork");
  (void)xptiTraceTryToEnable();
  (void)xptiRegisterString("fork-child", NULL);
  _exit(0);
}

static int one_round(const char *unused) {
  (void)unused;
  pthread_t thread;
  pid_t children[FORKS_PER_ROUND];
  int forks = 0, failed = 0;
  if (pthread_create(&thread, NULL, loader, NULL) != 0) {
    printf("FAIL: pthread_create\n");
    return 1;
  }
#ifdef FORK_AFTER_LOAD
  pthread_join(thread, NULL);
#endif
  while (forks < FORKS_PER_ROUND) {
    pid_t child;
    fflush(NULL);
    child = fork();
    if (child == 0)
      child_calls();
    if (child < 0)
      break;
    children[forks++] = child;
  }
#ifndef FORK_AFTER_LOAD
  pthread_join(thread, NULL);
#endif
  for (int i = 0; i < forks; i++) {
    int status;
    if (waitpid(children[i], &status, 0) != children[i] || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      printf("FAIL: child %d: %s %d\n", i, WIFSIGNALED(status) ? "signal" : "status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      failed = 1;
    }
  }
  PTEST_CHECK(forks == FORKS_PER_ROUND);
  PTEST_CHECK(atomic_load(&loaded) == 1); /* the parent traces */
  return failed || ptest_failures;
}

int main(int argc, char **argv) {
  int rounds, failed;
  if (argc != 2) {
    printf("usage: %s <rounds>\n", argv[0]);
    return 2;
  }
  rounds = atoi(argv[1]);
  failed = ptest_rounds(rounds, one_round, NULL);
  if (!failed)
    printf("%d rounds of %d forks each while loading\n", rounds, FORKS_PER_ROUND);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
