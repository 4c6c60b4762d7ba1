/* Clock correction of MPI ranks (xpt_clock_correct.h). */
#include "xpt_clock_correct.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

uint64_t xpt_clock_correct(const struct xpt_clock_fit *fit, uint64_t local_ns) {
  __int128 offset = 0;
  if (fit && fit->n >= 1)
    offset = fit->e[0].offset_ns;
  if (fit && fit->n >= 2 && fit->e[1].local_ns != fit->e[0].local_ns) {
    /* The line through the two estimates, in 128 bits: spans of days
     * times offsets of seconds overflow 64. */
    __int128 dl = (__int128)fit->e[1].local_ns - (__int128)fit->e[0].local_ns;
    __int128 dt = (__int128)local_ns - (__int128)fit->e[0].local_ns;
    __int128 dof = (__int128)fit->e[1].offset_ns - (__int128)fit->e[0].offset_ns;
    offset += dof * dt / dl;
  }
  __int128 v = (__int128)local_ns + offset;
  return v < 0 ? 0 : v > (__int128)UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

int xpt_mpi_clock_read(const char *path, struct xpt_mpi_clock *out) {
  memset(out, 0, sizeof *out);
  out->rank = out->size = -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -1;
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return -1;
  }
  char line[512];
  bool magic = false;
  while (fgets(line, sizeof line, f)) {
    unsigned v;
    uint64_t l, r;
    int64_t o;
    if (sscanf(line, "xptrace-mpi-clock %u", &v) == 1)
      magic = v == 1;
    else if (sscanf(line, "rank %d", &out->rank) == 1 || sscanf(line, "size %d", &out->size) == 1 ||
             sscanf(line, "pid %d", &out->pid) == 1 ||
             sscanf(line, "test_offset_ns %" SCNd64, &out->test_offset_ns) == 1)
      continue;
    else if (sscanf(line, "host %255s", out->host) == 1)
      continue;
    else if ((sscanf(line, "init %" SCNu64 " %" SCNd64 " %" SCNu64, &l, &o, &r) == 3 &&
              out->fit.n == 0) ||
             (sscanf(line, "finalize %" SCNu64 " %" SCNd64 " %" SCNu64, &l, &o, &r) == 3 &&
              out->fit.n == 1))
      out->fit.e[out->fit.n++] = (struct xpt_clock_estimate){l, o, r};
  }
  fclose(f);
  if (!magic || out->rank < 0 || out->size <= 0) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

int xpt_mpi_clock_find(const char *dir, int pid, struct xpt_mpi_clock *out) {
  char path[4200];
  snprintf(path, sizeof path, "%s/" XPT_CLOCK_FILE_PREFIX "%d", dir, pid);
  return xpt_mpi_clock_read(path, out);
}
