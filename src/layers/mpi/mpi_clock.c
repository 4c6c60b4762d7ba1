/* Clock offsets to rank 0, estimated by ping-pong at MPI_Init and at
 * MPI_Finalize, written to "mpi-clock.<pid>" in the process's output
 * folder (format and use: src/trace/xpt_clock_correct.h).
 *
 * Every rank r > 0 sends rank 0 LAYER_ROUNDS pings on MPI_COMM_WORLD
 * (tag LAYER_TAG); rank 0 answers each with its clock T (and a random
 * number of the job, which flow ids mix in: layer_job_salt).  r keeps the
 * round with the smallest round trip: offset = T - (t0 + t1) / 2, off by
 * at most half that round trip.  Rank 0 answers pings in whatever order
 * they come and gives up after LAYER_IDLE_NS without one (a rank without
 * the layer never pings), so a job where some ranks lack the layer does
 * not hang. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mpi_layer.h"
#include "xpt_files.h"
#include "xpt_msg.h"

enum { LAYER_ROUNDS = 16, LAYER_TAG = 32749 };
#define LAYER_IDLE_NS 10000000000ll

static int layer_test_rank = -1;
static int64_t layer_test_offset_ns;
static struct xpt_clock_est {
  uint64_t local_ns;
  int64_t offset_ns;
  uint64_t rtt_ns;
} layer_est[2];

static uint64_t layer_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* This rank's clock as the trace shows it (a test may skew it). */
static uint64_t layer_now(void) {
  uint64_t t = layer_mono();
  if (layer_world_rank == layer_test_rank)
    t = (uint64_t)((int64_t)t + layer_test_offset_ns);
  return t;
}

/* XPTRACE_MPI_TEST_CLOCK_OFFSET_NS=<rank>:<ns>, read once (tests only). */
void layer_clock_setup(void) {
  const char *v = getenv("XPTRACE_MPI_TEST_CLOCK_OFFSET_NS");
  if (!v || !*v)
    return;
  char *end;
  errno = 0;
  long rank = strtol(v, &end, 10);
  if (*end == ':' && rank >= 0 && rank <= INT_MAX) {
    char *end2;
    long long ns = strtoll(end + 1, &end2, 10);
    if (!*end2 && end2 != end + 1 && !errno) {
      layer_test_rank = (int)rank;
      layer_test_offset_ns = ns;
      return;
    }
  }
  xpt_msg("xpti: XPTRACE_MPI_TEST_CLOCK_OFFSET_NS='%s' is not <rank>:<ns>; ignored", v);
}

/* Which CLOCK_MONOTONIC this rank reads: its boot (boot_id) and its time
 * namespace (which may shift the clock). Ranks with rank 0's id read the
 * very same clock: their offset is 0, not estimated (estimates under a
 * sanitizer's slow round trips were off by up to 119 us). 0: unknown, or
 * a test skews this rank's clock. */
static int64_t layer_clock_id(void) {
  static int64_t id = -1;
  if (id != -1)
    return id;
  id = 0;
  if (layer_world_rank == layer_test_rank)
    return id;
  char boot[64] = "";
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read(fd, boot, sizeof boot - 1);
  if (fd >= 0)
    close(fd);
  if (n <= 0)
    return id;
  struct stat ns;
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the boot id and the namespace */
  for (ssize_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)boot[i]) * 1099511628211ull;
  if (stat("/proc/self/ns/time", &ns) == 0) /* no time namespaces: one clock per boot */
    for (unsigned i = 0; i < 8; i++)
      h = (h ^ (((uint64_t)ns.st_ino >> (8 * i)) & 0xff)) * 1099511628211ull;
  id = (int64_t)(h >> 1) | 1;
  return id;
}

static void layer_serve(int phase) {
  long need = (long)(layer_world_size - 1) * LAYER_ROUNDS, served = 0;
  uint64_t last = layer_mono();
  unsigned idle = 0;
  while (served < need) {
    int flag = 0;
    MPI_Status st;
    if (PMPI_Iprobe(MPI_ANY_SOURCE, LAYER_TAG, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS)
      return;
    if (!flag) {
      if (layer_mono() - last > (uint64_t)LAYER_IDLE_NS) {
        xpt_msg("xpti: MPI layer: rank 0 got %ld of %ld clock pings in %s (ranks without the "
                "layer?); it stopped waiting after 10 s",
                served, need, phase ? "MPI_Finalize" : "MPI_Init");
        return;
      }
      if (++idle > 1000) { /* spin a little, then let the others run */
        struct timespec pause = {0, 50000};
        nanosleep(&pause, NULL);
      }
      continue;
    }
    idle = 0;
    int8_t ping;
    PMPI_Recv(&ping, 1, MPI_INT8_T, st.MPI_SOURCE, LAYER_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int64_t t[3] = {(int64_t)layer_now(), (int64_t)layer_job_salt, layer_clock_id()};
    PMPI_Send(t, 3, MPI_INT64_T, st.MPI_SOURCE, LAYER_TAG, MPI_COMM_WORLD);
    served++;
    last = layer_mono();
  }
}

static void layer_ping(struct xpt_clock_est *e) {
  e->rtt_ns = UINT64_MAX;
  int64_t reference = 0;
  for (int i = 0; i < LAYER_ROUNDS; i++) {
    int8_t ping = 0;
    int64_t t[3];
    uint64_t t0 = layer_now();
    if (PMPI_Send(&ping, 1, MPI_INT8_T, 0, LAYER_TAG, MPI_COMM_WORLD) != MPI_SUCCESS ||
        PMPI_Recv(t, 3, MPI_INT64_T, 0, LAYER_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
      return;
    uint64_t t1 = layer_now();
    layer_job_salt = (uint64_t)t[1];
    reference = t[2];
    if (t1 - t0 < e->rtt_ns) {
      e->rtt_ns = t1 - t0;
      e->local_ns = t0 + (t1 - t0) / 2;
      e->offset_ns = t[0] - (int64_t)e->local_ns;
    }
  }
  if (e->rtt_ns != UINT64_MAX && reference != 0 && reference == layer_clock_id())
    e->offset_ns = 0; /* rank 0's own clock */
}

/* Writes the file (phase 0) or adds the finalize line (phase 1). */
static void layer_clock_write(int phase) {
  const char *dir = xpt_output_dir();
  if (!dir)
    return;
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/mpi-clock.%d", dir, (int)getpid());
  int fd = phase == 0 ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)
                      : open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    xpt_msg("xpti: MPI layer cannot write '%s': %s", path, strerror(errno));
    return;
  }
  char buf[1024];
  int n = 0;
  if (phase == 0) {
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    n = snprintf(buf, sizeof buf,
                 "xptrace-mpi-clock 1\nrank %d\nsize %d\nhost %s\npid %d\ntest_offset_ns %" PRId64
                 "\n",
                 layer_world_rank, layer_world_size, host, (int)getpid(),
                 layer_world_rank == layer_test_rank ? layer_test_offset_ns : 0);
  }
  const struct xpt_clock_est *e = &layer_est[phase];
  if (e->rtt_ns != UINT64_MAX)
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%s %" PRIu64 " %" PRId64 " %" PRIu64 "\n",
                  phase ? "finalize" : "init", e->local_ns, e->offset_ns, e->rtt_ns);
  if (write(fd, buf, (size_t)n) != n)
    xpt_msg("xpti: MPI layer cannot write '%s': %s", path, strerror(errno));
  close(fd);
}

void layer_clock_sync(int phase) {
  int up = 0, down = 0;
  if (layer_world_size < 1 || PMPI_Initialized(&up) != MPI_SUCCESS || !up ||
      PMPI_Finalized(&down) != MPI_SUCCESS || down)
    return;
  struct xpt_clock_est *e = &layer_est[phase];
  if (layer_world_rank == 0 && phase == 0 &&
      getrandom(&layer_job_salt, sizeof layer_job_salt, 0) != sizeof layer_job_salt)
    layer_job_salt = layer_mono() ^ (uint64_t)getpid() << 32;
  if (layer_world_rank == 0) {
    if (layer_world_size > 1)
      layer_serve(phase);
    uint64_t t = layer_now();
    *e = (struct xpt_clock_est){t, 0, 0};
  } else {
    layer_ping(e);
  }
  if (layer_listened())
    layer_clock_write(phase);
}
