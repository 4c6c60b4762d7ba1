/* The line table: every (address range -> file:line) of the binaries and
 * sources in scope, read once with libdw from this very process (DWARF 2
 * to 5), so that the sampling signal handler maps an address to a line
 * with a binary search and no library call. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "causal_internal.h"
#include "xpt_msg.h"

typedef struct {
  causal_range_t *v;
  size_t n, cap;
  char **names;
  size_t nnames, namecap;
  /* open addressing: name -> id */
  int32_t *slots;
  size_t nslots;
} builder_t;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static bool grow_slots(builder_t *b) {
  size_t n = b->nslots ? b->nslots * 2 : 1024;
  int32_t *s = malloc(n * sizeof *s);
  if (!s)
    return false;
  for (size_t i = 0; i < n; ++i)
    s[i] = -1;
  for (size_t i = 0; i < b->nnames; ++i) {
    size_t j = hash_str(b->names[i]) & (n - 1);
    while (s[j] >= 0)
      j = (j + 1) & (n - 1);
    s[j] = (int32_t)i;
  }
  free(b->slots);
  b->slots = s;
  b->nslots = n;
  return true;
}

static int32_t intern(builder_t *b, const char *file, int line) {
  char name[PATH_MAX + 16];
  snprintf(name, sizeof name, "%s:%d", file, line);
  if ((b->nnames + 1) * 2 > b->nslots && !grow_slots(b))
    return -1;
  size_t j = hash_str(name) & (b->nslots - 1);
  while (b->slots[j] >= 0) {
    if (strcmp(b->names[b->slots[j]], name) == 0)
      return b->slots[j];
    j = (j + 1) & (b->nslots - 1);
  }
  if (b->nnames == b->namecap) {
    size_t cap = b->namecap ? b->namecap * 2 : 256;
    char **v = realloc(b->names, cap * sizeof *v);
    if (!v)
      return -1;
    b->names = v;
    b->namecap = cap;
  }
  char *copy = strdup(name);
  if (!copy)
    return -1;
  b->names[b->nnames] = copy;
  b->slots[j] = (int32_t)b->nnames;
  return (int32_t)b->nnames++;
}

static bool add_range(builder_t *b, uintptr_t lo, uintptr_t hi, int32_t line) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 1024;
    causal_range_t *v = realloc(b->v, cap * sizeof *v);
    if (!v)
      return false;
    b->v = v;
    b->cap = cap;
  }
  b->v[b->n++] = (causal_range_t){lo, hi, line};
  return true;
}

/* Default source scope: the program's own sources, not the system's
 * headers (inline functions of /usr/include land in the program too). */
static bool source_in_scope(const char *scope, const char *file) {
  if (!scope || !*scope)
    return strncmp(file, "/usr/", 5) != 0;
  const char *base = strrchr(file, '/');
  return fnmatch(scope, file, 0) == 0 || (base && fnmatch(scope, base + 1, 0) == 0);
}

static void add_module_lines(builder_t *b, Dwfl_Module *mod, const char *source_scope) {
  Dwarf_Addr bias;
  Dwarf_Die *cu = NULL;
  while ((cu = dwfl_module_nextcu(mod, cu, &bias)) != NULL) {
    Dwarf_Lines *lines;
    size_t n;
    if (dwarf_getsrclines(cu, &lines, &n) != 0)
      continue;
    Dwarf_Attribute attr;
    const char *comp_dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &attr));
    for (size_t i = 0; i + 1 < n; ++i) {
      Dwarf_Line *l = dwarf_onesrcline(lines, i), *next = dwarf_onesrcline(lines, i + 1);
      bool end = false;
      Dwarf_Addr a0, a1;
      int lineno;
      if (!l || !next || dwarf_lineendsequence(l, &end) != 0 || end)
        continue;
      if (dwarf_lineaddr(l, &a0) != 0 || dwarf_lineaddr(next, &a1) != 0 || a1 <= a0 ||
          dwarf_lineno(l, &lineno) != 0 || lineno <= 0)
        continue;
      const char *file = dwarf_linesrc(l, NULL, NULL);
      char joined[PATH_MAX];
      if (file && file[0] != '/' && comp_dir) { /* relative to the compilation folder */
        snprintf(joined, sizeof joined, "%s/%s", comp_dir, file);
        file = joined;
      }
      if (!file || !source_in_scope(source_scope, file))
        continue;
      int32_t id = intern(b, file, lineno);
      if (id < 0 || !add_range(b, (uintptr_t)(a0 + bias), (uintptr_t)(a1 + bias), id))
        return;
    }
  }
}

static int by_lo(const void *a, const void *b) {
  const causal_range_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static bool binary_in_scope(const char *scope, const char *module, const char *exe) {
  if (!scope || !*scope)
    return strcmp(module, exe) == 0;
  const char *base = strrchr(module, '/');
  return fnmatch(scope, module, 0) == 0 || (base && fnmatch(scope, base + 1, 0) == 0);
}

typedef struct {
  builder_t *b;
  const char *binary_scope, *source_scope, *exe;
} walk_t;

static int module_cb(Dwfl_Module *mod, void **user, const char *name, Dwarf_Addr start,
                     void *arg) {
  (void)user;
  (void)start;
  walk_t *w = arg;
  const char *path = NULL;
  dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &path, NULL);
  if (!path)
    path = name;
  if (path && binary_in_scope(w->binary_scope, path, w->exe))
    add_module_lines(w->b, mod, w->source_scope);
  return DWARF_CB_OK;
}

causal_lines_t *causal_lines_build(const char *binary_scope, const char *source_scope) {
  static char *debuginfo_path;
  static const Dwfl_Callbacks callbacks = {
      .find_elf = dwfl_linux_proc_find_elf,
      .find_debuginfo = dwfl_standard_find_debuginfo,
      .debuginfo_path = &debuginfo_path,
  };
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[len > 0 ? len : 0] = '\0';
  Dwfl *dwfl = dwfl_begin(&callbacks);
  if (!dwfl)
    return NULL;
  builder_t b = {0};
  if (dwfl_linux_proc_report(dwfl, getpid()) == 0 && dwfl_report_end(dwfl, NULL, NULL) == 0) {
    walk_t w = {&b, binary_scope, source_scope, exe};
    dwfl_getmodules(dwfl, module_cb, &w, 0);
  }
  dwfl_end(dwfl);
  free(b.slots);
  causal_lines_t *t = calloc(1, sizeof *t);
  if (!t || b.n == 0) {
    free(t);
    free(b.v);
    for (size_t i = 0; i < b.nnames; ++i)
      free(b.names[i]);
    free(b.names);
    return NULL;
  }
  qsort(b.v, b.n, sizeof *b.v, by_lo);
  /* Overlaps (a CU listed twice) keep the first; neighbours of one line merge. */
  size_t k = 0;
  for (size_t i = 0; i < b.n; ++i) {
    causal_range_t r = b.v[i];
    if (k && r.lo < b.v[k - 1].hi) {
      if (r.hi <= b.v[k - 1].hi)
        continue;
      r.lo = b.v[k - 1].hi;
    }
    if (k && r.lo == b.v[k - 1].hi && r.line == b.v[k - 1].line) {
      b.v[k - 1].hi = r.hi;
      continue;
    }
    b.v[k++] = r;
  }
  t->ranges = b.v;
  t->nranges = k;
  t->names = b.names;
  t->nnames = b.nnames;
  return t;
}

int32_t causal_lines_find(const causal_lines_t *t, uintptr_t ip) {
  size_t lo = 0, hi = t->nranges;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ip < t->ranges[mid].lo)
      hi = mid;
    else if (ip >= t->ranges[mid].hi)
      lo = mid + 1;
    else
      return t->ranges[mid].line;
  }
  return -1;
}

int32_t causal_lines_lookup(const causal_lines_t *t, const char *spec) {
  size_t n = strlen(spec);
  for (size_t i = 0; i < t->nnames; ++i) {
    const char *name = t->names[i];
    size_t m = strlen(name);
    if (m >= n && strcmp(name + m - n, spec) == 0 && (m == n || name[m - n - 1] == '/'))
      return (int32_t)i;
  }
  return -1;
}
