/* mpi_clock_apply MPI-CLOCK-FILE: reads local timestamps (ns, one a line)
 * from stdin and prints each mapped to rank 0's clock with the estimates
 * of the file (xpt_clock_correct, the function `xptrace merge` calls). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>

#include "xpt_clock_correct.h"

int main(int argc, char **argv) {
  struct xpt_mpi_clock c;
  if (argc != 2 || xpt_mpi_clock_read(argv[1], &c) != 0) {
    fprintf(stderr, "mpi_clock_apply: cannot read '%s': %s\n", argc > 1 ? argv[1] : "",
            strerror(errno));
    return 1;
  }
  uint64_t t;
  while (scanf("%" SCNu64, &t) == 1)
    printf("%" PRIu64 "\n", xpt_clock_correct(&c.fit, t));
  return 0;
}
