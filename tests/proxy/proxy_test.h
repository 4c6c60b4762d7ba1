/* Shared helpers of the proxy tests. */
#ifndef PROXY_TEST_H
#define PROXY_TEST_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Failures go to stdout: stderr belongs to the proxy and is checked by
 * run_case.sh. */
static int ptest_failures;
#define PTEST_CHECK(cond)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                \
      ptest_failures++;                                                                     \
    }                                                                                       \
  } while (0)

static inline int ptest_is_loaded(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!handle)
    return 0;
  dlclose(handle);
  return 1;
}

/* Calls a fake dispatcher has answered; -1 if it is not loaded. */
static inline long ptest_fake_calls(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  unsigned long (*calls)(void) = NULL;
  void *symbol;
  long count = -1;
  if (!handle)
    return -1;
  symbol = dlsym(handle, "fake_dispatcher_calls");
  memcpy(&calls, &symbol, sizeof calls);
  if (calls)
    count = (long)calls();
  dlclose(handle);
  return count;
}

/* How many dlopen references the process holds on a loaded library:
 * each round takes one (RTLD_NOLOAD) and gives two back until the
 * library is gone.  Leaves it unloaded: call last. */
static inline int ptest_drop_references(const char *path) {
  int count = 0;
  void *handle;
  while (count < 1000 && (handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD))) {
    dlclose(handle);
    dlclose(handle);
    count++;
  }
  return count;
}

/* Runs round(arg) `rounds` times, each in a fresh child process (so the
 * proxy loads afresh each time); 0 when every child exited 0. */
static inline int ptest_rounds(int rounds, int (*round)(const char *), const char *arg) {
  int failed = 0;
  for (int n = 0; n < rounds; n++) {
    int status;
    pid_t child;
    fflush(NULL);
    child = fork();
    if (child == 0)
      _exit(round(arg));
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      printf("FAIL: round %d\n", n);
      failed = 1;
    }
  }
  return failed;
}

#endif
