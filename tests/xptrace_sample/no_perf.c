/* no_perf COMMAND [ARGS...]: runs COMMAND where perf_event_open fails with
 * EPERM, as in a container whose seccomp profile refuses it (Docker's
 * default).  The filter is inherited by every child.  Exit 77 when the
 * kernel takes no seccomp filter (the test is then skipped). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: no_perf COMMAND [ARGS...]\n");
    return 2;
  }
  /* Only the syscall number is compared: a test fixture on one ABI. */
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
    fprintf(stderr, "no_perf: seccomp filter refused: %s\n", strerror(errno));
    return 77;
  }
  execvp(argv[1], &argv[1]);
  fprintf(stderr, "no_perf: %s: %s\n", argv[1], strerror(errno));
  return 127;
}
