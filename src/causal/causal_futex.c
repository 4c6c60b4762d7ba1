/* A program's own futexes: syscall(SYS_futex, ...) through libc's
 * syscall(), as a hand-written semaphore or barrier does.  A futex wait is
 * a wait on another thread (pays what it owes first; excused the delays
 * added while it slept when a wake ended it); a futex wake may wake one, so
 * the waker pays first and its wakee does not inherit a debt the waker
 * still had.  glibc's own pthread calls use their futexes inline, not
 * through syscall(): those are wrapped by name (causal_sync.c).  A futex
 * call made with inline assembly is not seen (docs/causal.md). */
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "causal_internal.h"

typedef long (*syscall_fn)(long, ...);
static _Atomic(syscall_fn) real_fn;

/* Resolved before the program runs (causal_futex_resolve): the library's
 * own raw calls, some in the SIGPROF handler, come through here too. */
static syscall_fn real_syscall(void) {
  syscall_fn f = atomic_load_explicit(&real_fn, memory_order_acquire);
  if (!f) {
    f = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
    atomic_store_explicit(&real_fn, f, memory_order_release);
  }
  return f;
}

void causal_futex_resolve(void) { real_syscall(); }

/* 1: the call waits for another thread; 2: it may wake one; 0: neither. */
static int futex_kind(long n, long op) {
#ifdef SYS_futex_waitv
  if (n == SYS_futex_waitv)
    return 1;
#endif
  if (n != SYS_futex)
    return 0;
  switch (op & FUTEX_CMD_MASK) {
  case FUTEX_WAIT:
  case FUTEX_WAIT_BITSET:
  case FUTEX_WAIT_REQUEUE_PI:
  case FUTEX_LOCK_PI:
#ifdef FUTEX_LOCK_PI2
  case FUTEX_LOCK_PI2:
#endif
    return 1;
  case FUTEX_WAKE:
  case FUTEX_WAKE_OP:
  case FUTEX_WAKE_BITSET:
  case FUTEX_REQUEUE:
  case FUTEX_CMP_REQUEUE:
  case FUTEX_CMP_REQUEUE_PI:
  case FUTEX_UNLOCK_PI:
    return 2;
  default:
    return 0;
  }
}

/* Six arguments, as glibc's own syscall() reads them: the kernel ignores
 * those a call does not have.  The sixth is on the caller's stack (x86-64)
 * where a shorter call has none: not an error, so not for ASan to check. */
__attribute__((no_sanitize_address)) CAUSAL_API long syscall(long n, ...) {
  va_list ap;
  va_start(ap, n);
  long a[6];
  for (int i = 0; i < 6; ++i)
    a[i] = va_arg(ap, long);
  va_end(ap);
  syscall_fn f = real_syscall();
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  int kind = futex_kind(n, a[1]);
  if (kind == 2)
    causal_pre_wake();
  if (kind != 1)
    return f(n, a[0], a[1], a[2], a[3], a[4], a[5]);
  causal_pre_block();
  long rc = f(n, a[0], a[1], a[2], a[3], a[4], a[5]);
  int saved = errno;
  /* 0 (or waitv's index): a wake ended the wait; EAGAIN (the word had
   * changed), ETIMEDOUT, EINTR: no other thread woke it. */
  causal_post_block(rc >= 0);
  errno = saved;
  return rc;
}
