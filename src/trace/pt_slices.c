/* The finisher's slice statistics (xpt_slices.h): one stack per thread
 * as its records are encoded, a row per (name, category). */
#include <stdlib.h>
#include <string.h>

#include "pt_internal.h"
#include "xpt_slices.h"

static struct xpt_slice_table *sl_table;
bool pt_slices_on;

struct sl_open {
  uint32_t row;
  uint64_t start, children;
};
static struct {
  struct sl_open *v;
  size_t n, cap;
} sl_stack;

/* The last trace point (description) seen and its row: a thread of
 * function calls names few rows, most of them over and over. */
enum { SL_CACHE = 256 };
static struct {
  const void *event;
  uint32_t row;
} sl_cache[SL_CACHE];

/* The slices still open leave the stack: their rows' open counts too. */
static void sl_unwind(void) {
  for (size_t i = 0; sl_table && i < sl_stack.n; i++)
    if (sl_stack.v[i].row != UINT32_MAX)
      sl_table->rows[sl_stack.v[i].row].open--;
  sl_stack.n = 0;
}

void xpt_slices_collect(struct xpt_slice_table *t) {
  sl_unwind();
  sl_table = t;
  pt_slices_on = t != NULL;
  memset(sl_cache, 0, sizeof sl_cache);
  sl_stack.n = 0;
}

void xpt_slices_free(struct xpt_slice_table *t) {
  for (size_t i = 0; i < t->n; i++) {
    free(t->rows[i].name);
    free(t->rows[i].category);
    stats_hist_free(&t->rows[i].hist);
  }
  free(t->rows);
  free(t->slots);
  memset(t, 0, sizeof *t);
  if (sl_table == t) {
    sl_table = NULL;
    pt_slices_on = false;
  }
  free(sl_stack.v);
  memset(&sl_stack, 0, sizeof sl_stack);
}

static uint64_t sl_hash(const char *a, const char *b) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *a; a++)
    h = (h ^ (uint8_t)*a) * 0x100000001b3ull;
  h = (h ^ 0xff) * 0x100000001b3ull;
  for (; *b; b++)
    h = (h ^ (uint8_t)*b) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

static bool sl_grow(struct xpt_slice_table *t) {
  size_t n = t->nslots ? t->nslots * 2 : 256;
  uint32_t *s = calloc(n, sizeof *s);
  if (!s)
    return false;
  for (size_t i = 0; i < t->n; i++) {
    size_t k = sl_hash(t->rows[i].name, t->rows[i].category) & (n - 1);
    while (s[k])
      k = (k + 1) & (n - 1);
    s[k] = (uint32_t)i + 1;
  }
  free(t->slots);
  t->slots = s;
  t->nslots = n;
  return true;
}

/* The row of (name, category), made when new; UINT32_MAX: no memory. */
static uint32_t sl_row(struct xpt_slice_table *t, const char *name, const char *cat) {
  if ((t->n + 1) * 2 > t->nslots && !sl_grow(t))
    return UINT32_MAX;
  size_t k = sl_hash(name, cat) & (t->nslots - 1);
  for (; t->slots[k]; k = (k + 1) & (t->nslots - 1)) {
    const struct xpt_slice_row *r = &t->rows[t->slots[k] - 1];
    if (!strcmp(r->name, name) && !strcmp(r->category, cat))
      return t->slots[k] - 1;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct xpt_slice_row *rows = realloc(t->rows, cap * sizeof *rows);
    if (!rows)
      return UINT32_MAX;
    t->rows = rows;
    t->cap = cap;
  }
  struct xpt_slice_row *r = &t->rows[t->n];
  memset(r, 0, sizeof *r);
  r->name = strdup(name);
  r->category = strdup(cat);
  if (!r->name || !r->category) {
    free(r->name);
    free(r->category);
    return UINT32_MAX;
  }
  r->min = UINT64_MAX;
  t->slots[k] = (uint32_t)++t->n;
  return (uint32_t)(t->n - 1);
}

/* A thread's records start (or the last one's ended: NULL thread). The
 * cache is emptied too: descriptions live as long as their recording. */
void pt_slices_thread(void) {
  if (sl_table)
    sl_table->unclosed += sl_stack.n;
  sl_unwind();
  memset(sl_cache, 0, sizeof sl_cache);
}

void pt_slices_record(const struct pt_rec *r, uint64_t ts) {
  struct xpt_slice_table *t = sl_table;
  if (!t)
    return;
  enum pt_kind kind = pt_kind_fast(r->type);
  if (kind == PT_KIND_BEGIN) {
    uint32_t row = UINT32_MAX;
    size_t c = ((uintptr_t)r->event >> 4) & (SL_CACHE - 1);
    if (r->event && sl_cache[c].event == r->event) {
      row = sl_cache[c].row;
    } else {
      char buf[PT_NAME_MAX + 1];
      row = sl_row(t, pt_rec_name(r, buf, sizeof buf), pt_stream_name(r->stream));
      if (r->event && row != UINT32_MAX)
        sl_cache[c].event = r->event, sl_cache[c].row = row;
    }
    if (sl_stack.n == sl_stack.cap) {
      size_t cap = sl_stack.cap ? sl_stack.cap * 2 : 64;
      struct sl_open *v = realloc(sl_stack.v, cap * sizeof *v);
      if (!v) {
        t->oom = true;
        return; /* its end then closes the enclosing slice: counted as lost */
      }
      sl_stack.v = v;
      sl_stack.cap = cap;
    }
    if (row == UINT32_MAX)
      t->oom = true;
    else
      t->rows[row].open++;
    sl_stack.v[sl_stack.n++] = (struct sl_open){row, ts, 0};
  } else if (kind == PT_KIND_END && sl_stack.n) {
    /* The finisher left only whole pairs: an end closes the innermost. */
    struct sl_open o = sl_stack.v[--sl_stack.n];
    uint64_t d = ts >= o.start ? ts - o.start : 0;
    if (sl_stack.n)
      sl_stack.v[sl_stack.n - 1].children += d;
    if (o.row == UINT32_MAX)
      return;
    struct xpt_slice_row *row = &t->rows[o.row];
    row->count++;
    /* As uftrace: a call nested in a call of itself (recursion) is in
     * the outer call's total already; count, self and sum take it. */
    if (--row->open == 0)
      row->total += d;
    row->sum += d;
    row->self += d >= o.children ? d - o.children : 0;
    row->min = d < row->min ? d : row->min;
    row->max = d > row->max ? d : row->max;
    if (!stats_hist_add(&row->hist, d, 1))
      t->oom = true;
  }
}
