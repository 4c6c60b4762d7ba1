/* What a Perfetto packet holds, decoded for the trace reader
 * (pt_read.h): interned data, clock snapshots, sequence defaults,
 * timestamps, track events, track descriptors, perf samples.  Field
 * numbers are the Perfetto format's, as in pt_proto.c. */
#include <stdlib.h>
#include <string.h>

#include "pt_read_internal.h"

/* The sequence clock `id` (64..127); NULL when unknown and not `make`,
 * or out of memory. */
static struct seq_clock *seq_clock(struct seq *s, uint32_t id, bool make) {
  uint32_t i = id - 64;
  if (i < s->nclocks)
    return &s->clocks[i];
  if (!make)
    return NULL;
  struct seq_clock *c = realloc(s->clocks, (i + 1) * sizeof *c);
  if (!c)
    return NULL;
  memset(c + s->nclocks, 0, (i + 1 - s->nclocks) * sizeof *c);
  s->clocks = c;
  s->nclocks = i + 1;
  return &c[i];
}

/* ---- decoding ----------------------------------------------------------- */
PT_READ_HIDDEN struct seq *rd_seq(struct pt_reader *r, uint32_t id) {
  void **slot = rd_map_slot(&r->seqs, id, true);
  if (!slot)
    return NULL;
  if (!*slot)
    *slot = calloc(1, sizeof(struct seq));
  return *slot;
}

static char *scratch_str(struct pt_reader *r, const uint8_t *p, size_t n) {
  if (r->scratch_len + n + 1 > r->scratch_cap)
    return NULL; /* sized at the packet's start: cannot happen */
  char *s = r->scratch + r->scratch_len;
  memcpy(s, p, n);
  s[n] = '\0';
  r->scratch_len += n + 1;
  return s;
}

PT_READ_HIDDEN struct ient *rd_intern_get(struct seq *s, unsigned table, uint64_t iid) {
  return s ? rd_map_get(&s->interned, (uint64_t)table << 56 ^ iid) : NULL;
}
PT_READ_HIDDEN const char *rd_intern_str(struct seq *s, unsigned table, uint64_t iid) {
  struct ient *e = rd_intern_get(s, table, iid);
  return e && e->str ? e->str : "";
}

static int rd_list(const struct pt_pb_field *f, uint64_t **list, size_t *n) {
  /* repeated uint64: one varint, or packed */
  size_t add = 1;
  if (f->wire == 2) {
    add = 0;
    for (size_t i = 0; i < f->len; i++)
      add += !(f->p[i] & 0x80);
  } else if (f->wire != 0) {
    return 0;
  }
  if (*n + add > PT_MAX_FRAMES)
    return 0;
  uint64_t *l = realloc(*list, (*n + add + 1) * sizeof *l);
  if (!l)
    return -1;
  *list = l;
  if (f->wire == 0) {
    l[(*n)++] = f->v;
    return 0;
  }
  const uint8_t *p = f->p, *end = f->p + f->len;
  uint64_t v;
  while (p < end && !rd_varint(&p, end, &v))
    l[(*n)++] = v;
  return 0;
}

PT_READ_HIDDEN int rd_interned(struct pt_reader *r, struct seq *s, const uint8_t *p, const uint8_t *end) {
  struct pt_pb_field f, g;
  int rc;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    unsigned t = f.num;
    if (f.wire != 2 || t > 31)
      continue;
    struct ient e = {0};
    uint64_t iid = 0;
    const uint8_t *q = f.p, *qend = f.p + f.len;
    int rc2;
    while ((rc2 = pt_pb_next_fast(&q, qend, &g)) > 0) {
      if (g.num == 1 && g.wire == 0) {
        iid = g.v;
      } else if (g.num == 2 && g.wire == 2 &&
                 (t == IN_CATEGORY || t == IN_EVENT_NAME || t == IN_ANNOT_NAME || t == IN_FUNCTION ||
                  t == IN_BUILD_ID || t == IN_MAPPING_PATH)) {
        free(e.str);
        e.str = strndup((const char *)g.p, g.len);
        if (!e.str)
          return -1;
      } else if (t == IN_FRAME && g.wire == 0 && g.num >= 2 && g.num <= 4) {
        *(g.num == 2 ? &e.a : g.num == 3 ? &e.b : &e.c) = g.v;
      } else if ((t == IN_CALLSTACK && g.num == 2) || (t == IN_MAPPING && g.num == 7)) {
        if (rd_list(&g, &e.list, &e.nlist))
          return -1;
      } else if (t == IN_MAPPING && g.num == 2 && g.wire == 0) {
        e.a = g.v;
      }
    }
    if (rc2 < 0) {
      free(e.str);
      free(e.list);
      return -2;
    }
    void **slot = rd_map_slot(&s->interned, (uint64_t)t << 56 ^ iid, true);
    struct ient *n = slot ? (*slot ? *slot : malloc(sizeof *n)) : NULL;
    if (!n) {
      free(e.str);
      free(e.list);
      return -1;
    }
    if (*slot) {
      free(n->str);
      free(n->list);
    }
    *n = e;
    *slot = n;
  }
  (void)r;
  return rc < 0 ? -2 : 0;
}

static uint32_t clock_anchor_prefer(const struct pt_read_clock *c, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (c[i].id == PT_CLOCK_MONOTONIC)
      return PT_CLOCK_MONOTONIC;
  for (size_t i = 0; i < n; i++)
    if (c[i].id < 64)
      return c[i].id;
  return 0;
}

PT_READ_HIDDEN int rd_clock_snapshot(struct pt_reader *r, struct seq *s, const uint8_t *p,
                             const uint8_t *end, struct pt_packet *pkt) {
  struct pt_pb_field f, g;
  size_t n = 0;
  uint32_t primary = 0;
  int rc;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    if (f.num == 2 && f.wire == 0) {
      primary = (uint32_t)f.v;
    } else if (f.num == 1 && f.wire == 2 && n < 32) {
      struct pt_read_clock c = {0};
      const uint8_t *q = f.p;
      int rc2;
      while ((rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0) {
        if (g.num == 1 && g.wire == 0)
          c.id = (uint32_t)g.v;
        else if (g.num == 2 && g.wire == 0)
          c.ts = g.v;
        else if (g.num == 3 && g.wire == 0)
          c.incremental = g.v != 0;
      }
      if (rc2 < 0)
        return -2;
      r->clocks[n++] = c;
    }
  }
  if (rc < 0)
    return -2;
  if (primary)
    r->primary = primary;
  uint32_t anchor = clock_anchor_prefer(r->clocks, n);
  uint64_t anchor_ts = 0;
  for (size_t i = 0; i < n; i++)
    if (r->clocks[i].id == anchor)
      anchor_ts = r->clocks[i].ts;
  uint64_t primary_ts = 0;
  bool have_primary = false;
  for (size_t i = 0; i < n; i++)
    if (r->clocks[i].id == r->primary) {
      primary_ts = r->clocks[i].ts;
      have_primary = true;
    }
  for (size_t i = 0; i < n; i++) {
    const struct pt_read_clock *c = &r->clocks[i];
    struct seq_clock *sc = NULL;
    if (c->id >= 64 && c->id < 128 && s && anchor && (sc = seq_clock(s, c->id, true))) {
      sc->known = true;
      sc->incremental = c->incremental;
      sc->last = c->ts;
      sc->anchor = anchor;
      sc->anchor_diff = (int64_t)(anchor_ts - c->ts);
    } else if (c->id < 64 && have_primary) {
      r->global_known[c->id] = true;
      r->global_to_primary[c->id] = (int64_t)(primary_ts - c->ts);
    }
  }
  pkt->clock.clocks = r->clocks;
  pkt->clock.n = n;
  pkt->clock.primary = primary;
  return 0;
}

/* PerfSampleDefaults: its timebase's frequency (2), or 1 s over its
 * period (1) of the CPU clock (counter 1 or 3, or none: the default). */
static int rd_timebase_hz(const uint8_t *p, const uint8_t *end, uint64_t *hz) {
  struct pt_pb_field f, g;
  int rc, rc2 = 0;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    if (f.num != 1 || f.wire != 2)
      continue;
    uint64_t freq = 0, period = 0, counter = 0;
    const uint8_t *q = f.p;
    while ((rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0) {
      if (g.wire != 0)
        continue;
      if (g.num == 2)
        freq = g.v;
      else if (g.num == 1)
        period = g.v;
      else if (g.num == 4)
        counter = g.v;
    }
    if (rc2 < 0)
      return -1;
    *hz = freq ? freq : period && (counter == 0 || counter == 1 || counter == 3) ? 1000000000u / period : 0;
  }
  return rc < 0 ? -1 : 0;
}

PT_READ_HIDDEN int rd_defaults(struct seq *s, const uint8_t *p, const uint8_t *end) {
  struct pt_pb_field f, g;
  int rc;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    if (f.num == 58 && f.wire == 0) {
      s->default_clock = (uint32_t)f.v;
    } else if (f.num == 11 && f.wire == 2) {
      const uint8_t *q = f.p;
      int rc2;
      while ((rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0)
        if (g.num == 11 && g.wire == 0)
          s->default_track = g.v;
      if (rc2 < 0)
        return -2;
    } else if (f.num == 12 && f.wire == 2) { /* perf_sample_defaults */
      uint64_t hz = 0;
      if (rd_timebase_hz(f.p, f.p + f.len, &hz) < 0)
        return -2;
      s->sample_hz = hz;
    }
  }
  return rc < 0 ? -2 : 0;
}

/* The packet's time on a global clock, the primary one when known. */
PT_READ_HIDDEN void rd_resolve_ts(struct pt_reader *r, struct seq *s, uint64_t raw, uint32_t clock,
                          struct pt_packet *pkt) {
  pkt->has_ts = true;
  pkt->ts_clock = clock;
  uint64_t v = raw;
  if (clock >= 64 && clock < 128) {
    struct seq_clock *sc = s ? seq_clock(s, clock, false) : NULL;
    if (!sc || !sc->known) {
      pkt->ts = raw;
      pkt->clock_id = clock; /* no snapshot: left as written */
      return;
    }
    if (sc->incremental) {
      v = sc->last += raw;
      pkt->ts_incremental = true;
    }
    v += (uint64_t)sc->anchor_diff;
    clock = sc->anchor;
  }
  if (clock != r->primary && clock < 64 && r->global_known[clock]) {
    v += (uint64_t)r->global_to_primary[clock];
    clock = r->primary;
  }
  pkt->ts = v;
  pkt->clock_id = clock;
}

static int rd_annotation(struct pt_reader *r, struct seq *s, const struct pt_pb_field *f,
                         struct pt_annot *a) {
  struct pt_pb_field g;
  const uint8_t *q = f->p;
  int rc;
  memset(a, 0, sizeof *a);
  a->name = "";
  a->s = "";
  a->kind = PT_AN_OTHER;
  while ((rc = pt_pb_next_fast(&q, f->p + f->len, &g)) > 0) {
    switch (g.num) {
    case 1: a->name = rd_intern_str(s, IN_ANNOT_NAME, g.v); break;
    case 10: if (g.wire == 2) a->name = scratch_str(r, g.p, g.len); break;
    case 2: a->kind = PT_AN_BOOL; a->u = g.v != 0; break;
    case 3: a->kind = PT_AN_UINT; a->u = g.v; break;
    case 4: a->kind = PT_AN_INT; a->i = (int64_t)g.v; break;
    case 5: a->kind = PT_AN_DOUBLE; memcpy(&a->d, &g.v, sizeof a->d); break;
    case 6:
      if (g.wire == 2) {
        a->kind = PT_AN_STRING;
        a->s = scratch_str(r, g.p, g.len);
      }
      break;
    default: break;
    }
  }
  if (!a->name)
    a->name = "";
  if (!a->s)
    a->s = "";
  return rc < 0 ? -2 : 0;
}

static int rd_push_flow(struct pt_reader *r, uint64_t v) {
  if (r->n_flows_total == r->flows_cap) {
    size_t cap = r->flows_cap ? r->flows_cap * 2 : 16;
    uint64_t *p = realloc(r->flows, cap * sizeof *p);
    if (!p)
      return -1;
    r->flows = p;
    r->flows_cap = cap;
  }
  r->flows[r->n_flows_total++] = v;
  return 0;
}

PT_READ_HIDDEN int rd_event(struct pt_reader *r, struct seq *s, const uint8_t *p, const uint8_t *end,
                    struct pt_packet *pkt) {
  struct pt_pb_field f;
  int rc;
  size_t n_annots = 0;
  /* flows first into one array: begun ids, then terminating ones */
  size_t n_flow = 0, n_term = 0;
  r->n_flows_total = 0;
  pkt->event.name = pkt->event.category = "";
  pkt->event.track = s ? s->default_track : 0;
  const uint8_t *start = p;
  for (int pass = 0; pass < 2; pass++) {
    p = start;
    while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
      if (pass == 1) {
        if (f.num == 48 && f.wire == 1 && rd_push_flow(r, f.v) == 0)
          n_term++;
        continue;
      }
      switch (f.num) {
      case 9: pkt->event.type = (int)f.v; break;
      case 11: pkt->event.track = f.v; break;
      case 10: pkt->event.name = rd_intern_str(s, IN_EVENT_NAME, f.v); break;
      case 23:
        if (f.wire == 2)
          pkt->event.name = scratch_str(r, f.p, f.len);
        break;
      case 3:
        if (!pkt->event.category[0])
          pkt->event.category = rd_intern_str(s, IN_CATEGORY, f.v);
        break;
      case 22:
        if (f.wire == 2 && !pkt->event.category[0])
          pkt->event.category = scratch_str(r, f.p, f.len);
        break;
      case 4:
        if (f.wire != 2)
          break;
        if (n_annots == r->annots_cap) {
          size_t cap = r->annots_cap ? r->annots_cap * 2 : 16;
          struct pt_annot *a = realloc(r->annots, cap * sizeof *a);
          if (!a)
            return -1;
          r->annots = a;
          r->annots_cap = cap;
        }
        if (rd_annotation(r, s, &f, &r->annots[n_annots]))
          return -2;
        n_annots++;
        break;
      case 47:
        if (f.wire == 1 && rd_push_flow(r, f.v) == 0)
          n_flow++;
        break;
      case 30:
        pkt->event.has_counter = true;
        pkt->event.counter_int = (int64_t)f.v;
        break;
      case 44:
        pkt->event.has_counter = pkt->event.counter_is_double = true;
        memcpy(&pkt->event.counter_double, &f.v, sizeof(double));
        break;
      default: break;
      }
    }
    if (rc < 0)
      return -2;
  }
  if (!pkt->event.name)
    pkt->event.name = "";
  if (!pkt->event.category)
    pkt->event.category = "";
  pkt->event.annots = r->annots;
  pkt->event.n_annots = n_annots;
  pkt->event.flow_ids = r->flows;
  pkt->event.n_flows = n_flow;
  pkt->event.terminating_flow_ids = r->flows ? r->flows + n_flow : NULL; /* no flow yet: NULL */
  pkt->event.n_terminating = n_term;
  return 0;
}

PT_READ_HIDDEN int rd_track(struct pt_reader *r, const uint8_t *p, const uint8_t *end,
                    struct pt_packet *pkt) {
  struct pt_pb_field f, g;
  int rc, rc2 = 0;
  const char *name = NULL;
  pkt->track.process_name = pkt->track.thread_name = pkt->track.counter_unit_name = "";
  pkt->track.counter_unit = 0;
  pkt->track.counter_incremental = false;
  pkt->track.labels = r->labels;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    switch (f.num) {
    case 1: pkt->track.uuid = f.v; break;
    case 5: pkt->track.parent_uuid = f.v; break;
    case 2:
    case 10:
      if (f.wire == 2)
        name = scratch_str(r, f.p, f.len);
      break;
    case 8: /* CounterDescriptor: unit 3, is_incremental 5, unit_name 6 */
      pkt->track.is_counter = true;
      for (const uint8_t *q = f.p; f.wire == 2 && (rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0;) {
        if (g.num == 3 && g.wire == 0)
          pkt->track.counter_unit = (int)g.v;
        else if (g.num == 5 && g.wire == 0)
          pkt->track.counter_incremental = g.v != 0;
        else if (g.num == 6 && g.wire == 2)
          pkt->track.counter_unit_name = scratch_str(r, g.p, g.len);
      }
      if (rc2 < 0)
        return -2;
      break;
    case 3:
    case 4:
      if (f.wire != 2)
        break;
      if (f.num == 3)
        pkt->track.is_process = true;
      else
        pkt->track.is_thread = true;
      for (const uint8_t *q = f.p; (rc2 = pt_pb_next_fast(&q, f.p + f.len, &g)) > 0;) {
        if (g.num == 1 && g.wire == 0)
          pkt->track.pid = (int32_t)g.v;
        else if (f.num == 4 && g.num == 2 && g.wire == 0)
          pkt->track.tid = (int32_t)g.v;
        else if (f.num == 3 && g.num == 6 && g.wire == 2)
          pkt->track.process_name = scratch_str(r, g.p, g.len);
        else if (f.num == 4 && g.num == 5 && g.wire == 2)
          pkt->track.thread_name = scratch_str(r, g.p, g.len);
        else if (f.num == 3 && g.num == 8 && g.wire == 2 && pkt->track.n_labels < 16)
          r->labels[pkt->track.n_labels++] = scratch_str(r, g.p, g.len);
      }
      if (rc2 < 0)
        return -2;
      break;
    default: break;
    }
  }
  if (rc < 0)
    return -2;
  if (!name || !*name)
    name = pkt->track.is_thread ? pkt->track.thread_name : pkt->track.process_name;
  pkt->track.name = name ? name : "";
  /* Remember it for pt_reader_track (tracks are few: bounded by them). */
  void **slot = rd_map_slot(&r->tracks, pkt->track.uuid, true);
  if (!slot)
    return -1;
  struct track_ent *t = *slot ? *slot : calloc(1, sizeof *t);
  if (!t)
    return -1;
  *slot = t;
  char *copy = strdup(pkt->track.name);
  if (copy) {
    free(t->name);
    t->name = copy;
  }
  t->info.uuid = pkt->track.uuid;
  t->info.parent_uuid = pkt->track.parent_uuid;
  t->info.pid = pkt->track.pid;
  t->info.tid = pkt->track.is_thread ? pkt->track.tid : 0;
  t->info.is_process = pkt->track.is_process;
  t->info.is_counter = pkt->track.is_counter;
  t->info.name = t->name ? t->name : "";
  return 0;
}

PT_READ_HIDDEN int rd_sample(const uint8_t *p, const uint8_t *end, struct pt_packet *pkt) {
  struct pt_pb_field f;
  int rc;
  while ((rc = pt_pb_next_fast(&p, end, &f)) > 0) {
    if (f.wire != 0)
      continue;
    switch (f.num) {
    case 1: pkt->sample.cpu = (uint32_t)f.v; break;
    case 2: pkt->sample.pid = (int32_t)f.v; break;
    case 3: pkt->sample.tid = (int32_t)f.v; break;
    case 4: pkt->sample.callstack_iid = f.v; break;
    default: break;
    }
  }
  return rc < 0 ? -2 : 0;
}
