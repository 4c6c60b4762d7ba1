/* xptrace common — messages to the original stderr (see xpt_msg.h). */
#include "xpt_msg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xpt_fd.h"
#include "xpt_shared.h"

static void msg_record(xpt_shared_t *s) {
  struct stat st;
  s->err_fd = -1;
  if (fstat(STDERR_FILENO, &st) != 0)
    return;
  int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, xpt_fd_floor());
  if (fd < 0)
    fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0)
    return;
  s->err_dev = st.st_dev;
  s->err_ino = st.st_ino;
  s->err_fd = fd;
}

/* The first copy to get here records for the process. */
static xpt_shared_t *msg_state(void) {
  xpt_shared_t *s = xpt_shared();
  int state = atomic_load_explicit(&s->err_state, memory_order_acquire);
  if (state == 2)
    return s;
  int expected = 0;
  if (atomic_compare_exchange_strong(&s->err_state, &expected, 1)) {
    msg_record(s);
    atomic_store_explicit(&s->err_state, 2, memory_order_release);
    return s;
  }
  while (atomic_load_explicit(&s->err_state, memory_order_acquire) != 2)
    sched_yield();
  return s;
}

__attribute__((constructor)) static void xpt_msg_load(void) {
  msg_state();
  xpt_outdir_init();
}

int xpt_msg_fd(void) {
  xpt_shared_t *s = msg_state();
  if (s->err_fd < 0)
    return -1;
  /* The program may have closed our copy and reused its number. */
  struct stat st;
  if (fstat(s->err_fd, &st) != 0 || st.st_dev != s->err_dev || st.st_ino != s->err_ino)
    return -1;
  return s->err_fd;
}

void xpt_msg_rebind(void) {
  xpt_shared_t *s = msg_state();
  if (s->err_fd >= 0)
    close(s->err_fd);
  msg_record(s);
}

bool xpt_msg_write(const char *buf, size_t len) {
  int fd = xpt_msg_fd();
  if (fd < 0)
    return false;
  while (len) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    buf += n;
    len -= (size_t)n;
  }
  return true;
}

static bool msg_vline(const char *fmt, va_list ap) {
  char line[2048];
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  if (n < 0)
    return false;
  size_t len = (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
  if (len == 0 || line[len - 1] != '\n')
    line[len++] = '\n';
  return xpt_msg_write(line, len);
}

bool xpt_msg(const char *fmt, ...) {
  int saved = errno;
  va_list ap;
  va_start(ap, fmt);
  bool ok = msg_vline(fmt, ap);
  va_end(ap);
  errno = saved;
  return ok;
}

/* FNV-1a; 0 is the empty slot. */
static uint64_t msg_key_hash(const char *key) {
  uint64_t h = UINT64_C(1469598103934665603);
  for (; *key; ++key)
    h = (h ^ (unsigned char)*key) * UINT64_C(1099511628211);
  return h ? h : 1;
}

/* Whether `key` is new in this process (and now taken). */
static bool msg_claim(const char *key) {
  xpt_shared_t *s = msg_state();
  uint64_t h = msg_key_hash(key);
  for (unsigned i = 0; i < XPT_ONCE_SLOTS; ++i) {
    _Atomic uint64_t *slot = &s->once[(h + i) % XPT_ONCE_SLOTS];
    uint64_t cur = atomic_load(slot);
    if (cur == h)
      return false;
    if (cur == 0) {
      uint64_t expected = 0;
      if (atomic_compare_exchange_strong(slot, &expected, h))
        return true;
      if (expected == h)
        return false;
    }
  }
  return true; /* table full: better said twice than never */
}

bool xpt_msg_once(const char *key, const char *fmt, ...) {
  int saved = errno;
  if (!key || !msg_claim(key)) {
    errno = saved;
    return false;
  }
  va_list ap;
  va_start(ap, fmt);
  bool ok = msg_vline(fmt, ap);
  va_end(ap);
  errno = saved;
  return ok;
}
