/* fork() while other threads register: every child must be able to use
 * the framework at once (no lock left held by a thread that does not
 * exist in the child).  A child that hangs is killed after a deadline and
 * counted as a failure.
 *   test_fork_race [forks] */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

/* gcc 12's ASan and TSan allocators are not fork-safe: a child forked
 * while another thread is inside malloc waits forever on the allocator's
 * lock (gdb: SizeClassAllocator64::GetFromAllocator).  Those builds fork
 * between the workers' calls, never during one, and still check every
 * child's calls and memory; the plain and clang builds fork anywhere. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FORK_BETWEEN_CALLS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FORK_BETWEEN_CALLS 1
#endif
#endif
#ifdef FORK_BETWEEN_CALLS
static pthread_rwlock_t gate;
#define CALLS_BEGIN() pthread_rwlock_rdlock(&gate)
#define CALLS_END() pthread_rwlock_unlock(&gate)
#else
#define CALLS_BEGIN() ((void)0)
#define CALLS_END() ((void)0)
#endif

#define WORKERS 4
#define CHILD_DEADLINE_MS 5000
#define MAX_BAD 3 /* enough to fail; keeps a broken build quick */

static atomic_bool stop;
static atomic_ulong worker_iterations;
static atomic_uint hits;

static void count_cb(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e,
                     uint64_t i, const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
  atomic_fetch_add_explicit(&hits, 1, memory_order_relaxed);
}
static void other_cb(uint16_t t, xpti_trace_event_data_t *p, xpti_trace_event_data_t *e,
                     uint64_t i, const void *u) {
  (void)t, (void)p, (void)e, (void)i, (void)u;
}

/* Every registering call, each taking a framework lock most of the time:
 * bounded distinct names keep memory flat while the locks stay busy. */
static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  char name[64], key[32], text[64], *copy;
  char stream_name[32];
  snprintf(stream_name, sizeof stream_name, "worker-%d", id);
  uint8_t s = xptiRegisterStream(stream_name);
  for (unsigned long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
    CALLS_BEGIN();
    snprintf(name, sizeof name, "tp-%d-%lu", id, i % 50000);
    snprintf(key, sizeof key, "k%lu", i % 7);
    snprintf(text, sizeof text, "str-%d-%lu", id, i % 100000);
    xpti_payload_t p = xpti_payload_make(name, "fork_race.c", (uint32_t)(i % 1000), 1, NULL);
    uint64_t inst;
    xpti_trace_event_data_t *e =
        xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst);
    int32_t obj = xptiRegisterObject(text, strlen(text), 0);
    if (e)
      xptiAddMetadata(e, key, obj);
    xptiRegisterString(text, &copy);
    if (i % 16 == 0) {
      snprintf(stream_name, sizeof stream_name, "w%d-%lu", id, i % 40);
      xptiRegisterStream(stream_name);
      xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, other_cb);
      xptiUnregisterCallback(s, XPTI_TRACE_TASK_BEGIN, other_cb);
      xptiRegisterUserDefinedTracePoint("fork-race-tool", (uint8_t)(i % 100));
    }
    if (e)
      xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, inst, NULL);
    CALLS_END();
    atomic_fetch_add_explicit(&worker_iterations, 1, memory_order_relaxed);
  }
  return NULL;
}

/* In the child: one call of each kind that takes a lock, then notify. */
static int child_work(uint8_t s, int round) {
  char name[64], text[64], *copy;
  snprintf(name, sizeof name, "child-%d", round);
  snprintf(text, sizeof text, "child-object-%d", round);
  xpti_payload_t p = xpti_payload_make(name, "child.c", 7, 1, NULL);
  uint64_t inst;
  xpti_trace_event_data_t *e =
      xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst);
  if (!e)
    return 2;
  int32_t obj = xptiRegisterObject(text, strlen(text), 0);
  if (obj < 0 || xptiAddMetadata(e, "child-key", obj) != XPTI_RESULT_SUCCESS)
    return 3;
  if (xptiRegisterString(text, &copy) == XPTI_INVALID_STRING_ID)
    return 4;
  uint8_t own = xptiRegisterStream("child-stream");
  if (own == XPTI_INVALID_STREAM_ID ||
      xptiRegisterCallback(own, XPTI_TRACE_TASK_END, count_cb) != XPTI_RESULT_SUCCESS)
    return 5;
  unsigned before = atomic_load(&hits);
  xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, e, inst, NULL);
  xptiNotifySubscribers(own, XPTI_TRACE_TASK_END, NULL, e, inst, NULL);
  return atomic_load(&hits) - before == 2 ? 0 : 6;
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for pid up to the deadline; kills it past that.  Returns its
 * exit status, or -1 for a hang or a death by signal. */
static int wait_bounded(pid_t pid) {
  long end = now_ms() + CHILD_DEADLINE_MS;
  int status;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      break;
    if (r < 0)
      return -1;
    if (now_ms() > end) {
      fprintf(stderr, "child %d hung: killed\n", (int)pid);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    struct timespec pause = {0, 200000};
    nanosleep(&pause, NULL);
  }
  if (WIFSIGNALED(status))
    fprintf(stderr, "child %d died of signal %d\n", (int)pid, WTERMSIG(status));
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv) {
  int forks = argc > 1 ? atoi(argv[1]) : 200;
#ifdef FORK_BETWEEN_CALLS
  pthread_rwlockattr_t attr; /* the forking writer is not starved */
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&gate, &attr);
#endif
  xptiForceSetTraceEnabled(true);
  uint8_t s = xptiRegisterStream("fork-race");
  CHECK_EQ(xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, count_cb), XPTI_RESULT_SUCCESS);
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++)
    CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i), 0);
  while (atomic_load(&worker_iterations) < 1000) /* the locks are busy */
    sched_yield();
  int bad = 0;
  for (int round = 0; round < forks && bad < MAX_BAD; round++) {
#ifdef FORK_BETWEEN_CALLS
    pthread_rwlock_wrlock(&gate);
#endif
    pid_t pid = fork();
#ifdef FORK_BETWEEN_CALLS
    pthread_rwlock_unlock(&gate); /* each side releases its own copy */
#endif
    if (pid == 0) {
      alarm(CHILD_DEADLINE_MS / 1000 + 5); /* the parent gone too: still ends */
      _exit(child_work(s, round));
    }
    CHECK(pid > 0);
    if (pid < 0)
      break;
    int r = wait_bounded(pid);
    if (r != 0) {
      fprintf(stderr, "fork %d: child answered %d\n", round, r);
      bad++;
    }
  }
  atomic_store(&stop, true);
  for (int i = 0; i < WORKERS; i++)
    pthread_join(t[i], NULL);
  CHECK_EQ(bad, 0);
  printf("%d forks, %lu worker iterations\n", forks, atomic_load(&worker_iterations));
  return CHECK_DONE();
}
