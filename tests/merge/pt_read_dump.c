/* pt_read_dump TRACE: what the streaming reader (src/trace/pt_read.c)
 * finds in a trace, one line of counts, for the merge tests to compare
 * with the inputs and with check_trace.py:
 *   packets=N begins=N ends=N instants=N counters=N tracks=N processes=N
 *   threads=N samples=N frames=N flows=N first_ts=N last_ts=N
 * first_ts/last_ts: the resolved times (MONOTONIC ns) of the first and
 * last track events.  Exit 1 with the reader's error on a bad trace. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pt_read.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: pt_read_dump TRACE\n");
    return 2;
  }
  char err[512];
  struct pt_reader *r = pt_reader_open(argv[1], 0, err, sizeof err);
  if (!r) {
    fprintf(stderr, "pt_read_dump: %s\n", err);
    return 1;
  }
  uint64_t begins = 0, ends = 0, instants = 0, counters = 0, tracks = 0, processes = 0;
  uint64_t threads = 0, samples = 0, frames = 0, flows = 0, first = 0, last = 0;
  struct pt_packet p;
  struct pt_frame fr[64];
  int rc;
  while ((rc = pt_reader_next(r, &p)) > 0) {
    if (p.kind == PT_PKT_EVENT) {
      begins += p.event.type == PT_EV_SLICE_BEGIN;
      ends += p.event.type == PT_EV_SLICE_END;
      instants += p.event.type == PT_EV_INSTANT;
      counters += p.event.has_counter;
      flows += p.event.n_flows;
      if (p.has_ts) {
        if (!first)
          first = p.ts;
        last = p.ts;
      }
    } else if (p.kind == PT_PKT_TRACK) {
      tracks++;
      processes += p.track.is_process;
      threads += p.track.is_thread;
    } else if (p.kind == PT_PKT_SAMPLE) {
      samples++;
      frames += pt_reader_callstack(r, p.seq_id, p.sample.callstack_iid, fr, 64);
    }
  }
  if (rc < 0) {
    fprintf(stderr, "pt_read_dump: %s: %s\n", argv[1], pt_reader_error(r));
    pt_reader_close(r);
    return 1;
  }
  printf("packets=%" PRIu64 " begins=%" PRIu64 " ends=%" PRIu64 " instants=%" PRIu64
         " counters=%" PRIu64 " tracks=%" PRIu64 " processes=%" PRIu64 " threads=%" PRIu64
         " samples=%" PRIu64 " frames=%" PRIu64 " flows=%" PRIu64 " first_ts=%" PRIu64
         " last_ts=%" PRIu64 "\n",
         pt_reader_packets(r), begins, ends, instants, counters, tracks, processes, threads,
         samples, frames, flows, first, last);
  pt_reader_close(r);
  return 0;
}
