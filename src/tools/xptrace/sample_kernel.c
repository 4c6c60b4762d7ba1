/* Kernel frame names from /proc/kallsyms (sample_kernel.h). */
#include "sample_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ksym {
  uint64_t addr;
  char *name;  /* in the table's text */
  char *shown; /* "name_[k]", made when first asked */
} ksym_t;

static struct {
  bool loaded;
  ksym_t *sym;
  size_t n;
} kt;

static int ksym_cmp(const void *a, const void *b) {
  const ksym_t *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void ksym_load(void) {
  kt.loaded = true;
  FILE *f = fopen("/proc/kallsyms", "re");
  if (!f)
    return;
  char line[512];
  size_t cap = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long addr;
    char type, name[256];
    /* Code only (t, T, w, W); module symbols carry "\t[module]" after. */
    if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 || !addr ||
        !strchr("tTwW", type))
      continue;
    if (kt.n == cap) {
      size_t c = cap ? 2 * cap : 65536;
      ksym_t *g = realloc(kt.sym, c * sizeof *g);
      if (!g)
        break;
      kt.sym = g;
      cap = c;
    }
    char *copy = strdup(name);
    if (!copy)
      break;
    kt.sym[kt.n++] = (ksym_t){addr, copy, NULL};
  }
  fclose(f);
  if (kt.n)
    qsort(kt.sym, kt.n, sizeof *kt.sym, ksym_cmp);
}

const char *ksym_name(uint64_t addr) {
  if (!kt.loaded)
    ksym_load();
  size_t lo = 0, hi = kt.n;
  while (lo < hi) { /* the last symbol at or below addr */
    size_t mid = lo + (hi - lo) / 2;
    if (kt.sym[mid].addr <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return "[kernel]";
  ksym_t *k = &kt.sym[lo - 1];
  if (!k->shown) {
    size_t len = strlen(k->name);
    k->shown = malloc(len + 5);
    if (!k->shown)
      return "[kernel]";
    memcpy(k->shown, k->name, len);
    memcpy(k->shown + len, "_[k]", 5);
  }
  return k->shown;
}
