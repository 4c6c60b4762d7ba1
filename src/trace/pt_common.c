/* What the two encoders share: record classification, names, the string
 * table, and the debug annotations of an event. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pt_common.h"
#include "xpt_collector.h"
#include "xptrace/xptrace_protocol.h"

/* A flow mark of xptrace_protocol.h: 1 out, 2 in, else 0. */
int pt_flow_kind(uint16_t type) {
  if (!(type & XPTI_TRACE_USER_DEFINED) || !pt_proc.tool_names)
    return 0;
  const char *tool = pt_proc.tool_names + (size_t)XPTI_TOOL_ID(type) * XPT_REC_NAME_LEN;
  if (strncmp(tool, XPTRACE_TOOL_NAME, XPT_REC_NAME_LEN) != 0)
    return 0;
  uint16_t id = (uint16_t)XPTI_EXTRACT_USER_DEFINED_ID(type);
  return id == XPTRACE_FLOW_OUT_ID ? 1 : id == XPTRACE_FLOW_IN_ID ? 2 : 0;
}

enum pt_kind pt_kind_of(uint16_t type) {
  if (pt_flow_kind(type))
    return PT_KIND_INSTANT; /* never a slice of its own */
  switch (type) {
  case XPTI_TRACE_GRAPH_CREATE:
  case XPTI_TRACE_NODE_CREATE:
  case XPTI_TRACE_EDGE_CREATE:
    return PT_KIND_GRAPH;
  case XPTI_TRACE_SIGNAL:
  case XPTI_TRACE_METADATA:
  case XPTI_TRACE_DIAGNOSTICS:
    return PT_KIND_INSTANT;
  default:
    break;
  }
  /* Known begin types and their ends, and every user-defined type, make
   * slices; other odd types (offload_alloc_*, queue_destroy) are not ends. */
  uint16_t begin = type & (uint16_t)~1u;
  if (!(type & XPTI_TRACE_USER_DEFINED) &&
      (begin < XPTI_TRACE_REGION_BEGIN || begin > XPTI_TRACE_MEM_RELEASE_BEGIN ||
       begin == XPTI_TRACE_SIGNAL || begin == XPTI_TRACE_METADATA))
    return PT_KIND_INSTANT;
  return (type & 1) ? PT_KIND_END : PT_KIND_BEGIN;
}

uint8_t pt_kind_table[65536];

uint8_t pt_kind_fill(uint16_t type) {
  return pt_kind_table[type] =
             (uint8_t)(0x80u | (unsigned)pt_kind_of(type) | (unsigned)pt_flow_kind(type) << 2);
}

void pt_kind_reset(void) { memset(pt_kind_table, 0, sizeof pt_kind_table); }

const char *pt_rec_name(const struct pt_rec *r, char *buf, size_t buflen) {
  if (r->event) {
    const xpti_payload_t *p = r->event->reserved.payload;
    if (p && p->name && *p->name)
      return p->name;
  }
  if (r->name_len && r->pad == PT_INLINE_NAME) {
    size_t n = r->name_len < buflen - 1 ? r->name_len : buflen - 1;
    memcpy(buf, r + 1, n);
    buf[n] = '\0';
    return buf;
  }
  return pt_type_name(r->type, buf, buflen);
}

/* User-defined types are named after their tool, as the recording
 * wrote it down; the others as everywhere. */
const char *pt_type_name(uint16_t type, char *buf, size_t buflen) {
  if (!(type & XPTI_TRACE_USER_DEFINED) || !pt_proc.tool_names)
    return xpt_trace_type_name(type, buf, buflen);
  const char *tool = pt_proc.tool_names + (size_t)XPTI_TOOL_ID(type) * XPT_REC_NAME_LEN;
  if (!*tool)
    return xpt_trace_type_name(type, buf, buflen);
  snprintf(buf, buflen, "%.*s:%u_%s", (int)XPT_REC_NAME_LEN, tool,
           (unsigned)(XPTI_EXTRACT_USER_DEFINED_ID(type) >> 1), (type & 1) ? "end" : "begin");
  return buf;
}

const char *pt_stream_name(uint8_t stream) {
  const char *s = pt_proc.stream_names ? pt_proc.stream_names + (size_t)stream * XPT_REC_NAME_LEN
                                       : NULL;
  return s && *s ? s : "unknown";
}

/* ---- string table: content -> id (1..), open addressing ------------- */

struct pt_str {
  uint64_t hash;
  char *s;
  uint32_t id;
};
static struct pt_str *pt_strs;
static size_t pt_strs_cap, pt_strs_n;

void pt_str_reset(void) {
  for (size_t i = 0; i < pt_strs_cap; i++)
    free(pt_strs[i].s);
  free(pt_strs);
  pt_strs = NULL;
  pt_strs_cap = pt_strs_n = 0;
}

static uint64_t pt_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h | 1;
}

static bool pt_strs_grow(void) {
  size_t cap = pt_strs_cap ? pt_strs_cap * 2 : 256;
  struct pt_str *t = calloc(cap, sizeof *t);
  if (!t)
    return false;
  for (size_t i = 0; i < pt_strs_cap; i++)
    if (pt_strs[i].hash) {
      size_t j = pt_strs[i].hash & (cap - 1);
      while (t[j].hash)
        j = (j + 1) & (cap - 1);
      t[j] = pt_strs[i];
    }
  free(pt_strs);
  pt_strs = t;
  pt_strs_cap = cap;
  return true;
}

static struct pt_str *pt_str_find(const char *s, size_t len) {
  if ((pt_strs_n + 1) * 2 > pt_strs_cap && !pt_strs_grow())
    return NULL;
  uint64_t h = pt_hash(s, len);
  size_t j = h & (pt_strs_cap - 1);
  while (pt_strs[j].hash) {
    if (pt_strs[j].hash == h && !strncmp(pt_strs[j].s, s, len) && pt_strs[j].s[len] == '\0')
      return &pt_strs[j];
    j = (j + 1) & (pt_strs_cap - 1);
  }
  char *copy = malloc(len + 1);
  if (!copy)
    return NULL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  pt_strs[j] = (struct pt_str){h, copy, (uint32_t)++pt_strs_n};
  return &pt_strs[j];
}

uint32_t pt_str_id(const char *s, size_t len) {
  struct pt_str *x = pt_str_find(s, len);
  return x ? x->id : 0;
}

const char *pt_str_intern(const char *s, size_t len) {
  struct pt_str *x = pt_str_find(s, len);
  return x ? x->s : NULL;
}

/* ---- debug annotations ---------------------------------------------- */

static void pt_arg_str(struct pt_args *a, const char *name, const char *s, size_t n) {
  if (a->n == PT_ARGS_MAX)
    return;
  size_t room = sizeof a->scratch - a->used;
  if (n + 1 > room)
    n = room ? room - 1 : 0;
  if (!room)
    return;
  char *dst = a->scratch + a->used;
  memcpy(dst, s, n);
  dst[n] = '\0';
  a->used += n + 1;
  a->v[a->n++] = (struct pt_arg){.name = name, .kind = PT_ARG_STR, .s = dst};
}

static void pt_arg_uint(struct pt_args *a, const char *name, uint64_t u) {
  if (a->n < PT_ARGS_MAX)
    a->v[a->n++] = (struct pt_arg){.name = name, .kind = PT_ARG_UINT, .u = u};
}

static void pt_arg_metadata(struct pt_args *a, const char *key, xpti_object_data_t o) {
  if (!o.data)
    return;
  union {
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;
  } v = {0};
  if (o.size <= sizeof v)
    memcpy(&v, o.data, o.size);
  if (a->n == PT_ARGS_MAX)
    return;
  struct pt_arg *x = &a->v[a->n];
  x->name = key;
  switch (o.type) {
  case XPTI_METADATA_STRING: {
    size_t n = strnlen(o.data, o.size);
    pt_arg_str(a, key, o.data, n);
    return;
  }
  case XPTI_METADATA_SIGNED_INTEGER:
    x->kind = PT_ARG_INT;
    x->i = o.size == 1 ? v.i8 : o.size == 2 ? v.i16 : o.size == 4 ? v.i32 : v.i64;
    break;
  case XPTI_METADATA_UNSIGNED_INTEGER:
    x->kind = PT_ARG_UINT;
    x->u = o.size == 1 ? v.u8 : o.size == 2 ? v.u16 : o.size == 4 ? v.u32 : v.u64;
    break;
  case XPTI_METADATA_FLOAT:
    x->kind = PT_ARG_DOUBLE;
    x->d = o.size == 4 ? v.f : v.d;
    break;
  case XPTI_METADATA_BOOLEAN:
    x->kind = PT_ARG_BOOL;
    x->u = v.u8 != 0;
    break;
  default: {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "<%zu bytes>", o.size);
    pt_arg_str(a, key, tmp, strlen(tmp));
    return;
  }
  }
  a->n++;
}

void pt_collect_args(struct pt_args *a, const xpti_trace_event_data_t *e, uint64_t instance,
                     unsigned what) {
  a->n = 0;
  a->used = 0;
  if (!e)
    return;
  if (what & PT_ARGS_PROPS)
    pt_arg_uint(a, "uid", e->unique_id);
  if (what & PT_ARGS_INSTANCE)
    pt_arg_uint(a, "instance", instance);
  if (!(what & PT_ARGS_PROPS))
    return;
  const xpti_payload_t *p = e->reserved.payload;
  if (p && p->source_file && (p->flags & XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE)) {
    char src[512];
    if (p->line_no != XPTI_INVALID_LINE && (p->flags & XPTI_PAYLOAD_LINE_INFO_AVAILABLE))
      snprintf(src, sizeof src, "%s:%" PRIu32, p->source_file, p->line_no);
    else
      snprintf(src, sizeof src, "%s", p->source_file);
    pt_arg_str(a, "source", src, strlen(src));
  }
  if (e->event_type == XPTI_EVENT_GRAPH || (e->flags & XPTI_EVENT_SOURCE_UID_AVAILABLE) ||
      (e->flags & XPTI_EVENT_TARGET_UID_AVAILABLE)) {
    if (e->source_id)
      pt_arg_uint(a, "source_uid", e->source_id);
    if (e->target_id)
      pt_arg_uint(a, "target_uid", e->target_id);
  }
  const struct pt_desc *d = pt_desc_of(e);
  const uint8_t *m = d->meta, *end = d->meta + d->meta_len;
  for (uint32_t i = 0; i < d->meta_count; i++) {
    struct xpt_rec_meta h;
    if ((size_t)(end - m) < sizeof h)
      break;
    memcpy(&h, m, sizeof h);
    m += sizeof h;
    if ((size_t)(end - m) < (size_t)h.key_len + h.value_len)
      break;
    /* Keys are copied into the scratch space: they need a terminator. */
    size_t room = sizeof a->scratch - a->used;
    if (h.key_len + 1u > room)
      break;
    char *key = a->scratch + a->used;
    memcpy(key, m, h.key_len);
    key[h.key_len] = '\0';
    a->used += h.key_len + 1u;
    xpti_object_data_t o = {h.value_len, (const char *)m + h.key_len, h.value_type};
    pt_arg_metadata(a, key, o);
    m += h.key_len + h.value_len;
  }
}

/* ---- trace points seen on a sequence --------------------------------- */

bool pt_annotate_all;

void pt_seq_reset(struct pt_seq *s) {
  s->started = false;
  if (s->interned)
    memset(s->interned, 0, s->interned_cap);
  if (s->seen)
    memset(s->seen, 0, s->seen_cap * sizeof *s->seen);
  s->seen_n = 0;
  memset(s->cat_id, 0, sizeof s->cat_id);
}

static size_t pt_seen_slot(const struct pt_seen *tab, size_t cap, const void *e) {
  size_t j = (size_t)(((uintptr_t)e >> 4) * 0x9e3779b97f4a7c15ull) & (cap - 1);
  while (tab[j].event && tab[j].event != e)
    j = (j + 1) & (cap - 1);
  return j;
}

struct pt_seen *pt_seq_seen(struct pt_seq *s, const xpti_trace_event_data_t *e, bool *fresh) {
  if ((s->seen_n + 1) * 2 > s->seen_cap) {
    size_t cap = s->seen_cap ? s->seen_cap * 2 : 64;
    struct pt_seen *tab = calloc(cap, sizeof *tab);
    if (!tab)
      return NULL;
    for (size_t i = 0; i < s->seen_cap; i++)
      if (s->seen[i].event)
        tab[pt_seen_slot(tab, cap, s->seen[i].event)] = s->seen[i];
    free(s->seen);
    s->seen = tab;
    s->seen_cap = cap;
  }
  struct pt_seen *x = &s->seen[pt_seen_slot(s->seen, s->seen_cap, e)];
  *fresh = x->event == NULL;
  if (*fresh) {
    *x = (struct pt_seen){.event = e};
    s->seen_n++;
  }
  return x;
}

unsigned pt_args_wanted(struct pt_seen *seen, bool fresh, const xpti_trace_event_data_t *e) {
  if (!e)
    return 0;
  if (pt_annotate_all)
    return PT_ARGS_PROPS | PT_ARGS_INSTANCE;
  uint32_t meta = pt_desc_of(e)->meta_count;
  if (!seen) /* out of memory: cannot tell, keep the properties */
    return PT_ARGS_PROPS;
  if (!fresh && seen->meta_count == meta)
    return 0;
  seen->meta_count = meta;
  return PT_ARGS_PROPS;
}

/* ---- graph: node index and flows ------------------------------------- */

/* By time; at equal times nodes before edges, then as recorded. */
static int pt_graph_cmp(const void *x, const void *y) {
  const struct pt_graph_rec *a = x, *b = y;
  if (a->ts != b->ts)
    return a->ts < b->ts ? -1 : 1;
  bool ea = a->type == XPTI_TRACE_EDGE_CREATE, eb = b->type == XPTI_TRACE_EDGE_CREATE;
  if (ea != eb)
    return ea ? 1 : -1;
  return a->order < b->order ? -1 : a->order > b->order;
}

/* slot: uid -> index of the first node with it (index + 1, 0 empty) */
static void pt_graph_index(const struct pt_graph_rec *recs, size_t n, struct pt_graph_links *l) {
  memset(l->slot, 0, l->cap * sizeof *l->slot);
  for (size_t i = 0; i < n; i++) {
    if (recs[i].type != XPTI_TRACE_NODE_CREATE || !recs[i].event)
      continue;
    uint64_t uid = recs[i].event->unique_id;
    size_t j = (uid * 0x9e3779b97f4a7c15ull) & (l->cap - 1);
    while (l->slot[j] && recs[l->slot[j] - 1].event->unique_id != uid)
      j = (j + 1) & (l->cap - 1);
    if (!l->slot[j])
      l->slot[j] = i + 1;
  }
}

bool pt_graph_link(struct pt_graph_rec *recs, size_t n, struct pt_graph_links *l) {
  for (size_t i = 0; i < n; i++)
    recs[i].order = (uint32_t)i;
  qsort(recs, n, sizeof *recs, pt_graph_cmp);
  memset(l, 0, sizeof *l);
  size_t cap = 16;
  while (cap < 2 * n)
    cap *= 2;
  l->cap = cap;
  l->slot = calloc(cap, sizeof *l->slot);
  l->out_head = malloc(n * sizeof(size_t));
  l->in_head = malloc(n * sizeof(size_t));
  l->out_next = malloc(n * sizeof(size_t));
  l->in_next = malloc(n * sizeof(size_t));
  l->linked = calloc(n ? n : 1, 1);
  if (!l->slot || !l->out_head || !l->in_head || !l->out_next || !l->in_next || !l->linked) {
    pt_graph_unlink(l);
    return false;
  }
  for (size_t i = 0; i < n; i++)
    l->out_head[i] = l->in_head[i] = l->out_next[i] = l->in_next[i] = SIZE_MAX;
  pt_graph_index(recs, n, l);
  /* An edge is drawn at its own time, which a flow from its source node
   * must not precede: one made before that node's instant (another
   * thread's) waits for it. */
  bool moved = false;
  for (size_t i = 0; i < n; i++) {
    if (recs[i].type != XPTI_TRACE_EDGE_CREATE || !recs[i].event)
      continue;
    size_t src = pt_graph_node(recs, l, recs[i].event->source_id);
    if (src != SIZE_MAX && recs[src].ts > recs[i].ts) {
      recs[i].ts = recs[src].ts;
      moved = true;
    }
  }
  if (moved) {
    qsort(recs, n, sizeof *recs, pt_graph_cmp);
    pt_graph_index(recs, n, l);
  }
  for (size_t i = n; i-- > 0;) {
    if (recs[i].type != XPTI_TRACE_EDGE_CREATE || !recs[i].event)
      continue;
    size_t src = pt_graph_node(recs, l, recs[i].event->source_id);
    size_t dst = pt_graph_node(recs, l, recs[i].event->target_id);
    if (src == SIZE_MAX || dst == SIZE_MAX)
      continue;
    l->linked[i] = 1;
    l->out_next[i] = l->out_head[src];
    l->out_head[src] = i;
    l->in_next[i] = l->in_head[dst];
    l->in_head[dst] = i;
  }
  return true;
}

void pt_edge_args(struct pt_args *a, const xpti_trace_event_data_t *edge, uint64_t instance,
                  const xpti_trace_event_data_t *target) {
  pt_collect_args(a, edge, instance, PT_ARGS_PROPS | (pt_annotate_all ? PT_ARGS_INSTANCE : 0));
  if (a->n && !strcmp(a->v[0].name, "uid"))
    a->v[0].name = "edge_uid";
  pt_arg_uint(a, "uid", target->unique_id);
}

size_t pt_graph_node(const struct pt_graph_rec *recs, const struct pt_graph_links *l,
                     uint64_t uid) {
  if (!uid)
    return SIZE_MAX;
  size_t j = (uid * 0x9e3779b97f4a7c15ull) & (l->cap - 1);
  while (l->slot[j]) {
    if (recs[l->slot[j] - 1].event->unique_id == uid)
      return l->slot[j] - 1;
    j = (j + 1) & (l->cap - 1);
  }
  return SIZE_MAX;
}

void pt_graph_unlink(struct pt_graph_links *l) {
  free(l->slot);
  free(l->out_head);
  free(l->in_head);
  free(l->out_next);
  free(l->in_next);
  free(l->linked);
  memset(l, 0, sizeof *l);
}

uint64_t pt_flow_id(size_t edge_index, uint64_t base) {
  return ((uint64_t)pt_proc.pid << 32) | (base + edge_index + 1);
}
