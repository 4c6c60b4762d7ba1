/* xptrace report: reading an output folder or trace into the model,
 * through the shared trace reader (src/trace/pt_read.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "progress.h"
#include "pt_read.h"
#include "report_load.h"

#define FRAMES_MAX 512

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A frame's name: its function, else "mapping+0xoffset", else "?". */
static const char *frame_name(const struct pt_frame *f, char *buf, size_t len) {
  if (f->function[0])
    return f->function;
  if (f->mapping[0]) {
    const char *base = strrchr(f->mapping, '/');
    snprintf(buf, len, "%s+0x%llx", base ? base + 1 : f->mapping, (unsigned long long)f->rel_pc);
    return buf;
  }
  return "?";
}

static void load_sample(struct rp_model *m, struct pt_reader *r, const struct pt_packet *p) {
  static struct pt_frame frames[FRAMES_MAX];
  static char names[FRAMES_MAX][96];
  static struct rp_frame_loc locs[FRAMES_MAX];
  const char *root_first[FRAMES_MAX];
  size_t n = pt_reader_callstack(r, p->seq_id, p->sample.callstack_iid, frames, FRAMES_MAX);
  if (n > FRAMES_MAX) /* the innermost frames are kept */
    n = FRAMES_MAX;
  for (size_t i = 0; i < n; i++) {
    root_first[n - 1 - i] = frame_name(&frames[i], names[i], sizeof names[i]);
    locs[n - 1 - i] = (struct rp_frame_loc){
        frames[i].mapping[0] ? rp_str(&m->s, frames[i].mapping) : 0,
        frames[i].build_id[0] ? rp_str(&m->s, frames[i].build_id) : 0, frames[i].rel_pc};
  }
  rp_sample(m, p->sample.pid, p->sample.tid, p->ts, root_first, locs, n);
}

/* A counter's unit as the table prints it: unit_name, else the enum's. */
static const char *counter_unit(const struct pt_packet *p) {
  static const char *const units[] = {"", "ns", "count", "bytes"};
  if (!p->track.is_counter)
    return "";
  if (p->track.counter_unit_name[0])
    return p->track.counter_unit_name;
  return p->track.counter_unit > 0 && p->track.counter_unit < 4 ? units[p->track.counter_unit]
                                                                   : "";
}

/* Every packet of r into the model; closes r.  `path` names it in
 * messages (NULL: none printed). */
static uint64_t bytes_before; /* of the traces read before: the progress line */

static int load_reader(struct rp_model *m, struct pt_reader *r, const char *path) {
  struct pt_packet p;
  int rc;
  unsigned tick = 0;
  while ((rc = pt_reader_next(r, &p)) > 0) {
    if ((++tick & 4095) == 0)
      progress_set(bytes_before + p.offset);
    switch (p.kind) {
    case PT_PKT_TRACK:
      if (p.track.is_thread)
        rp_track_thread(m, p.track.uuid, p.track.parent_uuid, p.track.pid, p.track.tid,
                        p.track.thread_name[0] ? p.track.thread_name : p.track.name);
      else if (p.track.is_process)
        rp_track_process(m, p.track.uuid, p.track.pid,
                         p.track.process_name[0] ? p.track.process_name : p.track.name);
      else
        rp_track_other(m, p.track.uuid, p.track.parent_uuid, p.track.name, p.track.is_counter,
                       p.track.counter_incremental, counter_unit(&p));
      break;
    case PT_PKT_EVENT:
      /* Off-CPU slices (sample --off-cpu) are blocked time, not traced
       * calls: their time comes from samples_offcpu.folded (load_offcpu) */
      if (!p.event.track || !p.has_ts || strcmp(p.event.category, PT_OFFCPU_CATEGORY) == 0)
        break;
      if (p.event.type == PT_EV_COUNTER || p.event.has_counter)
        rp_counter_value(m, p.event.track, p.ts,
                         p.event.counter_is_double ? p.event.counter_double
                                                   : (double)p.event.counter_int);
      else if (p.event.type == PT_EV_SLICE_BEGIN || p.event.type == PT_EV_SLICE_END ||
               p.event.type == PT_EV_INSTANT)
        rp_event(m, p.event.track, p.ts, (enum rp_ev_type)p.event.type, p.event.name,
                 p.event.category);
      break;
    case PT_PKT_SAMPLE:
      if (p.sample.hz && m->sample_hz && p.sample.hz != m->sample_hz)
        m->sample_hz_mixed = true;
      if (p.sample.hz && !m->sample_hz)
        m->sample_hz = p.sample.hz;
      if (p.has_ts)
        load_sample(m, r, &p);
      break;
    default:
      break;
    }
  }
  if (rc < 0 && path) {
    progress_clear();
    fprintf(stderr, "xptrace: report: %s: %s\n", path, pt_reader_error(r));
  }
  pt_reader_close(r);
  return rc < 0 ? -1 : 0;
}

int rp_load_trace(struct rp_model *m, const char *path) {
  char err[256];
  struct pt_reader *r = pt_reader_open(path, 0, err, sizeof err);
  if (!r) {
    progress_clear();
    fprintf(stderr, "xptrace: report: %s\n", err);
    return -1;
  }
  struct stat st;
  uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
  progress_add_total(size);
  int rc = load_reader(m, r, path);
  bytes_before += size;
  progress_set(bytes_before);
  return rc;
}

int rp_load_mem(struct rp_model *m, const void *data, size_t len) {
  struct pt_reader *r = pt_reader_open_mem(data, len, 0);
  return r ? load_reader(m, r, NULL) : -1;
}

static bool is_merged_name(const char *name) {
  return !strncmp(name, "trace", 5) || !strncmp(name, "merged", 6);
}

/* A trace at a folder's top that no merge wrote (samples, counters). */
static bool top_unmerged(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  return name[0] != '.' && ends_with(name, ".perfetto-trace") && !is_merged_name(name) &&
         (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path &&
         lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Every trace under dir, in name order: the subfolders' (depth first),
 * then, with top_too, dir's own. */
static int load_dir(struct rp_model *m, const char *dir, int depth, bool top_too, size_t *files) {
  if (depth > 16)
    return 0;
  struct dirent **list;
  int n = scandir(dir, &list, NULL, alphasort);
  if (n < 0) {
    progress_clear();
    fprintf(stderr, "xptrace: report: %s: %s\n", dir, strerror(errno));
    return -1;
  }
  int rc = 0;
  /* traces found in the subfolders, and at the top other than merged ones
   * (trace*, merged*): merge took them all in, so those are left out */
  size_t below = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++) {
      if (pass == 1 && i == 0) {
        below = *files;
        for (int j = 0; j < n && !top_too; j++)
          if (top_unmerged(dir, list[j]->d_name))
            below++;
      }
      const char *name = list[i]->d_name;
      char path[4096];
      struct stat st;
      if (name[0] == '.' ||
          (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path ||
          lstat(path, &st) != 0)
        continue;
      if (pass == 0 && S_ISDIR(st.st_mode)) {
        if (load_dir(m, path, depth + 1, true, files) < 0)
          rc = -1;
      } else if (pass == 1 && S_ISREG(st.st_mode) && ends_with(name, ".perfetto-trace")) {
        if (!top_too && below && is_merged_name(name))
          continue; /* a merged trace of the others (a samples trace is read) */
        ++*files;
        if (rp_load_trace(m, path) < 0)
          rc = -1;
      } else if (pass == 1 && S_ISREG(st.st_mode) && ends_with(name, ".xprec")) {
        progress_clear();
        fprintf(stderr,
                "xptrace: report: %s is a recording not finished yet: xptrace finish %s\n", path,
                dir);
      }
    }
  for (int i = 0; i < n; i++)
    free(list[i]);
  free(list);
  return rc;
}

/* The off-CPU profile beside the samples trace (xptrace sample --off-cpu):
 * "[thread];outermost;...;innermost MICROSECONDS" lines, for pprof. */
static void load_offcpu(struct rp_model *m, const char *dir) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/samples_offcpu.folded", dir) >= sizeof path)
    return;
  FILE *f = fopen(path, "re");
  if (!f)
    return;
  char *line = NULL;
  size_t cap = 0;
  const char *frames[FRAMES_MAX];
  while (getline(&line, &cap, f) > 0) {
    char *sp = strrchr(line, ' ');
    if (!sp || line[0] != '[')
      continue;
    *sp = '\0';
    char *end;
    unsigned long long us = strtoull(sp + 1, &end, 10);
    if (end == sp + 1 || us == 0)
      continue;
    char *save = NULL, *thread = strtok_r(line, ";", &save), *tok;
    size_t n = 0;
    while ((tok = strtok_r(NULL, ";", &save)) != NULL && n < FRAMES_MAX)
      if (strcmp(tok, "[truncated]") != 0)
        frames[n++] = tok;
    size_t len = strlen(thread);
    if (len >= 2 && thread[len - 1] == ']')
      thread[len - 1] = '\0';
    rp_offcpu_add(m, thread + 1, frames, n, us);
  }
  free(line);
  fclose(f);
}

int rp_load(struct rp_model *m, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    progress_clear();
    fprintf(stderr, "xptrace: report: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode))
    return rp_load_trace(m, path);
  size_t files = 0;
  /* As `xptrace merge` reads a folder: the traces at its top are merged
   * ones when its subfolders hold traces (the processes are there). */
  int rc = load_dir(m, path, 0, false, &files);
  load_offcpu(m, path);
  if (files == 0) {
    progress_clear();
    fprintf(stderr, "xptrace: report: no .perfetto-trace file in %s\n", path);
    return -1;
  }
  return rc;
}
