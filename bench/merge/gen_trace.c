/* gen_trace OUT PID THREADS EVENTS [FLOWS]: writes a trace shaped like the
 * collector's (src/trace/pt_proto.c): the writer's sequence (clocks,
 * process track), one sequence per thread (defaults, incremental clock,
 * thread track, interned names), EVENTS begin/end events per thread,
 * ~100 ns apart, and FLOWS flows from thread 0 to the last thread.  For
 * the merge benchmark and the merge memory test: inputs of any size
 * without running a program that long. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pt_internal.h"

static int out_fd;
static void flush(struct pt_buf *b, size_t at_least) {
  if (b->len < at_least)
    return;
  if (write(out_fd, b->data, b->len) != (ssize_t)b->len) {
    perror("gen_trace: write");
    exit(1);
  }
  b->len = 0;
}

static void clock_entry(struct pt_buf *b, uint32_t id, uint64_t ts, bool inc) {
  size_t c = pb_open(b, 1);
  pb_uint(b, 1, id);
  pb_uint(b, 2, ts);
  if (inc)
    pb_uint(b, 3, 1);
  pb_close(b, c);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: gen_trace OUT PID THREADS EVENTS [FLOWS]\n");
    return 2;
  }
  uint32_t pid = (uint32_t)atoi(argv[2]);
  unsigned threads = (unsigned)atoi(argv[3]);
  uint64_t events = strtoull(argv[4], NULL, 10);
  unsigned flows = argc > 5 ? (unsigned)atoi(argv[5]) : 0;
  out_fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out_fd < 0 || threads == 0 || pid == 0) {
    perror("gen_trace");
    return 1;
  }
  struct pt_buf b = {0};
  uint64_t t0 = 1000000000ull;
  uint64_t proc = (uint64_t)pid << 32;
  /* writer sequence */
  size_t p = pb_open(&b, 1);
  pb_uint(&b, 8, t0);
  pb_uint(&b, 58, 3);
  pb_uint(&b, 10, 1);
  pb_uint(&b, 13, 1);
  size_t cs = pb_open(&b, 6);
  clock_entry(&b, 6, t0 + 5, false);
  clock_entry(&b, 3, t0, false);
  pb_uint(&b, 2, 3);
  pb_close(&b, cs);
  pb_close(&b, p);
  p = pb_open(&b, 1);
  pb_uint(&b, 10, 1);
  size_t td = pb_open(&b, 60);
  pb_uint(&b, 1, proc);
  size_t pd = pb_open(&b, 3);
  pb_uint(&b, 1, pid);
  pb_string(&b, 6, "gen_trace");
  pb_close(&b, pd);
  pb_close(&b, td);
  pb_close(&b, p);
  for (unsigned t = 0; t < threads; t++) {
    uint32_t seq = 2 + t, tid = pid + t;
    uint64_t ts = t0 + 1000;
    p = pb_open(&b, 1);
    pb_uint(&b, 8, ts);
    pb_uint(&b, 58, 3);
    pb_uint(&b, 10, seq);
    pb_uint(&b, 13, 1);
    size_t d = pb_open(&b, 59);
    pb_uint(&b, 58, 64);
    size_t ted = pb_open(&b, 11);
    pb_uint(&b, 11, proc | tid);
    pb_close(&b, ted);
    pb_close(&b, d);
    cs = pb_open(&b, 6);
    clock_entry(&b, 64, ts, true);
    clock_entry(&b, 3, ts, false);
    pb_close(&b, cs);
    pb_close(&b, p);
    p = pb_open(&b, 1);
    pb_uint(&b, 10, seq);
    td = pb_open(&b, 60);
    pb_uint(&b, 1, proc | tid);
    pb_uint(&b, 5, proc);
    size_t th = pb_open(&b, 4);
    pb_uint(&b, 1, pid);
    pb_uint(&b, 2, tid);
    pb_string(&b, 5, t ? "worker" : "gen_trace");
    pb_close(&b, th);
    pb_close(&b, td);
    pb_close(&b, p);
    for (uint64_t e = 0; e < events; e++) {
      bool begin = !(e & 1);
      unsigned flow = (unsigned)(e / 2);
      bool has_flow = begin && flow < flows && (t == 0 || t == threads - 1) && threads > 1;
      p = pb_open(&b, 1);
      pb_uint(&b, 8, 100 + (e % 7)); /* delta on the incremental clock */
      pb_uint(&b, 10, seq);
      if (e == 0) {
        size_t in = pb_open(&b, 12);
        size_t en = pb_open(&b, 2);
        pb_uint(&b, 1, 1);
        pb_string(&b, 2, "work");
        pb_close(&b, en);
        en = pb_open(&b, 1);
        pb_uint(&b, 1, 1);
        pb_string(&b, 2, "bench");
        pb_close(&b, en);
        pb_close(&b, in);
      }
      size_t te = pb_open(&b, 11);
      pb_uint(&b, 9, begin ? 1 : 2);
      if (begin) {
        pb_uint(&b, 10, 1);
        pb_uint(&b, 3, 1);
      }
      if (has_flow)
        pb_fixed64(&b, t == 0 ? 47 : 48, proc | (flow + 1));
      pb_close(&b, te);
      pb_close(&b, p);
      flush(&b, 1 << 20);
    }
  }
  flush(&b, 1);
  free(b.data);
  return close(out_fd) == 0 ? 0 : 1;
}
