/* Clocks across hosts: an MPI rank's timestamps mapped to rank 0's clock.
 *
 * The MPI layer (src/layers/mpi) estimates, at MPI_Init and again at
 * MPI_Finalize, the offset of rank 0's clock to this rank's
 * (CLOCK_MONOTONIC ns) by ping-pong, keeping the round trip with the
 * smallest delay, and writes both estimates to the file
 * "mpi-clock.<pid>" in the process's output folder (docs/mpi.md):
 *
 *   xptrace-mpi-clock 1
 *   rank 1
 *   size 4
 *   host node17
 *   pid 4242
 *   test_offset_ns 0
 *   init <local_ns> <offset_ns> <rtt_ns>
 *   finalize <local_ns> <offset_ns> <rtt_ns>
 *
 * offset_ns = rank 0's clock - this rank's clock at local_ns (signed);
 * rtt_ns = the round trip of the kept exchange: the estimate is within
 * rtt_ns / 2 of the truth.  The finalize line is missing when the process
 * ended without MPI_Finalize.  Rank 0's lines say offset 0.
 *
 * Contract of the correction (what `xptrace merge` calls for every
 * timestamp of a rank's trace): with both estimates, the offset drifts
 * linearly from the first to the second (also extrapolated before and
 * after them); with one, it is constant; with none, identity. */
#ifndef XPT_CLOCK_CORRECT_H
#define XPT_CLOCK_CORRECT_H

#include <stdbool.h>
#include <stdint.h>

#define XPT_CLOCK_FILE_PREFIX "mpi-clock."

struct xpt_clock_estimate {
  uint64_t local_ns; /* this rank's clock at the estimate */
  int64_t offset_ns; /* reference - local */
  uint64_t rtt_ns;   /* round trip of the exchange kept */
};

struct xpt_clock_fit {
  int n; /* estimates held: 0, 1 or 2 */
  struct xpt_clock_estimate e[2];
};

/* What an mpi-clock file says. */
struct xpt_mpi_clock {
  int rank, size;
  int pid;
  char host[256];
  int64_t test_offset_ns; /* XPTRACE_MPI_TEST_CLOCK_OFFSET_NS applied to this rank */
  struct xpt_clock_fit fit;
};

/* Local timestamp -> the reference clock (rank 0's), as above.  Results
 * below 0 are 0. */
__attribute__((visibility("hidden"))) uint64_t xpt_clock_correct(const struct xpt_clock_fit *fit,
                                                                 uint64_t local_ns);

/* Read an mpi-clock file; 0, or -1 with errno set (EINVAL: not one). */
__attribute__((visibility("hidden"))) int xpt_mpi_clock_read(const char *path,
                                                             struct xpt_mpi_clock *out);
/* The same, for the process `pid` of folder `dir`; -1 (ENOENT) when that
 * process was no MPI rank. */
__attribute__((visibility("hidden"))) int xpt_mpi_clock_find(const char *dir, int pid,
                                                             struct xpt_mpi_clock *out);

#endif
