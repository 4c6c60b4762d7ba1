/* A program that reports the file descriptors it sees, for
 * test_fds.py: it emits XPTI events (so the collectors record), spins
 * in probe_spin (so samplers sample and unwind, and function tracing has
 * a function), then opens /dev/null and prints that descriptor's number
 * ("first N") and every open descriptor ("fd N TARGET"). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <xpti/xpti_trace_framework.h>

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) double probe_spin(double seconds) {
  volatile double x = 0;
  double end = cpu_seconds() + seconds;
  while (cpu_seconds() < end)
    for (int i = 0; i < 10000; ++i)
      x += i * 0.5;
  return x;
}

int main(void) {
  xptiInitialize("fd.probe", 1, 0, "1.0");
  uint8_t stream = xptiRegisterStream("fd.probe");
  xpti_payload_t p = xpti_payload_make("spin", "fd_probe.c", __LINE__, 0, NULL);
  xpti_trace_event_data_t *ev =
      xptiMakeEvent("spin", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  for (int i = 0; i < 20; ++i) {
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_BEGIN, NULL, ev, (uint64_t)i, NULL);
    probe_spin(0.02);
    xptiNotifySubscribers(stream, XPTI_TRACE_TASK_END, NULL, ev, (uint64_t)i, NULL);
  }
  int first = open("/dev/null", O_RDONLY | O_CLOEXEC);
  printf("first %d\n", first);
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return 1;
  for (struct dirent *e; (e = readdir(d));) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dirfd(d))
      continue;
    char path[64], target[512];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    printf("fd %d %s\n", fd, target);
  }
  closedir(d);
  return 0;
}
