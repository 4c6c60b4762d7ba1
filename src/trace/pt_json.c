/* Chrome trace event format (JSON object with a traceEvents array):
 * B/E slices, i instants, X graph nodes, s/f flows, M names. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pt_common.h"
#include "xpt_collector.h"

static uint64_t json_events;
static uint64_t json_edges_emitted;

PT_HIDDEN void pt_json_reset(void);
void pt_json_reset(void) { json_events = json_edges_emitted = 0; }

/* Separator before every event but the first. */
static void json_open(struct pt_buf *b, const char *ph, uint64_t ts, pid_t tid) {
  pt_buf_str(b, json_events++ ? ",\n{" : "\n{");
  pt_buf_printf(b, "\"ph\":\"%s\",\"pid\":%d,\"tid\":%d", ph, (int)pt_proc.pid, (int)tid);
  if (ts != UINT64_MAX)
    pt_buf_printf(b, ",\"ts\":%" PRIu64 ".%03u", ts / 1000, (unsigned)(ts % 1000));
}

static void json_names(struct pt_buf *b, const char *name, const char *cat) {
  pt_buf_str(b, ",\"name\":");
  pt_buf_json_str(b, name);
  if (cat) {
    pt_buf_str(b, ",\"cat\":");
    pt_buf_json_str(b, cat);
  }
}

static void json_args(struct pt_buf *b, const struct pt_args *a) {
  if (!a->n)
    return;
  pt_buf_str(b, ",\"args\":{");
  for (size_t i = 0; i < a->n; i++) {
    if (i)
      pt_buf_str(b, ",");
    pt_buf_json_str(b, a->v[i].name);
    pt_buf_str(b, ":");
    const struct pt_arg *x = &a->v[i];
    switch (x->kind) {
    case PT_ARG_UINT:
      pt_buf_printf(b, "%" PRIu64, x->u);
      break;
    case PT_ARG_INT:
      pt_buf_printf(b, "%" PRId64, x->i);
      break;
    case PT_ARG_DOUBLE:
      if (x->d != x->d || x->d - x->d != 0)
        pt_buf_str(b, "null"); /* NaN and infinities are not JSON */
      else
        pt_buf_printf(b, "%.17g", x->d);
      break;
    case PT_ARG_BOOL:
      pt_buf_str(b, x->u ? "true" : "false");
      break;
    case PT_ARG_STR:
      pt_buf_json_str(b, x->s);
      break;
    }
  }
  pt_buf_str(b, "}");
}

static void json_meta(struct pt_buf *b, const char *what, pid_t tid, const char *name) {
  json_open(b, "M", UINT64_MAX, tid);
  pt_buf_printf(b, ",\"name\":\"%s\",\"args\":{\"name\":", what);
  pt_buf_json_str(b, name);
  pt_buf_str(b, "}}");
}

static void json_begin_file(struct pt_buf *b) {
  json_events = 0;
  json_edges_emitted = 0;
  pt_buf_str(b, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  json_meta(b, "process_name", (pid_t)pt_proc.pid, pt_proc.program);
  /* The main thread is named even when it records nothing itself. */
  struct pt_thread main_thread = {.pid = pt_proc.pid, .tid = pt_proc.pid};
  json_meta(b, "thread_name", (pid_t)pt_proc.pid, pt_thread_name(&main_thread));
}

static void json_thread_record(struct pt_buf *b, struct pt_thread *t, const struct pt_rec *r,
                               uint64_t ts) {
  if (!t->seq.started) {
    pt_seq_reset(&t->seq);
    t->seq.started = true;
    json_meta(b, "thread_name", t->tid, pt_thread_name(t));
  }
  if (pt_flow_fast(r->type))
    return; /* flows are drawn in Perfetto traces only */
  enum pt_kind kind = pt_kind_fast(r->type);
  if (kind == PT_KIND_END) {
    /* Named as its begin: viewers that match ends by name need it (the
     * finisher writes no end without its begin). */
    json_open(b, "E", ts, t->tid);
    if (t->open_n) {
      const struct pt_open_slice *o = &t->open[--t->open_n];
      if (o->name)
        json_names(b, o->name, pt_stream_name(o->stream));
    }
    pt_buf_str(b, "}");
    return;
  }
  char namebuf[PT_NAME_MAX + 1];
  static struct pt_args args; /* the writer is serialised */
  const char *name = pt_rec_name(r, namebuf, sizeof namebuf);
  if (kind == PT_KIND_BEGIN) {
    if (t->open_n == t->open_cap) {
      size_t cap = t->open_cap ? t->open_cap * 2 : 16;
      struct pt_open_slice *o = realloc(t->open, cap * sizeof *o);
      if (o) {
        t->open = o;
        t->open_cap = cap;
      }
    }
    if (t->open_n < t->open_cap)
      t->open[t->open_n++] = (struct pt_open_slice){pt_str_intern(name, strlen(name)), r->stream};
  }
  json_open(b, kind == PT_KIND_BEGIN ? "B" : "i", ts, t->tid);
  if (kind == PT_KIND_INSTANT)
    pt_buf_str(b, ",\"s\":\"t\"");
  json_names(b, name, pt_stream_name(r->stream));
  bool fresh = false;
  struct pt_seen *seen = r->event ? pt_seq_seen(&t->seq, r->event, &fresh) : NULL;
  pt_collect_args(&args, r->event, r->instance, pt_args_wanted(seen, fresh, r->event));
  json_args(b, &args);
  pt_buf_str(b, "}");
}

/* Graph records go on a pseudo thread named "graph"; a linked edge is an
 * instant of its target node at the edge's time (as in pt_proto.c). */
static void json_graph(struct pt_buf *b, struct pt_graph_rec *recs, size_t n) {
  struct pt_graph_links l;
  if (!pt_graph_link(recs, n, &l))
    return;
  pid_t tid = pt_graph_tid();
  if (!json_edges_emitted)
    json_meta(b, "thread_name", tid, "graph");
  static struct pt_args args;
  for (size_t i = 0; i < n; i++) {
    const struct pt_graph_rec *g = &recs[i];
    struct pt_rec r = {.ts = g->ts, .event = g->event, .instance = g->instance, .type = g->type,
                       .stream = g->stream};
    bool edge = g->type == XPTI_TRACE_EDGE_CREATE && l.linked[i];
    const struct pt_graph_rec *target =
        edge ? &recs[pt_graph_node(recs, &l, g->event->target_id)] : NULL;
    if (target) {
      r.event = target->event;
      r.type = target->type;
    }
    char namebuf[PT_NAME_MAX + 1];
    json_open(b, "X", g->ts, tid);
    pt_buf_str(b, ",\"dur\":0");
    json_names(b, pt_rec_name(&r, namebuf, sizeof namebuf), pt_stream_name(g->stream));
    if (target)
      pt_edge_args(&args, g->event, g->instance, target->event);
    else
      pt_collect_args(&args, g->event, g->instance,
                      PT_ARGS_PROPS | (pt_annotate_all ? PT_ARGS_INSTANCE : 0));
    json_args(b, &args);
    pt_buf_str(b, "}");
    for (size_t e = l.out_head[i]; e != SIZE_MAX; e = l.out_next[e]) {
      json_open(b, "s", g->ts, tid);
      pt_buf_printf(b, ",\"name\":\"edge\",\"cat\":\"graph\",\"id\":%" PRIu64 "}",
                    pt_flow_id(e, json_edges_emitted + 1));
    }
    if (edge) {
      json_open(b, "f", g->ts, tid);
      pt_buf_printf(b, ",\"bp\":\"e\",\"name\":\"edge\",\"cat\":\"graph\",\"id\":%" PRIu64 "}",
                    pt_flow_id(i, json_edges_emitted + 1));
    }
  }
  json_edges_emitted += n;
  pt_graph_unlink(&l);
}

static void json_dropped(struct pt_buf *b, uint64_t count, uint64_t ts) {
  json_open(b, "i", ts, (pid_t)pt_proc.pid);
  pt_buf_printf(b,
                ",\"s\":\"p\",\"name\":\"xptrace: dropped events\",\"cat\":\"xptrace\","
                "\"args\":{\"dropped\":%" PRIu64 "}}",
                count);
}

/* Device lanes are pseudo threads; flows bind to the middle of a slice
 * (an end shared with the next slice's begin would be ambiguous). */
static void json_device_lane(struct pt_buf *b, uint32_t track_index, uint32_t lane,
                             const char *name) {
  json_meta(b, "thread_name", pt_lane_tid(track_index, lane), name);
}

static void json_device_slice(struct pt_buf *b, const struct pt_dev_out *s) {
  pid_t tid = pt_lane_tid(s->track_index, s->lane);
  uint64_t dur = s->end - s->begin, mid = s->begin + dur / 2;
  static struct pt_args args; /* the writer is serialised */
  json_open(b, "X", s->begin, tid);
  pt_buf_printf(b, ",\"dur\":%" PRIu64 ".%03u", dur / 1000, (unsigned)(dur % 1000));
  json_names(b, s->name, s->cat);
  pt_collect_args(&args, s->event, s->instance, s->args);
  json_args(b, &args);
  pt_buf_str(b, "}");
  for (size_t i = 0; i < s->n_out; i++) {
    json_open(b, "s", mid, tid);
    pt_buf_printf(b, ",\"name\":\"dependency\",\"cat\":\"device\",\"id\":%" PRIu64 "}",
                  s->flows_out[i]);
  }
  for (size_t i = 0; i < s->n_in; i++) {
    json_open(b, "f", mid, tid);
    pt_buf_printf(b,
                  ",\"bp\":\"e\",\"name\":\"dependency\",\"cat\":\"device\",\"id\":%" PRIu64 "}",
                  s->flows_in[i]);
  }
}

const struct pt_encoder pt_json_encoder = {
    .begin_file = json_begin_file,
    .thread_record = json_thread_record,
    .graph = json_graph,
    .dropped = json_dropped,
    .device_lane = json_device_lane,
    .device_slice = json_device_slice,
    .trailer = "\n]}\n",
};
