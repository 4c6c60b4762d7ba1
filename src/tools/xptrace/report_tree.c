/* xptrace report --tree: the samples' call tree, root first, children by
 * inclusive samples, as a table of (depth, function) rows in tree order. */
#include <stdlib.h>
#include <string.h>

#include "report_table.h"

struct tnode {
  uint32_t name;
  uint32_t child, next; /* first child, next sibling: indices, 0 = none */
  uint64_t incl, self;
};

struct tree {
  struct tnode *n;
  size_t len, cap;
  bool oom;
};

static uint32_t node_child(struct tree *t, uint32_t parent, uint32_t name) {
  for (uint32_t c = t->n[parent].child; c; c = t->n[c].next)
    if (t->n[c].name == name)
      return c;
  if (t->len == t->cap) {
    size_t nc = t->cap * 2;
    struct tnode *nn = realloc(t->n, nc * sizeof(*nn));
    if (!nn) {
      t->oom = true;
      return 0;
    }
    t->n = nn;
    t->cap = nc;
  }
  uint32_t i = (uint32_t)t->len++;
  t->n[i] = (struct tnode){.name = name, .next = t->n[parent].child};
  t->n[parent].child = i;
  return i;
}

static bool sample_selected(const struct rp_model *m, const struct rp_sample *s,
                            const struct rp_select *sel) {
  if ((sel->pid >= 0 && s->pid != sel->pid) || (sel->tid >= 0 && s->tid != sel->tid))
    return false;
  if (!sel->have_regex)
    return true;
  for (uint32_t i = 0; i < s->nframes; i++)
    if (rp_select_name(sel, rp_str_get(&m->s, m->framepool[s->frames + i])))
      return true;
  return false;
}

static int by_incl(const void *a, const void *b, void *ctx) {
  const struct tnode *n = ctx;
  const struct tnode *x = &n[*(const uint32_t *)a], *y = &n[*(const uint32_t *)b];
  if (x->incl != y->incl)
    return x->incl > y->incl ? -1 : 1;
  return x->name < y->name ? -1 : x->name > y->name;
}

struct emit {
  const struct rp_model *m;
  struct tree *t;
  struct rp_table *out;
  size_t depth_max;
  uint64_t total;
};

/* Children sorted, emitted depth first (recursion depth = stack depth,
 * bounded by the sampler's frame limit). */
static void emit(struct emit *e, uint32_t node, size_t depth) {
  if (e->depth_max && depth > e->depth_max)
    return;
  if (node) {
    const struct tnode *n = &e->t->n[node];
    struct rp_cell *c = rp_table_row(e->out);
    if (!c)
      return;
    c[0] = (struct rp_cell){.v = (double)(depth - 1)};
    c[1] = (struct rp_cell){.s = rp_str_get(&e->m->s, n->name)};
    c[2] = (struct rp_cell){.v = (double)n->incl};
    c[3] = (struct rp_cell){.v = e->total ? 100.0 * (double)n->incl / (double)e->total : 0};
    c[4] = (struct rp_cell){.v = (double)n->self};
    c[5] = (struct rp_cell){.v = e->total ? 100.0 * (double)n->self / (double)e->total : 0};
    for (int i = 0; i < 6; i++)
      c[i].empty = false;
    if (!c[1].s[0])
      c[1].s = "?";
  }
  size_t nk = 0;
  for (uint32_t c = e->t->n[node].child; c; c = e->t->n[c].next)
    nk++;
  if (!nk)
    return;
  uint32_t *kids = malloc(nk * sizeof(*kids));
  if (!kids) {
    e->out->oom = true;
    return;
  }
  nk = 0;
  for (uint32_t c = e->t->n[node].child; c; c = e->t->n[c].next)
    kids[nk++] = c;
  /* qsort_r is glibc's; the node array is stable during the sort. */
  qsort_r(kids, nk, sizeof(*kids), by_incl, e->t->n);
  for (size_t i = 0; i < nk; i++)
    emit(e, kids[i], depth + 1);
  free(kids);
}

void rp_tree_build(const struct rp_model *m, const struct rp_select *sel, size_t depth,
                   struct rp_table *out) {
  rp_table_init(out, "tree", "Call tree (samples)");
  rp_table_col(out, "depth", RP_K_INT);
  rp_table_col(out, "function", RP_K_STR);
  rp_table_col(out, "inclusive", RP_K_INT);
  rp_table_col(out, "inclusive%", RP_K_PCT);
  rp_table_col(out, "self", RP_K_INT);
  rp_table_col(out, "self%", RP_K_PCT);
  /* text: percentages first, the indented name last */
  static const size_t order[] = {3, 5, 2, 4, 1};
  out->indented = true;
  out->ntext_order = 5;
  memcpy(out->text_order, order, sizeof order);
  struct tree t = {.cap = 256};
  t.n = calloc(t.cap, sizeof(*t.n));
  if (!t.n) {
    out->oom = true;
    return;
  }
  t.len = 1; /* the root */
  uint64_t total = 0;
  for (size_t k = 0; k < m->nsamples && !t.oom; k++) {
    const struct rp_sample *s = &m->samples[k];
    if (!sample_selected(m, s, sel))
      continue;
    total++;
    uint32_t node = 0;
    for (uint32_t i = 0; i < s->nframes && !t.oom; i++) {
      node = node_child(&t, node, m->framepool[s->frames + i]);
      if (!node)
        break;
      t.n[node].incl++;
    }
    if (node)
      t.n[node].self++;
  }
  out->oom |= t.oom;
  struct emit e = {m, &t, out, depth, total};
  emit(&e, 0, 0);
  snprintf(out->note, sizeof out->note, "samples %llu", (unsigned long long)total);
  free(t.n);
}
