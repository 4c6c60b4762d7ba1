/* Cost of the MPI layer per call, against its floor in the same run: each
 * loop runs through MPI_* (the layer, when preloaded) and through PMPI_*
 * (straight to MPI).  Run under mpirun -np 1, three ways (README.md):
 * plain, with the layer preloaded but no dispatcher, and traced
 * (`xptrace run --mpi`).  Prints the fastest of 15 batches in ns per call
 * (the machine is shared: the minimum is what the code costs). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { BATCHES = 15 };

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double rank_loop(int n, int pmpi) {
  int r;
  double t0 = now_ns();
  for (int i = 0; i < n; i++)
    pmpi ? PMPI_Comm_rank(MPI_COMM_WORLD, &r) : MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return (now_ns() - t0) / n;
}

/* One message to itself: Irecv, Isend, Waitall (3 calls, 1 flow). */
static double self_loop(int n, int pmpi) {
  int out = 1, in;
  MPI_Request req[2];
  double t0 = now_ns();
  for (int i = 0; i < n; i++) {
    if (pmpi) {
      PMPI_Irecv(&in, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &req[0]);
      PMPI_Isend(&out, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &req[1]);
      PMPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    } else {
      MPI_Irecv(&in, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &req[0]);
      MPI_Isend(&out, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &req[1]);
      MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
  }
  return (now_ns() - t0) / n;
}

static void report(const char *what, double (*loop)(int, int), int n) {
  double via[BATCHES], floor[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    floor[b] = loop(n, 1);
    via[b] = loop(n, 0);
  }
  qsort(via, BATCHES, sizeof *via, cmp);
  qsort(floor, BATCHES, sizeof *floor, cmp);
  printf("%-28s %9.1f ns  floor (PMPI) %9.1f ns  layer %+8.1f ns\n", what, via[0], floor[0],
         via[0] - floor[0]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  report("MPI_Comm_rank", rank_loop, n * 10);
  report("Irecv+Isend+Waitall (self)", self_loop, n);
  MPI_Finalize();
  return 0;
}
