/* Kernel frame names from /proc/kallsyms (sample_kernel.h).  The kernel
 * takes ~40-90 ms of system time to write the file (120,000 symbols), so
 * it is read by a thread of its own from the first kernel frame on
 * (ksym_preload), parsed in place (one buffer, no copy per symbol), and
 * its code symbols are kept in a cache per boot and set of loaded
 * modules ($XDG_CACHE_HOME/xptrace, else ~/.cache/xptrace), which later
 * runs read in a few milliseconds. */
#include "sample_kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* The whole of an open file, NUL-terminated; closes fd. */
static char *read_fd(int fd) {
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

static char *read_all(const char *path) { return read_fd(open(path, O_RDONLY | O_CLOEXEC)); }

/* The cache's path for this boot and these modules (their addresses
 * change with every load); false when there is no home to keep it in. */
static bool cache_path(char *dir, size_t dlen, char *path, size_t plen) {
  const char *off = getenv("XPTRACE_KSYM_CACHE");
  if (off && strcmp(off, "0") == 0)
    return false;
  const char *xdg = secure_getenv("XDG_CACHE_HOME"), *home = secure_getenv("HOME");
  /* A sysctl file refuses reads of megabytes (ENOMEM): a small one. */
  char boot[40] = "";
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, boot, 36) : -1;
  if (fd >= 0)
    close(fd);
  boot[got == 36 ? 36 : 0] = '\0';
  char *mods = read_all("/proc/modules");
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the module list */
  for (const char *c = mods; c && *c; ++c)
    h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
  bool ok = boot[0] && ((xdg && xdg[0] == '/') || (home && home[0] == '/'));
  if (ok) {
    if (xdg && xdg[0] == '/')
      snprintf(dir, dlen, "%s/xptrace", xdg);
    else
      snprintf(dir, dlen, "%s/.cache/xptrace", home);
    snprintf(path, plen, "%s/kallsyms-%.36s-%016llx", dir, boot, (unsigned long long)h);
  }
  free(mods);
  return ok;
}

/* Ours alone: a regular file or folder of this user that no one else can write. */
static bool private_to_us(const struct stat *st, bool folder) {
  return (folder ? S_ISDIR(st->st_mode) : S_ISREG(st->st_mode)) && st->st_uid == geteuid() &&
         !(st->st_mode & (S_IWGRP | S_IWOTH));
}

static char *cache_read(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !private_to_us(&st, false))) {
    close(fd);
    return NULL;
  }
  return read_fd(fd);
}

/* Written once per boot and module set: a new file, renamed into place. */
static void cache_write(const char *dir, const char *path) {
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {
    *slash = '\0';
    mkdir(parent, 0700); /* ~/.cache, when missing */
  }
  struct stat st;
  if ((mkdir(dir, 0700) != 0 && errno != EEXIST) || lstat(dir, &st) != 0 || !private_to_us(&st, true))
    return;
  char tmp[PATH_MAX + 128];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    if (fd >= 0)
      close(fd);
    return;
  }
  for (size_t i = 0; i < kt.n; ++i)
    fprintf(f, "%016llx t %s\n", (unsigned long long)kt.sym[i].addr, kt.sym[i].name);
  if (fclose(f) != 0 || rename(tmp, path) != 0)
    unlink(tmp);
}

/* Lines "ffffffff81000000 T name[\t[module]]": code symbols (t, T, w, W). */
static void *ksym_load(void *unused) {
  (void)unused;
  char dir[PATH_MAX], path[PATH_MAX + 64];
  bool cacheable = cache_path(dir, sizeof dir, path, sizeof path);
  char *cached = cacheable ? cache_read(path) : NULL;
  char *p = kt.text = cached ? cached : read_all("/proc/kallsyms");
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
  if (cacheable && !cached && kt.n) /* addresses hidden (kptr_restrict): nothing kept */
    cache_write(dir, path);
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
