/* xptrace report --tree and --graph FUNCTION for function traces: the
 * call paths of the slices on threads (rp_cnode, built by the model),
 * as uftrace's `report --tree` and `graph` show them. */
#include <stdlib.h>
#include <string.h>

#include "report_export.h"
#include "report_table.h"

/* Children of each node (the model keeps only parents). */
struct kids {
  uint32_t *first, *next; /* by node index; 0 = none */
};

static bool kids_make(const struct rp_model *m, struct kids *k) {
  k->first = calloc(m->ncnodes + 1, sizeof *k->first);
  k->next = calloc(m->ncnodes + 1, sizeof *k->next);
  if (!k->first || !k->next)
    return false;
  for (uint32_t i = (uint32_t)m->ncnodes; i-- > 1;) { /* a parent is older than its child */
    uint32_t p = m->cnodes[i].parent;
    k->next[i] = k->first[p];
    k->first[p] = i;
  }
  return true;
}

static void kids_free(struct kids *k) {
  free(k->first);
  free(k->next);
}

/* Paths through a matching function: it, its callers, its callees. */
static bool *keep_paths(const struct rp_model *m, const struct rp_select *sel) {
  bool *keep = calloc(m->ncnodes + 1, sizeof *keep);
  if (!keep)
    return NULL;
  for (uint32_t i = 1; i < m->ncnodes; i++)
    keep[i] = keep[m->cnodes[i].parent] ||
              !sel->have_regex || rp_select_name(sel, rp_str_get(&m->s, m->cnodes[i].name));
  for (uint32_t i = (uint32_t)m->ncnodes; i-- > 1;)
    if (keep[i])
      keep[m->cnodes[i].parent] = true;
  return keep;
}

struct walk {
  const struct rp_model *m;
  const struct rp_cnode *n; /* the nodes */
  const struct kids *k;
  const bool *keep;
  struct rp_table *out;
  size_t depth_max;
  uint64_t total; /* 100 % */
};

static int by_total(const void *a, const void *b, void *ctx) {
  const struct walk *w = ctx;
  const struct rp_cnode *x = &w->n[*(const uint32_t *)a], *y = &w->n[*(const uint32_t *)b];
  if (x->total != y->total)
    return x->total > y->total ? -1 : 1;
  return strcmp(rp_str_get(&w->m->s, x->name), rp_str_get(&w->m->s, y->name));
}

static void row(struct walk *w, const struct rp_cnode *n, size_t depth) {
  struct rp_cell *c = rp_table_row(w->out);
  if (!c)
    return;
  double t = w->total ? 100.0 / (double)w->total : 0;
  c[0] = (struct rp_cell){.v = (double)depth};
  c[1] = (struct rp_cell){.s = rp_str_get(&w->m->s, n->name)};
  c[2] = (struct rp_cell){.v = (double)n->count};
  c[3] = (struct rp_cell){.v = (double)n->total};
  c[4] = (struct rp_cell){.v = (double)n->total * t};
  c[5] = (struct rp_cell){.v = (double)n->self};
  c[6] = (struct rp_cell){.v = (double)n->self * t};
}

/* node's subtree, depth first, children by total time. */
static void walk(struct walk *w, uint32_t node, size_t depth) {
  if (w->depth_max && depth >= w->depth_max)
    return;
  size_t nk = 0;
  for (uint32_t c = w->k->first[node]; c; c = w->k->next[c])
    nk += !w->keep || w->keep[c];
  if (!nk)
    return;
  uint32_t *list = malloc(nk * sizeof *list);
  if (!list) {
    w->out->oom = true;
    return;
  }
  nk = 0;
  for (uint32_t c = w->k->first[node]; c; c = w->k->next[c])
    if (!w->keep || w->keep[c])
      list[nk++] = c;
  qsort_r(list, nk, sizeof *list, by_total, w);
  for (size_t i = 0; i < nk; i++) {
    row(w, &w->n[list[i]], depth);
    walk(w, list[i], depth + 1);
  }
  free(list);
}

static void tree_table(struct rp_table *t, const char *id, const char *title) {
  rp_table_init(t, id, title);
  rp_table_col(t, "depth", RP_K_INT);
  rp_table_col(t, "function", RP_K_STR);
  rp_table_col(t, "calls", RP_K_INT);
  rp_table_col(t, "total", RP_K_NS);
  rp_table_col(t, "total%", RP_K_PCT);
  rp_table_col(t, "self", RP_K_NS);
  rp_table_col(t, "self%", RP_K_PCT);
  static const size_t order[] = {4, 3, 6, 5, 2, 1};
  t->indented = true;
  t->ntext_order = 6;
  memcpy(t->text_order, order, sizeof order);
}

void rp_calltree_build(const struct rp_model *m, const struct rp_select *sel, size_t depth,
                       struct rp_table *t) {
  tree_table(t, "calltree", "Call tree (function calls: slices on threads)");
  struct kids k;
  bool *keep = keep_paths(m, sel);
  if (!keep || !kids_make(m, &k)) {
    t->oom = true;
    free(keep);
    return;
  }
  uint64_t total = 0, calls = 0;
  for (uint32_t c = k.first[0]; c; c = k.next[c])
    if (keep[c])
      total += m->cnodes[c].total;
  for (uint32_t i = 1; i < m->ncnodes; i++)
    calls += keep[i] ? m->cnodes[i].count : 0;
  struct walk w = {m, m->cnodes, &k, keep, t, depth, total};
  walk(&w, 0, 0);
  char b[32];
  rp_fmt_ns(b, sizeof b, (double)total);
  snprintf(t->note, sizeof t->note, "calls %llu, total %s (100%%: the outermost calls)",
           (unsigned long long)calls, b);
  kids_free(&k);
  free(keep);
}

/* ---- --graph FUNCTION ---- */

static bool ancestor_named(const struct rp_model *m, uint32_t i, uint32_t name) {
  for (i = m->cnodes[i].parent; i; i = m->cnodes[i].parent)
    if (m->cnodes[i].name == name)
      return true;
  return false;
}

/* The merged callee tree: nodes by (parent, name), linear children. */
struct mtree {
  struct rp_cnode *n;
  size_t len, cap;
  bool oom;
};

static uint32_t mchild(struct mtree *t, uint32_t parent, uint32_t name) {
  for (uint32_t i = parent + 1; i < t->len; i++) /* children come after their parent */
    if (t->n[i].parent == parent && t->n[i].name == name)
      return i;
  if (t->len == t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 64;
    struct rp_cnode *nn = realloc(t->n, nc * sizeof *nn);
    if (!nn) {
      t->oom = true;
      return 0;
    }
    t->n = nn;
    t->cap = nc;
  }
  t->n[t->len] = (struct rp_cnode){.name = name, .parent = parent};
  return (uint32_t)t->len++;
}

static void merge(const struct rp_model *m, const struct kids *k, uint32_t from, struct mtree *t,
                  uint32_t to) {
  for (uint32_t c = k->first[from]; c && !t->oom; c = k->next[c]) {
    uint32_t d = mchild(t, to, m->cnodes[c].name);
    if (!d)
      return;
    t->n[d].count += m->cnodes[c].count;
    t->n[d].total += m->cnodes[c].total;
    t->n[d].self += m->cnodes[c].self;
    merge(m, k, c, t, d);
  }
}

static int by_path_total(const void *a, const void *b, void *ctx) {
  const struct rp_cnode *n = ctx;
  uint64_t x = n[*(const uint32_t *)a].total, y = n[*(const uint32_t *)b].total;
  if (x != y)
    return x > y ? -1 : 1;
  return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

size_t rp_graph_build(const struct rp_model *m, const struct rp_select *sel, const char *function,
                      size_t depth, struct rp_table *tables) {
  (void)sel;
  struct rp_table *callers = &tables[0], *callees = &tables[1];
  rp_table_init(callers, "callers", "Callers (every call path to the function, outermost first)");
  rp_table_col(callers, "call path", RP_K_STR);
  rp_table_col(callers, "calls", RP_K_INT);
  rp_table_col(callers, "total", RP_K_NS);
  rp_table_col(callers, "self", RP_K_NS);
  callers->sort_col = 2;
  tree_table(callees, "callees", "Callees (its calls merged over every path)");
  uint32_t name = 0;
  for (uint32_t i = 1; i < m->ncnodes && !name; i++)
    if (strcmp(rp_str_get(&m->s, m->cnodes[i].name), function) == 0)
      name = m->cnodes[i].name;
  struct kids k;
  if (!name || !kids_make(m, &k)) {
    if (name)
      callers->oom = callees->oom = true;
    return 2;
  }
  /* Callers: one row per path (recursive calls too); the path strings
   * are kept in the callers table's note-free string pool below. */
  uint32_t *paths = malloc(m->ncnodes * sizeof *paths);
  size_t np = 0;
  for (uint32_t i = 1; paths && i < m->ncnodes; i++)
    if (m->cnodes[i].name == name && m->cnodes[i].count)
      paths[np++] = i;
  if (np > 1)
    qsort_r(paths, np, sizeof *paths, by_path_total, m->cnodes);
  static char *pool; /* the path strings live until the next call */
  free(pool);
  size_t pool_len = 0, pool_cap = 0;
  pool = NULL;
  size_t *offs = calloc(np + 1, sizeof *offs);
  for (size_t p = 0; offs && p < np; p++) {
    uint32_t at[512];
    size_t n = 0;
    for (uint32_t i = paths[p]; i && n < 512; i = m->cnodes[i].parent)
      at[n++] = i;
    offs[p] = pool_len;
    for (size_t j = n; j-- > 0;) {
      const char *s = rp_str_get(&m->s, m->cnodes[at[j]].name);
      size_t need = strlen(s) + 4;
      if (pool_len + need + 1 > pool_cap) {
        size_t nc = (pool_cap + need + 1) * 2;
        char *np2 = realloc(pool, nc);
        if (!np2) {
          callers->oom = true;
          break;
        }
        pool = np2;
        pool_cap = nc;
      }
      pool_len += (size_t)sprintf(pool + pool_len, "%s%s", s, j ? " > " : "");
    }
    if (!pool)
      break;
    pool[pool_len++] = 0;
  }
  uint64_t calls = 0, total = 0, self = 0;
  for (size_t p = 0; pool && offs && p < np; p++) {
    const struct rp_cnode *c = &m->cnodes[paths[p]];
    struct rp_cell *r = rp_table_row(callers);
    if (!r)
      break;
    r[0] = (struct rp_cell){.s = pool + offs[p]};
    r[1] = (struct rp_cell){.v = (double)c->count};
    r[2] = (struct rp_cell){.v = (double)c->total};
    r[3] = (struct rp_cell){.v = (double)c->self};
  }
  /* Callees: the outermost calls' subtrees merged under one root. */
  struct mtree t = {0};
  uint32_t root = mchild(&t, 0, 0); /* index 0: a placeholder parent */
  root = mchild(&t, 0, name);
  for (uint32_t i = 1; i < m->ncnodes && !t.oom; i++)
    if (m->cnodes[i].name == name && !ancestor_named(m, i, name)) {
      t.n[root].count += m->cnodes[i].count;
      t.n[root].total += m->cnodes[i].total;
      t.n[root].self += m->cnodes[i].self;
      merge(m, &k, i, &t, root);
    }
  calls = t.n[root].count, total = t.n[root].total, self = t.n[root].self;
  /* its subtree as a walk over the merged nodes */
  struct kids mk = {calloc(t.len + 1, sizeof(uint32_t)), calloc(t.len + 1, sizeof(uint32_t))};
  if (!t.oom && mk.first && mk.next) {
    for (uint32_t i = (uint32_t)t.len; i-- > 2;) {
      mk.next[i] = mk.first[t.n[i].parent];
      mk.first[t.n[i].parent] = i;
    }
    mk.first[0] = root; /* the walk starts above the function */
    mk.next[root] = 0;
    struct walk w = {m, t.n, &mk, NULL, callees, depth, total};
    walk(&w, 0, 0);
  } else {
    callees->oom = true;
  }
  char b1[32], b2[32];
  rp_fmt_ns(b1, sizeof b1, (double)total);
  rp_fmt_ns(b2, sizeof b2, (double)self);
  snprintf(callers->note, sizeof callers->note, "%s: %zu call path(s)", function, np);
  snprintf(callees->note, sizeof callees->note, "%s: calls %llu, total %s, self %s", function,
           (unsigned long long)calls, b1, b2);
  free(mk.first);
  free(mk.next);
  free(t.n);
  free(offs);
  free(paths);
  kids_free(&k);
  return 2;
}
