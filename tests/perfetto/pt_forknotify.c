/* pt_forknotify CHILDREN THREADS: a fork at any moment.  THREADS threads
 * of the parent loop task begin/end on "busy" while main forks CHILDREN
 * children one after the other; each child records 100 "child" slices on
 * its main thread, then starts two threads that record their first event
 * at the same moment (a barrier) and 50 "child_thread" slices each.
 * Every child's trace must hold exactly 100 + 100 slices: the parent's
 * threads, gone in the child and caught inside a notification at the
 * fork, must leave nothing the child trips on (tests/perfetto/CMakeLists). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xpti/xpti_trace_framework.h"

static uint8_t stream;
static atomic_bool stop, hot; /* hot: around a fork, the threads loop */
static pthread_barrier_t start_together;

static xpti_trace_event_data_t *event_of(const char *name, uint32_t line) {
  xpti_payload_t p = xpti_payload_make(name, "pt_forknotify.c", line, 0, NULL);
  uint64_t instance;
  return xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
}

static void pairs(xpti_trace_event_data_t *e, int n) {
  for (int i = 0; i < n; i++) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, e, 0, NULL);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, e, 0, NULL);
  }
}

static void *busy(void *arg) {
  xpti_trace_event_data_t *e = event_of("busy", (uint32_t)(uintptr_t)arg);
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    if (atomic_load_explicit(&hot, memory_order_relaxed))
      pairs(e, 1);
    else
      usleep(50);
  }
  return NULL;
}

static void *child_thread(void *arg) {
  (void)arg;
  xpti_trace_event_data_t *e = event_of("child_thread", 2);
  pthread_barrier_wait(&start_together);
  pairs(e, 50);
  return NULL;
}

int main(int argc, char **argv) {
  int children = argc > 1 ? atoi(argv[1]) : 10, threads = argc > 2 ? atoi(argv[2]) : 1;
  if (threads < 0 || threads > 16)
    threads = 1;
  xptiInitialize("fork.test", 1, 0, "1.0");
  stream = xptiRegisterStream("fork.test");
  pthread_t t[16];
  for (int i = 0; i < threads; i++)
    pthread_create(&t[i], NULL, busy, (void *)(uintptr_t)(100 + i));
  usleep(10000);
  int bad = 0;
  for (int c = 0; c < children; c++) {
    atomic_store(&hot, true);
    usleep(100 + (unsigned)(rand() % 300)); /* a different moment of the loops each time */
    pid_t pid = fork();
    atomic_store(&hot, false);
    if (pid == 0) {
      pairs(event_of("child", 1), 100);
      pthread_t a, b;
      pthread_barrier_init(&start_together, NULL, 2);
      pthread_create(&a, NULL, child_thread, NULL);
      pthread_create(&b, NULL, child_thread, NULL);
      pthread_join(a, NULL);
      pthread_join(b, NULL);
      exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
      bad++;
  }
  atomic_store(&stop, true);
  for (int i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  printf("pt_forknotify: pid %d, %d children, %d failed\n", (int)getpid(), children, bad);
  return bad != 0;
}
