/* A CPU-burning fixture for xptrace run --counters: the main thread and
 * one more each burn CPU_MS of their own CPU time and touch TOUCH_MB of
 * fresh memory, then sleep 60 ms (alive, so that a 10 ms poller sees
 * their final counts), and print their tids and CPU times in ns:
 *   burn <tid> <cpu_ns>   (one line per thread) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { CPU_MS = 120, TOUCH_MB = 8 };

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct result {
  long tid;
  uint64_t cpu;
  volatile uint64_t sink;
};

static void *burn(void *arg) {
  struct result *r = arg;
  r->tid = (long)syscall(SYS_gettid);
  size_t n = (size_t)TOUCH_MB << 20;
  char *mem = malloc(n);
  if (mem)
    memset(mem, 1, n); /* page faults */
  __asm__ volatile("" : : "r"(mem) : "memory"); /* clang would drop the memset otherwise */
  uint64_t x = 1;
  while (cpu_ns() < (uint64_t)CPU_MS * 1000000u)
    for (int i = 0; i < 100000; i++)
      x = x * 6364136223846793005u + 1442695040888963407u;
  r->sink = x + (mem ? (uint64_t)mem[n - 1] : 0);
  free(mem);
  r->cpu = cpu_ns();
  struct timespec nap = {0, 60 * 1000000L};
  nanosleep(&nap, NULL);
  return NULL;
}

int main(void) {
  struct result r[2];
  memset(r, 0, sizeof r);
  pthread_t t;
  if (pthread_create(&t, NULL, burn, &r[1]) != 0)
    return 1;
  burn(&r[0]);
  pthread_join(t, NULL);
  for (int i = 0; i < 2; i++)
    printf("burn %ld %llu\n", r[i].tid, (unsigned long long)r[i].cpu);
  return 0;
}
