/* The Perfetto trace reader (src/trace/pt_read.c) and the merge that
 * rewrites what it reads (pt_merge.c): any bytes, never a crash, every
 * string it hands out readable, and the merge's output a trace the
 * reader reads back whole. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pt_merge.h"
#include "pt_read.h"

static size_t touch(const char *s) { return s ? strlen(s) : 0; }

static void read_all(const uint8_t *data, size_t size, unsigned flags) {
  struct pt_reader *r = pt_reader_open_mem(data, size, flags);
  if (!r)
    return;
  struct pt_packet p;
  struct pt_frame frames[8];
  size_t sum = 0;
  while (pt_reader_next(r, &p) > 0) {
    if (p.kind == PT_PKT_EVENT) {
      sum += touch(p.event.name) + touch(p.event.category);
      for (size_t i = 0; i < p.event.n_annots; i++)
        sum += touch(p.event.annots[i].name) + touch(p.event.annots[i].s);
      for (size_t i = 0; i < p.event.n_flows + p.event.n_terminating; i++)
        sum += (size_t)p.event.flow_ids[i];
      const struct pt_track_info *t = pt_reader_track(r, p.event.track);
      if (t)
        sum += touch(t->name);
    } else if (p.kind == PT_PKT_TRACK) {
      sum += touch(p.track.name) + touch(p.track.process_name) + touch(p.track.thread_name);
      for (size_t i = 0; i < p.track.n_labels; i++)
        sum += touch(p.track.labels[i]);
    } else if (p.kind == PT_PKT_SAMPLE) {
      size_t n = pt_reader_callstack(r, p.seq_id, p.sample.callstack_iid, frames, 8);
      for (size_t i = 0; i < n && i < 8; i++)
        sum += touch(frames[i].function) + touch(frames[i].mapping) + touch(frames[i].build_id);
    }
  }
  (void)pt_reader_error(r);
  pt_reader_close(r);
  if (sum == 1)
    fputc(0, stderr); /* keeps the reads */
}

static void no_warn(void *ctx, const char *line) {
  (void)ctx;
  (void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  read_all(data, size, 0);
  read_all(data, size, PT_READ_RAW);
  /* the merge reads files: the input through a memfd */
  int in = memfd_create("fuzz_in", MFD_CLOEXEC), out = memfd_create("fuzz_out", MFD_CLOEXEC);
  if (in < 0 || out < 0 || write(in, data, size) != (ssize_t)size) {
    if (in >= 0)
      close(in);
    if (out >= 0)
      close(out);
    return 0;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", in);
  struct pt_merge_input inputs[2] = {{path, "/a", 0, false}, {path, "/b", 1, false}};
  struct pt_merge_opts o = {.warn = no_warn};
  struct pt_merge_stats st;
  if (pt_merge(inputs, 2, out, &o, &st) >= 0) {
    off_t len = lseek(out, 0, SEEK_END);
    uint8_t *merged = len > 0 ? malloc((size_t)len) : NULL;
    if (merged && pread(out, merged, (size_t)len, 0) == len) {
      struct pt_reader *r = pt_reader_open_mem(merged, (size_t)len, PT_READ_RAW);
      struct pt_packet p;
      int rc = 0;
      uint64_t n = 0;
      while (r && (rc = pt_reader_next(r, &p)) > 0)
        n++;
      if (r && rc < 0)
        abort(); /* the merge wrote a trace it cannot read back */
      if (n != st.packets + 1)
        abort(); /* every packet merged, plus the merge's own */
      pt_reader_close(r);
    }
    free(merged);
  }
  close(in);
  close(out);
  return 0;
}
