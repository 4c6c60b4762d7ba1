/* Kernel frame names from /proc/kallsyms (sample_kernel.h).  The kernel
 * takes ~40-90 ms to write the file (120,000 symbols), so it is read by
 * a thread of its own from the start of sampling (ksym_preload) and
 * parsed in place: one buffer, no copy per symbol. */
#include "sample_kernel.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ksym {
  uint64_t addr;
  const char *name;  /* in the file's text, NUL-terminated there */
  char *shown;       /* "name_[k]", made when first asked */
} ksym_t;

static struct {
  pthread_once_t once;
  pthread_t thread;
  bool started, loaded;
  char *text;
  ksym_t *sym;
  size_t n;
} kt = {.once = PTHREAD_ONCE_INIT};

static int ksym_cmp(const void *a, const void *b) {
  const ksym_t *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static char *read_all(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  size_t len = 0, cap = 8 << 20;
  char *buf = malloc(cap + 1);
  for (ssize_t r = 1; buf && r > 0;) {
    if (len == cap) {
      char *g = realloc(buf, 2 * cap + 1);
      if (!g) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = g;
      cap *= 2;
    }
    r = read(fd, buf + len, cap - len);
    len += r > 0 ? (size_t)r : 0;
  }
  close(fd);
  if (buf)
    buf[len] = '\0';
  return buf;
}

/* Lines "ffffffff81000000 T name[\t[module]]": code symbols (t, T, w, W). */
static void *ksym_load(void *unused) {
  (void)unused;
  char *p = kt.text = read_all("/proc/kallsyms");
  size_t cap = 0;
  while (p && *p) {
    char *eol = strchr(p, '\n');
    if (eol)
      *eol = '\0';
    char *end;
    uint64_t addr = strtoull(p, &end, 16);
    if (addr && end[0] == ' ' && end[1] && strchr("tTwW", end[1]) && end[2] == ' ') {
      char *name = end + 3;
      name[strcspn(name, " \t")] = '\0';
      if (kt.n == cap) {
        size_t c = cap ? 2 * cap : 65536;
        ksym_t *g = realloc(kt.sym, c * sizeof *g);
        if (!g)
          break;
        kt.sym = g;
        cap = c;
      }
      kt.sym[kt.n++] = (ksym_t){addr, name, NULL};
    }
    p = eol ? eol + 1 : p + strlen(p);
  }
  if (kt.n)
    qsort(kt.sym, kt.n, sizeof *kt.sym, ksym_cmp);
  return NULL;
}

static void ksym_start(void) { kt.started = pthread_create(&kt.thread, NULL, ksym_load, NULL) == 0; }

void ksym_preload(void) { pthread_once(&kt.once, ksym_start); }

const char *ksym_name(uint64_t addr) {
  if (!kt.loaded) {
    ksym_preload();
    if (kt.started)
      pthread_join(kt.thread, NULL);
    else
      ksym_load(NULL);
    kt.loaded = true;
  }
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
