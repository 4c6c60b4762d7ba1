/* xptrace common — state shared by every copy of this library in a process
 * (internal).  Every collector library, the sampler and the tool link
 * their own copy; messages "once", the original stderr and the output
 * folder must still be one per process.  The copies find each other
 * through an ELF note (see xpt_shared.c).  Change the layout: bump
 * XPT_SHARED_VERSION, so copies of another layout never share it. */
#ifndef XPT_SHARED_H
#define XPT_SHARED_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define XPT_SHARED_VERSION 2
enum { XPT_ONCE_SLOTS = 256 };

typedef struct xpt_shared {
  /* original stderr: 0 not recorded, 1 being recorded, 2 recorded */
  _Atomic int err_state;
  int err_fd; /* our F_DUPFD_CLOEXEC copy, or -1 when fd 2 was not open */
  dev_t err_dev;
  ino_t err_ino;
  /* message keys printed (64-bit hashes; 0 = empty slot) */
  _Atomic uint64_t once[XPT_ONCE_SLOTS];
  /* output folder (xpt_outdir.c), under `lock` */
  pthread_mutex_t lock;
  pid_t out_pid; /* the process out_path belongs to; 0: not computed */
  bool out_created, out_failed;
  bool out_default;   /* the default name: never reuse an existing folder */
  bool out_fixed;     /* name fixed at fork before it was created */
  char out_path[PATH_MAX];
  /* under `xptrace run` (XPTRACE_SESSION set): the run's folder, which
   * holds one subfolder per process (out_path) */
  bool out_session, out_base_created;
  char out_base[PATH_MAX];
  char out_token[128]; /* XPTRACE_SESSION: written to <out_path>/xptrace.session */
} xpt_shared_t;

/* The process-wide instance (the first copy loaded). */
__attribute__((visibility("hidden"))) xpt_shared_t *xpt_shared(void);
/* This copy's own instance (the shared one if this copy came first). */
extern __attribute__((visibility("hidden"))) xpt_shared_t xpt_shared_own;
/* Fork handlers of the output folder (xpt_outdir.c), from the load-time
 * constructor (xpt_msg.c). */
__attribute__((visibility("hidden"))) void xpt_outdir_init(void);

#endif /* XPT_SHARED_H */
