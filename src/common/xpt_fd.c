/* xptrace common — descriptors held while the program runs (xpt_fd.h). */
#include "xpt_fd.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

int xpt_fd_floor(void) {
  static _Atomic int floor_fd; /* 0: not known yet */
  int f = atomic_load_explicit(&floor_fd, memory_order_relaxed);
  if (f)
    return f;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    f = 512;
  else if (rl.rlim_cur > 1024)
    f = 1000;
  else
    f = rl.rlim_cur >= 64 ? (int)rl.rlim_cur / 2 : 3;
  atomic_store_explicit(&floor_fd, f, memory_order_relaxed);
  return f;
}

int xpt_fd_raise(int fd) {
  int floor_fd = xpt_fd_floor();
  if (fd < 0 || fd >= floor_fd)
    return fd;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, floor_fd);
  if (high < 0)
    return fd;
  close(fd);
  return high;
}
