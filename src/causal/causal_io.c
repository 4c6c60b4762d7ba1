/* Waits through file descriptors, as the pthread waits of causal_sync.c:
 * a thread blocked on a pipe, a socket or a poll set is usually woken by
 * another thread's write, so it pays what it owes before it waits and is
 * excused the delays added while it waited when another thread woke it;
 * a thread pays before it writes (it may wake one).  A read or write
 * counts as woken when it waited (over 20 us) and its descriptor is a
 * pipe or a socket: a disk read wakes on the device, not on a thread.
 * The poll family (poll, ppoll, select, pselect, epoll_wait/pwait/pwait2)
 * counts as woken when a descriptor is ready.  A program's own futex
 * waits and wakes through syscall(SYS_futex, ...) are the same waits
 * (causal_futex.c). */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "causal_internal.h"

#define REAL(name, ret, ...)                                                                 \
  typedef ret (*name##_fn)(__VA_ARGS__);                                                     \
  static name##_fn real_##name(void) {                                                       \
    static _Atomic(name##_fn) fn;                                                            \
    name##_fn f = atomic_load_explicit(&fn, memory_order_acquire);                           \
    if (!f) {                                                                                \
      f = (name##_fn)dlsym(RTLD_NEXT, #name);                                                \
      atomic_store_explicit(&fn, f, memory_order_release);                                   \
    }                                                                                        \
    return f;                                                                                \
  }

REAL(read, ssize_t, int, void *, size_t)
REAL(write, ssize_t, int, const void *, size_t)
REAL(readv, ssize_t, int, const struct iovec *, int)
REAL(writev, ssize_t, int, const struct iovec *, int)
REAL(recv, ssize_t, int, void *, size_t, int)
REAL(recvfrom, ssize_t, int, void *, size_t, int, struct sockaddr *, socklen_t *)
REAL(recvmsg, ssize_t, int, struct msghdr *, int)
REAL(send, ssize_t, int, const void *, size_t, int)
REAL(sendto, ssize_t, int, const void *, size_t, int, const struct sockaddr *, socklen_t)
REAL(sendmsg, ssize_t, int, const struct msghdr *, int)
REAL(accept, int, int, struct sockaddr *, socklen_t *)
REAL(poll, int, struct pollfd *, nfds_t, int)
REAL(select, int, int, fd_set *, fd_set *, fd_set *, struct timeval *)
REAL(epoll_wait, int, int, struct epoll_event *, int, int)
REAL(ppoll, int, struct pollfd *, nfds_t, const struct timespec *, const sigset_t *)
REAL(pselect, int, int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *)
REAL(epoll_pwait, int, int, struct epoll_event *, int, int, const sigset_t *)
/* glibc 2.35 and later; looked up by name, so a build against an older
 * glibc still interposes it where the program's glibc has it. */
REAL(epoll_pwait2, int, int, struct epoll_event *, int, const struct timespec *, const sigset_t *)

enum { WAITED_NS = 20000 };

/* After a transfer on fd that began at t0: woken by another thread? */
static bool woken_on(int fd, ssize_t rc, uint64_t t0) {
  if (rc < 0 || causal_now_ns() - t0 < WAITED_NS)
    return false;
  struct stat st;
  return fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

#define TRANSFER(call, fd)                                                                   \
  do {                                                                                       \
    causal_pre_block();                                                                      \
    uint64_t t0 = causal_now_ns();                                                           \
    ssize_t rc = (call);                                                                     \
    int saved = errno;                                                                       \
    causal_post_block(woken_on((fd), rc, t0));                                               \
    errno = saved;                                                                           \
    return rc;                                                                               \
  } while (0)

#define WAIT(call)                                                                           \
  do {                                                                                       \
    causal_pre_block();                                                                      \
    int rc = (call);                                                                         \
    int saved = errno;                                                                       \
    causal_post_block(rc > 0);                                                               \
    errno = saved;                                                                           \
    return rc;                                                                               \
  } while (0)

CAUSAL_API ssize_t read(int fd, void *buf, size_t n) { TRANSFER(real_read()(fd, buf, n), fd); }
CAUSAL_API ssize_t readv(int fd, const struct iovec *v, int n) {
  TRANSFER(real_readv()(fd, v, n), fd);
}
CAUSAL_API ssize_t recv(int fd, void *buf, size_t n, int flags) {
  TRANSFER(real_recv()(fd, buf, n, flags), fd);
}
CAUSAL_API ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a,
                            socklen_t *al) {
  TRANSFER(real_recvfrom()(fd, buf, n, flags, a, al), fd);
}
CAUSAL_API ssize_t recvmsg(int fd, struct msghdr *m, int flags) {
  TRANSFER(real_recvmsg()(fd, m, flags), fd);
}
/* A write may wake a reader (paid first) and may wait on a full pipe. */
CAUSAL_API ssize_t write(int fd, const void *buf, size_t n) {
  TRANSFER(real_write()(fd, buf, n), fd);
}
CAUSAL_API ssize_t writev(int fd, const struct iovec *v, int n) {
  TRANSFER(real_writev()(fd, v, n), fd);
}
CAUSAL_API ssize_t send(int fd, const void *buf, size_t n, int flags) {
  TRANSFER(real_send()(fd, buf, n, flags), fd);
}
CAUSAL_API ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
                          socklen_t al) {
  TRANSFER(real_sendto()(fd, buf, n, flags, a, al), fd);
}
CAUSAL_API ssize_t sendmsg(int fd, const struct msghdr *m, int flags) {
  TRANSFER(real_sendmsg()(fd, m, flags), fd);
}
CAUSAL_API int accept(int fd, struct sockaddr *a, socklen_t *al) {
  WAIT(real_accept()(fd, a, al));
}
CAUSAL_API int poll(struct pollfd *fds, nfds_t n, int timeout) {
  WAIT(real_poll()(fds, n, timeout));
}
CAUSAL_API int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv) {
  WAIT(real_select()(n, r, w, e, tv));
}
CAUSAL_API int epoll_wait(int ep, struct epoll_event *ev, int n, int timeout) {
  WAIT(real_epoll_wait()(ep, ev, n, timeout));
}
CAUSAL_API int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
                     const sigset_t *mask) {
  WAIT(real_ppoll()(fds, n, ts, mask));
}
CAUSAL_API int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
                       const sigset_t *mask) {
  WAIT(real_pselect()(n, r, w, e, ts, mask));
}
CAUSAL_API int epoll_pwait(int ep, struct epoll_event *ev, int n, int timeout,
                           const sigset_t *mask) {
  WAIT(real_epoll_pwait()(ep, ev, n, timeout, mask));
}
int epoll_pwait2(int ep, struct epoll_event *ev, int n, const struct timespec *ts,
                 const sigset_t *mask);
CAUSAL_API int epoll_pwait2(int ep, struct epoll_event *ev, int n, const struct timespec *ts,
                            const sigset_t *mask) {
  epoll_pwait2_fn f = real_epoll_pwait2();
  if (!f) { /* only reached by a program linked against a newer glibc */
    errno = ENOSYS;
    return -1;
  }
  WAIT(f(ep, ev, n, ts, mask));
}

void causal_io_resolve(void) {
  real_read();
  real_write();
  real_readv();
  real_writev();
  real_recv();
  real_recvfrom();
  real_recvmsg();
  real_send();
  real_sendto();
  real_sendmsg();
  real_accept();
  real_poll();
  real_select();
  real_epoll_wait();
  real_ppoll();
  real_pselect();
  real_epoll_pwait();
  real_epoll_pwait2();
}
