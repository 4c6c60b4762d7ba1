/* The MPI layer's logic without MPI, in every build (sanitizers too):
 * flow ids agree between a sender's and a receiver's channel counters,
 * the request table keeps every request through growth and deletion,
 * and the clock correction interpolates drift as xpt_clock_correct.h
 * says. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_match.h"
#include "xpt_clock_correct.h"

static int failures;
#define CHECK(cond)                                                                          \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);              \
      failures++;                                                                           \
    }                                                                                       \
  } while (0)

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Four ranks, each with its own counters: every rank sends `per` messages
 * to every other on tags 0..2 and two communicators; the receivers count
 * them in an order that differs across channels (MPI only orders one
 * channel) but keeps each channel's order.  Both sides must name each
 * message alike, and no two messages alike. */
static void test_flows(void) {
  enum { RANKS = 4, PER = 50, TAGS = 3 };
  static xpt_mpi_chans_t side[RANKS] = {XPT_MPI_CHANS_INIT, XPT_MPI_CHANS_INIT,
                                        XPT_MPI_CHANS_INIT, XPT_MPI_CHANS_INIT};
  const uint64_t comms[2] = {0, 0x1234567};
  size_t total = (size_t)RANKS * (RANKS - 1) * PER * TAGS * 2, n = 0;
  uint64_t *sent = malloc(total * sizeof *sent), *got = malloc(total * sizeof *got);
  CHECK(sent && got);
  if (!sent || !got)
    return;
  for (int k = 0; k < PER; k++)
    for (int c = 0; c < 2; c++)
      for (int tag = 0; tag < TAGS; tag++)
        for (int s = 0; s < RANKS; s++)
          for (int d = 0; d < RANKS; d++)
            if (s != d)
              sent[n++] = xpt_mpi_chan_next(&side[s], comms[c], s, d, tag, 0);
  CHECK(n == total);
  /* Receivers: tags and communicators backwards, sources backwards. */
  size_t m = 0;
  for (int c = 1; c >= 0; c--)
    for (int tag = TAGS - 1; tag >= 0; tag--)
      for (int k = 0; k < PER; k++)
        for (int d = RANKS - 1; d >= 0; d--)
          for (int s = RANKS - 1; s >= 0; s--)
            if (s != d)
              got[m++] = xpt_mpi_chan_next(&side[d], comms[c], d, s, tag, 1);
  CHECK(m == total);
  for (size_t i = 0; i < total; i++)
    CHECK(sent[i] >> 63 == 1); /* global ids: merge keeps them */
  qsort(sent, total, sizeof *sent, cmp_u64);
  qsort(got, total, sizeof *got, cmp_u64);
  CHECK(memcmp(sent, got, total * sizeof *sent) == 0);
  size_t dups = 0;
  for (size_t i = 1; i < total; i++)
    dups += sent[i] == sent[i - 1];
  CHECK(dups == 0);
  /* The n-th send matches the n-th receive of its channel only. */
  uint64_t a = xpt_mpi_flow_id(0, 1, 2, 5, 1), b = xpt_mpi_flow_id(0, 1, 2, 5, 2);
  CHECK(a != b);
  CHECK(xpt_mpi_flow_id(0, 2, 1, 5, 1) != a); /* direction matters */
  CHECK(xpt_mpi_flow_id(7, 1, 2, 5, 1) != a); /* so does the communicator */
  for (int r = 0; r < RANKS; r++)
    xpt_mpi_chans_free(&side[r]);
  free(sent);
  free(got);
}

/* Threads sending on one channel at once: counts stay distinct. */
static xpt_mpi_chans_t shared_chans = XPT_MPI_CHANS_INIT;
enum { THREADS = 4, EACH = 2000 };
static uint64_t thread_ids[THREADS][EACH];

static void *sender(void *arg) {
  uint64_t *out = arg;
  for (int i = 0; i < EACH; i++)
    out[i] = xpt_mpi_chan_next(&shared_chans, 0, 0, 1 + i % 3, 9, 0);
  return NULL;
}

static void test_threads(void) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    CHECK(pthread_create(&t[i], NULL, sender, thread_ids[i]) == 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  uint64_t *all = &thread_ids[0][0];
  qsort(all, (size_t)THREADS * EACH, sizeof *all, cmp_u64);
  size_t dups = 0;
  for (size_t i = 1; i < (size_t)THREADS * EACH; i++)
    dups += all[i] == all[i - 1];
  CHECK(dups == 0);
  /* The receiver's side names the same set. */
  xpt_mpi_chans_t rx[4] = {XPT_MPI_CHANS_INIT, XPT_MPI_CHANS_INIT, XPT_MPI_CHANS_INIT,
                           XPT_MPI_CHANS_INIT}; /* one per receiving rank */
  uint64_t *want = malloc((size_t)THREADS * EACH * sizeof *want);
  size_t n = 0;
  for (int peer = 1; peer <= 3; peer++) /* each thread sent i % 3 == peer - 1 to peer */
    for (int k = 0; k < THREADS; k++)
      for (int i = peer - 1; i < EACH; i += 3)
        want[n++] = xpt_mpi_chan_next(&rx[peer], 0, peer, 0, 9, 1);
  CHECK(n == (size_t)THREADS * EACH);
  qsort(want, n, sizeof *want, cmp_u64);
  CHECK(memcmp(want, all, n * sizeof *want) == 0);
  free(want);
  for (int peer = 1; peer <= 3; peer++)
    xpt_mpi_chans_free(&rx[peer]);
  xpt_mpi_chans_free(&shared_chans);
}

static void test_requests(void) {
  xpt_mpi_reqs_t t = XPT_MPI_REQS_INIT;
  enum { N = 5000 };
  for (uint64_t i = 1; i <= N; i++) {
    /* Handles are pointers: 16-byte steps, one region. */
    xpt_mpi_req_t r = {0x7f0000001000ull + i * 16, i, i * 3, 0, NULL, i, XPT_MPI_REQ_SEND};
    CHECK(xpt_mpi_req_put(&t, &r));
  }
  CHECK(xpt_mpi_req_count(&t) == N);
  xpt_mpi_req_t out;
  /* Take the odd ones; every even one must still be found after the
   * deletions shifted the probe chains. */
  for (uint64_t i = 1; i <= N; i += 2) {
    CHECK(xpt_mpi_req_take(&t, 0x7f0000001000ull + i * 16, false, &out));
    CHECK(out.id == i && out.flow == i * 3);
  }
  CHECK(xpt_mpi_req_count(&t) == N / 2);
  for (uint64_t i = 2; i <= N; i += 2) {
    CHECK(xpt_mpi_req_take(&t, 0x7f0000001000ull + i * 16, true, &out)); /* peek */
    CHECK(out.id == i);
  }
  CHECK(!xpt_mpi_req_take(&t, 0x7f0000001000ull + 16, false, &out)); /* gone */
  CHECK(!xpt_mpi_req_take(&t, 0, false, &out));
  /* A handle reused by MPI replaces the old entry. */
  xpt_mpi_req_t again = {0x7f0000001000ull + 2 * 16, 99, 0, 0, NULL, 0, XPT_MPI_REQ_RECV};
  CHECK(xpt_mpi_req_put(&t, &again));
  CHECK(xpt_mpi_req_count(&t) == N / 2);
  CHECK(xpt_mpi_req_take(&t, again.key, false, &out) && out.id == 99 &&
        out.kind == XPT_MPI_REQ_RECV);
  for (uint64_t i = 4; i <= N; i += 2)
    CHECK(xpt_mpi_req_take(&t, 0x7f0000001000ull + i * 16, false, &out));
  CHECK(xpt_mpi_req_count(&t) == 0);
  xpt_mpi_reqs_free(&t);
}

static void test_clock(void) {
  struct xpt_clock_fit none = {0, {{0, 0, 0}, {0, 0, 0}}};
  CHECK(xpt_clock_correct(&none, 12345) == 12345);
  CHECK(xpt_clock_correct(NULL, 12345) == 12345);
  struct xpt_clock_fit one = {1, {{1000, -300, 10}, {0, 0, 0}}};
  CHECK(xpt_clock_correct(&one, 5000) == 4700);
  CHECK(xpt_clock_correct(&one, 100) == 0); /* below 0: 0 */
  /* Drift: offset 1000 at t=1e9, 3000 at t=3e9 -> 2000 at 2e9, 0 at 0. */
  struct xpt_clock_fit two = {2, {{1000000000, 1000, 5}, {3000000000, 3000, 5}}};
  CHECK(xpt_clock_correct(&two, 2000000000) == 2000002000);
  CHECK(xpt_clock_correct(&two, 1000000000) == 1000001000);
  CHECK(xpt_clock_correct(&two, 3000000000) == 3000003000);
  CHECK(xpt_clock_correct(&two, 4000000000) == 4000004000); /* extrapolated */
  CHECK(xpt_clock_correct(&two, 500000000) == 500000500);
  /* Clocks of hosts up for 100 days, apart by hours, drifting 50 ppm over
   * a day: no overflow, the exact line. */
  uint64_t day = 86400ull * 1000000000ull, t0 = 100 * day;
  int64_t o0 = -3 * 3600ll * 1000000000ll, o1 = o0 + 4320000000ll; /* +4.32 s over the day */
  struct xpt_clock_fit far = {2, {{t0, o0, 1000}, {t0 + day, o1, 1000}}};
  CHECK(xpt_clock_correct(&far, t0 + day / 2) == (uint64_t)((int64_t)(t0 + day / 2) + o0 +
                                                            2160000000ll));
  /* Both estimates at one time: the first offset. */
  struct xpt_clock_fit same = {2, {{50, 7, 1}, {50, 9, 1}}};
  CHECK(xpt_clock_correct(&same, 1000) == 1007);

  char path[] = "/tmp/xpt-mpi-clock-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  const char text[] = "xptrace-mpi-clock 1\nrank 3\nsize 4\nhost node17\npid 4242\n"
                      "test_offset_ns -5\ninit 100 -20 8\nfinalize 900 -30 6\n";
  CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
  close(fd);
  struct xpt_mpi_clock c;
  CHECK(xpt_mpi_clock_read(path, &c) == 0);
  CHECK(c.rank == 3 && c.size == 4 && c.pid == 4242 && !strcmp(c.host, "node17"));
  CHECK(c.test_offset_ns == -5 && c.fit.n == 2);
  CHECK(c.fit.e[0].local_ns == 100 && c.fit.e[0].offset_ns == -20 && c.fit.e[0].rtt_ns == 8);
  CHECK(c.fit.e[1].local_ns == 900 && c.fit.e[1].offset_ns == -30);
  CHECK(xpt_clock_correct(&c.fit, 500) == 475);
  /* Not one of ours. */
  fd = open(path, O_WRONLY | O_TRUNC);
  CHECK(fd >= 0 && write(fd, "rank 1\n", 7) == 7);
  close(fd);
  CHECK(xpt_mpi_clock_read(path, &c) == -1 && errno == EINVAL);
  unlink(path);
  CHECK(xpt_mpi_clock_find("/nonexistent", 1, &c) == -1 && errno == ENOENT);
}

int main(void) {
  test_flows();
  test_threads();
  test_requests();
  test_clock();
  if (failures) {
    fprintf(stderr, "test_mpi_match: %d failures\n", failures);
    return 1;
  }
  puts("test_mpi_match: OK");
  return 0;
}
