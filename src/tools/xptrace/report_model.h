/* xptrace report: what a run recorded, reduced to tables.
 *
 * The loader (report_load.c) feeds a model with what the trace reader
 * decodes: tracks, slice begins/ends, counter values, samples.  The model
 * pairs the slices of each track once everything is in (a trace's
 * packets need not be in time order across sequences), then builds the
 * tables (report_tables.c) that report_output.c prints as text, CSV or
 * JSON.  Single-threaded. */
#ifndef REPORT_MODEL_H
#define REPORT_MODEL_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- strings: interned, ids from 1 (0 = none) ---- */
struct rp_strtab {
  char **str;   /* by id */
  uint32_t n, cap;
  uint32_t *slot; /* open addressing: ids */
  uint32_t slot_cap;
};
uint32_t rp_str(struct rp_strtab *t, const char *s);
static inline const char *rp_str_get(const struct rp_strtab *t, uint32_t id) {
  return id && id <= t->n ? t->str[id - 1] : "";
}

enum rp_track_kind { RP_TRACK_NONE, RP_TRACK_PROCESS, RP_TRACK_THREAD, RP_TRACK_COUNTER,
                     RP_TRACK_OTHER };
struct rp_track {
  uint64_t uuid, parent;
  int32_t pid, tid; /* a thread's; others inherit their process's pid */
  uint32_t name;
  uint8_t kind;
  bool counter_incremental; /* values are deltas to add up */
  uint32_t unit;            /* a counter's unit ("ns", "bytes", "count"; 0: not said) */
};

enum rp_ev_type { RP_BEGIN = 1, RP_END = 2, RP_INSTANT = 3, RP_COUNTER = 4 };
struct rp_ev {
  uint64_t uuid;
  uint64_t ts;
  uint64_t order; /* input order: ties of equal times keep it */
  uint32_t name, cat;
  uint8_t type;
  double value;
};

/* Where a sample's frame is, when the trace says: string ids (mapping 0:
 * none) and the file offset in the mapping. */
struct rp_frame_loc {
  uint32_t mapping, build_id;
  uint64_t rel_pc;
};

/* A call path of the slices on threads (function traces): node 0 is the
 * root; a node is a name under its parent; times in ns. */
struct rp_cnode {
  uint32_t name, parent;
  uint64_t count, total, self;
};

struct rp_sample {
  int32_t pid, tid;
  uint64_t ts;
  uint32_t frames; /* index into the frame pool: root first */
  uint32_t nframes;
};

/* A stack of an output folder's samples_offcpu.folded (xptrace sample
 * --off-cpu): where a thread blocked, for how long. */
struct rp_offcpu {
  uint32_t thread;          /* string: the file's thread frame, brackets off */
  uint32_t frames, nframes; /* in the frame pool, root first */
  uint64_t us;
};

/* ---- aggregates ---- */
struct rp_durs { /* durations, sorted once the model is finished */
  uint64_t *v;
  size_t n, cap;
};
struct rp_point { /* a trace point (name, category) */
  uint32_t name, cat;
  struct rp_durs d;
  uint64_t total; /* outermost calls only: recursion counted once, as uftrace */
  uint64_t self, sum; /* every call's self time, duration */
};
struct rp_device { /* a device command (name) on a queue (track name without " #k") */
  uint32_t name, queue;
  struct rp_durs d;
  uint64_t total;
};
struct rp_func {
  uint32_t name;
  uint64_t self, incl;
};
struct rp_counter { /* one counter track */
  uint32_t name, unit;
  int32_t pid, tid;
  size_t n;
  double first, last, min, max;
};
struct rp_thread {
  int32_t pid, tid;
  uint32_t name;
  uint64_t slices, instants, samples;
  uint64_t busy;        /* time inside top-level slices */
  uint64_t first, last; /* first and last event */
};
struct rp_window { /* the time windows of a process (xptrace run --periods) */
  int32_t pid;
  uint64_t n, total, min, max;
};
/* The stream of the window slices (docs/xptrace.md, --periods). */
#define RP_WINDOWS_STREAM "xptrace.windows"
struct rp_process {
  int32_t pid;
  uint32_t name;
  uint64_t threads, slices, samples, device;
  uint64_t device_time;
  uint64_t first, last;
};

/* What the report is restricted to (--pid, --tid, --filter). */
struct rp_select {
  int32_t pid, tid; /* -1: any */
  bool have_regex;
  regex_t regex;
};

struct rp_model {
  struct rp_strtab s;
  struct rp_track *tracks;
  size_t ntracks, tracks_cap;
  struct rp_ev *ev;
  size_t nev, ev_cap;
  struct rp_sample *samples;
  size_t nsamples, samples_cap;
  /* The rate the trace says its samples were taken at (0: not said);
   * sample_hz_mixed: its sequences said different rates. */
  uint64_t sample_hz;
  bool sample_hz_mixed;
  uint32_t *framepool;
  size_t nframepool, framepool_cap;
  struct rp_frame_loc *locpool; /* parallel to framepool (NULL: no locations given) */
  struct rp_offcpu *offcpu;
  size_t noffcpu, offcpu_cap;
  uint64_t order;
  bool oom;
  /* built by rp_model_finish */
  struct rp_point *points;
  size_t npoints;
  struct rp_device *devices;
  size_t ndevices;
  struct rp_func *funcs;
  size_t nfuncs;
  struct rp_counter *counters;
  size_t ncounters;
  struct rp_thread *threads;
  size_t nthreads;
  struct rp_process *procs;
  size_t nprocs;
  struct rp_cnode *cnodes; /* call paths of the selected thread slices */
  size_t ncnodes, cnodes_cap;
  struct rp_window *windows; /* slices of RP_WINDOWS_STREAM: not trace points */
  size_t nwindows;
  uint64_t total_samples; /* selected */
  uint64_t unmatched_ends; /* ends without a begin */
  uint64_t unclosed;       /* begins never ended */
  uint64_t first_ts, last_ts;
};

void rp_model_init(struct rp_model *m);
void rp_model_free(struct rp_model *m);

/* ---- input (the loader) ---- */
void rp_track_process(struct rp_model *m, uint64_t uuid, int32_t pid, const char *name);
void rp_track_thread(struct rp_model *m, uint64_t uuid, uint64_t parent, int32_t pid, int32_t tid,
                     const char *name);
/* Any other track: a device lane, the graph, a counter (counter: true). */
void rp_track_other(struct rp_model *m, uint64_t uuid, uint64_t parent, const char *name,
                    bool counter, bool incremental, const char *unit);
/* A TrackEvent on a track: RP_BEGIN/END/INSTANT (name, cat may be NULL). */
void rp_event(struct rp_model *m, uint64_t uuid, uint64_t ts, enum rp_ev_type type,
              const char *name, const char *cat);
void rp_counter_value(struct rp_model *m, uint64_t uuid, uint64_t ts, double value);
/* A sample of thread tid: function names, root (outermost) first, and
 * where each frame is (NULL: unknown). */
void rp_sample(struct rp_model *m, int32_t pid, int32_t tid, uint64_t ts,
               const char *const *frames, const struct rp_frame_loc *locs, size_t nframes);
void rp_offcpu_add(struct rp_model *m, const char *thread, const char *const *frames, size_t nframes,
                   uint64_t us);

/* Pair the slices, aggregate what `sel` selects.  False when out of
 * memory. */
bool rp_model_finish(struct rp_model *m, const struct rp_select *sel);
/* Percentile p (0..100) of sorted durations: nearest rank. */
uint64_t rp_percentile(const struct rp_durs *d, double p);
bool rp_select_name(const struct rp_select *sel, const char *name);
/* The track a uuid names (NULL when unknown). */
const struct rp_track *rp_track_find(const struct rp_model *m, uint64_t uuid);

#endif /* REPORT_MODEL_H */
