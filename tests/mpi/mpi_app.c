/* MPI fixture programs of known shape (tests/mpi/run_mpi.sh counts what
 * their traces must hold):
 *   mpi_app ring N      N rounds of a ring: rank r sends to r+1, receives
 *                       from r-1 (MPI_Send / MPI_Recv, tag = round)
 *   mpi_app exchange    every rank Irecv's from and Isend's to every other
 *                       rank (tag 7), then one MPI_Waitall
 *   mpi_app collective  MPI_Bcast from root 1 (64 ints), MPI_Allreduce
 *                       (one double), MPI_Barrier
 *   mpi_app fork        a ring round, then rank 1 forks a helper that
 *                       runs /bin/true and is waited for, then a barrier
 *   mpi_app split       MPI_Comm_split into even and odd ranks (key =
 *                       rank); in each pair the lower rank sends to the
 *                       higher one (tag 5) on the new communicator, which
 *                       is then freed
 * Each rank prints one line "rank R: ..." with a checksum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int ring(int rank, int size, int rounds) {
  long sum = 0;
  for (int round = 0; round < rounds; round++) {
    int out = rank * 100 + round, in = -1;
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    /* Even ranks send first: no cycle of blocking sends. */
    if (rank % 2 == 0) {
      MPI_Send(&out, 1, MPI_INT, to, round, MPI_COMM_WORLD);
      MPI_Recv(&in, 1, MPI_INT, from, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&in, 1, MPI_INT, from, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&out, 1, MPI_INT, to, round, MPI_COMM_WORLD);
    }
    if (in != from * 100 + round)
      return -1;
    sum += in;
  }
  return (int)sum;
}

static int exchange(int rank, int size) {
  MPI_Request *req = malloc(2 * (size_t)size * sizeof *req);
  int *in = malloc((size_t)size * sizeof *in);
  int out = rank + 1, n = 0;
  for (int p = 0; p < size; p++)
    if (p != rank)
      MPI_Irecv(&in[p], 1, MPI_INT, p, 7, MPI_COMM_WORLD, &req[n++]);
  for (int p = 0; p < size; p++)
    if (p != rank)
      MPI_Isend(&out, 1, MPI_INT, p, 7, MPI_COMM_WORLD, &req[n++]);
  MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
  int sum = 0;
  for (int p = 0; p < size; p++)
    if (p != rank)
      sum += in[p];
  free(req);
  free(in);
  return sum;
}

static int split(int rank) {
  MPI_Comm pair;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &pair);
  int me = rank / 2, value = rank;
  if (me == 0)
    MPI_Send(&value, 1, MPI_INT, 1, 5, pair);
  else
    MPI_Recv(&value, 1, MPI_INT, 0, 5, pair, MPI_STATUS_IGNORE);
  MPI_Comm_free(&pair);
  return value;
}

static int collective(int rank) {
  int data[64];
  for (int i = 0; i < 64; i++)
    data[i] = rank == 1 ? i : -1;
  MPI_Bcast(data, 64, MPI_INT, 1, MPI_COMM_WORLD);
  double mine = rank + 0.5, total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  return data[63] + (int)total;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "ring";
  int result = 0;
  if (!strcmp(mode, "ring")) {
    result = ring(rank, size, argc > 2 ? atoi(argv[2]) : 3);
  } else if (!strcmp(mode, "exchange")) {
    result = exchange(rank, size);
  } else if (!strcmp(mode, "split") && size == 4) {
    result = split(rank);
  } else if (!strcmp(mode, "collective")) {
    result = collective(rank);
  } else if (!strcmp(mode, "fork")) {
    result = ring(rank, size, 1);
    if (rank == 1) {
      fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
      }
      int status = 0;
      if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
          WEXITSTATUS(status) != 0)
        result = -1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    fprintf(stderr, "mpi_app: unknown mode '%s'\n", mode);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  printf("rank %d: %s %d\n", rank, mode, result);
  MPI_Finalize();
  return result < 0;
}
