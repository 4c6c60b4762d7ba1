/* xptrace sample --method perf: symbols (libdwfl, per module, from the
 * file offsets recorded at sample time) and the output files. */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_perf_internal.h"
#include "xpt_files.h"

typedef struct function {
  char *name, *module;
  uint64_t self, incl, stamp;
} function_t;

typedef struct frame_sym {
  uint64_t key[2];
  function_t *fn;
} frame_sym_t;

typedef struct symbols {
  htab_t functions; /* function_t by name and module */
  htab_t frames;    /* frame_sym_t by (module, offset) */
} symbols_t;

static char *debuginfo_path;
static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Frame names go into "a;b;c count" lines: no separators inside. */
static void clean_name(char *name) {
  for (char *p = name; *p; ++p)
    if (*p == ';' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
      *p = '_';
}

static int fn_eq(const void *entry, const void *key) {
  const function_t *f = entry, *k = key;
  return strcmp(f->name, k->name) == 0 && strcmp(f->module, k->module) == 0;
}

static int frame_eq(const void *entry, const void *key) {
  return memcmp(((const frame_sym_t *)entry)->key, key, sizeof(uint64_t[2])) == 0;
}

static function_t *function_get(symbols_t *y, const char *raw, const char *module) {
  char name[1024];
  snprintf(name, sizeof name, "%s", raw);
  char *at = strchr(name, '@'); /* "memcpy@@GLIBC_2.14" */
  if (at && at != name)
    *at = '\0';
  clean_name(name);
  function_t key = {.name = name, .module = (char *)module};
  uint64_t h = hash_mem(name, strlen(name), hash_mem(module, strlen(module), 0));
  if (ht_reserve(&y->functions) != 0)
    return NULL;
  size_t i = ht_find(&y->functions, h, &key, fn_eq);
  if (y->functions.slot[i])
    return y->functions.slot[i];
  function_t *f = calloc(1, sizeof *f + strlen(name) + strlen(module) + 2);
  if (!f)
    return NULL;
  f->name = (char *)(f + 1);
  strcpy(f->name, name);
  f->module = f->name + strlen(name) + 1;
  strcpy(f->module, module);
  y->functions.slot[i] = f;
  y->functions.hash[i] = h;
  y->functions.len++;
  return f;
}

/* The ELF address of a file offset: the PT_LOAD segment holding it. */
static bool offset_to_addr(Dwfl_Module *mod, uint64_t off, GElf_Addr *addr) {
  GElf_Addr bias;
  Elf *elf = dwfl_module_getelf(mod, &bias);
  size_t n;
  if (!elf || elf_getphdrnum(elf, &n) != 0)
    return false;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && off >= ph.p_offset &&
        off < ph.p_offset + ph.p_filesz) {
      *addr = off - ph.p_offset + ph.p_vaddr + bias;
      return true;
    }
  }
  return false;
}

static function_t *symbolize(state_t *s, symbols_t *y, uint64_t module, uint64_t off) {
  uint64_t key[2] = {module, off};
  uint64_t h = hash_mem(key, sizeof key, 0);
  if (ht_reserve(&y->frames) != 0)
    return NULL;
  size_t i = ht_find(&y->frames, h, key, frame_eq);
  if (y->frames.slot[i])
    return ((frame_sym_t *)y->frames.slot[i])->fn;
  function_t *fn;
  if (module == 0) {
    fn = function_get(y, "[unknown]", "?");
  } else {
    module_t *m = &s->modules[module - 1];
    if (!m->opened) {
      m->opened = true;
      /* "[vdso]", "[anon:...]": nothing to read from a file. */
      if (m->path[0] == '/' && (m->dwfl = dwfl_begin(&offline_callbacks)) != NULL) {
        dwfl_report_begin(m->dwfl);
        m->mod = dwfl_report_elf(m->dwfl, base_name(m->path), m->path, -1, 0, false);
        dwfl_report_end(m->dwfl, NULL, NULL);
      }
    }
    GElf_Addr addr;
    const char *name = NULL;
    if (m->mod && offset_to_addr(m->mod, off, &addr))
      name = dwfl_module_addrname(m->mod, addr);
    char unknown[PATH_MAX + 32];
    if (!name || !*name) {
      snprintf(unknown, sizeof unknown, "%s+0x%llx", base_name(m->path), (unsigned long long)off);
      name = unknown;
    }
    fn = function_get(y, name, base_name(m->path));
  }
  frame_sym_t *e = malloc(sizeof *e);
  if (e) {
    memcpy(e->key, key, sizeof key);
    e->fn = fn;
    y->frames.slot[i] = e;
    y->frames.hash[i] = h;
    y->frames.len++;
  }
  return fn;
}

static const char *thread_label(state_t *s, int tid, pid_t root, char *buf, size_t len) {
  const thread_t *t = NULL;
  for (size_t i = 0; i < s->nthreads && !t; ++i)
    if (s->threads[i].tid == tid)
      t = &s->threads[i];
  if (!t)
    return "[unknown]";
  proc_t *p = NULL;
  for (size_t i = 0; i < s->nprocs && !p; ++i)
    if (s->procs[i].pid == t->pid)
      p = &s->procs[i];
  int n = 0;
  /* Processes other than the command are named before their threads. */
  if (t->pid != root && p)
    n = snprintf(buf, len, "[%s-%d];", p->comm[0] ? p->comm : "process", t->pid);
  if (n < 0 || (size_t)n >= len)
    n = 0;
  if (t->index == 0)
    snprintf(buf + n, len - (size_t)n, "[main]");
  else if (t->comm[0] && p && strcmp(t->comm, p->comm) != 0)
    snprintf(buf + n, len - (size_t)n, "[thread-%u:%s]", t->index, t->comm);
  else
    snprintf(buf + n, len - (size_t)n, "[thread-%u]", t->index);
  for (char *c = buf + n; *c; ++c)
    if (*c == ';' || *c == ' ')
      *c = '_';
  return buf;
}

typedef struct line {
  uint64_t count;
  char text[];
} line_t;

static int line_eq(const void *entry, const void *key) {
  return strcmp(((const line_t *)entry)->text, key) == 0;
}

static int line_cmp(const void *a, const void *b) {
  return strcmp((*(line_t *const *)a)->text, (*(line_t *const *)b)->text);
}

static int fn_cmp(const void *a, const void *b) {
  const function_t *x = *(function_t *const *)a, *y = *(function_t *const *)b;
  if (x->self != y->self)
    return x->self < y->self ? 1 : -1;
  if (x->incl != y->incl)
    return x->incl < y->incl ? 1 : -1;
  return strcmp(x->name, y->name);
}

static void csv_field(FILE *f, const char *text) {
  if (!strpbrk(text, ",\"\n")) {
    fputs(text, f);
    return;
  }
  fputc('"', f);
  for (const char *p = text; *p; ++p) {
    if (*p == '"')
      fputc('"', f);
    fputc(*p, f);
  }
  fputc('"', f);
}

void sample_perf_report(state_t *s, const sample_perf_opts_t *o, const char *command, pid_t root,
                         double hz, double cpu) {
  symbols_t y = {0};
  htab_t lines = {0};
  size_t cap = 4096, stamp = 0;
  char *text = malloc(cap);
  uint64_t total = 0;
  for (size_t i = 0; text && i < s->stacks.cap; ++i) {
    const stack_t_ *st = s->stacks.slot[i];
    if (!st)
      continue;
    total += st->count;
    ++stamp;
    char label[128];
    size_t len = (size_t)snprintf(text, cap, "%s", thread_label(s, st->tid, root, label, sizeof label));
    for (uint32_t d = st->n; d-- > 0;) {
      /* Return addresses point after the call: look up the call itself. */
      uint64_t off = st->frame[d][1] - (d > 0 && st->frame[d][1] > 0);
      function_t *f = symbolize(s, &y, st->frame[d][0], off);
      const char *name = f ? f->name : "[unknown]";
      size_t need = len + strlen(name) + 2;
      if (need > cap) {
        char *bigger = realloc(text, cap = 2 * need);
        if (!bigger)
          break;
        text = bigger;
      }
      len += (size_t)sprintf(text + len, ";%s", name);
      if (!f)
        continue;
      if (d == 0)
        f->self += st->count;
      if (f->stamp != stamp) {
        f->stamp = stamp;
        f->incl += st->count;
      }
    }
    uint64_t h = hash_mem(text, len, 0);
    if (ht_reserve(&lines) != 0)
      continue;
    size_t j = ht_find(&lines, h, text, line_eq);
    if (lines.slot[j]) {
      ((line_t *)lines.slot[j])->count += st->count;
      continue;
    }
    line_t *l = malloc(sizeof *l + len + 1);
    if (!l)
      continue;
    l->count = st->count;
    memcpy(l->text, text, len + 1);
    lines.slot[j] = l;
    lines.hash[j] = h;
    lines.len++;
  }
  free(text);

  char path[PATH_MAX + 64];
  line_t **sorted = calloc(lines.len + 1, sizeof *sorted);
  size_t nl = 0;
  for (size_t i = 0; sorted && i < lines.cap; ++i)
    if (lines.slot[i])
      sorted[nl++] = lines.slot[i];
  if (sorted)
    qsort(sorted, nl, sizeof *sorted, line_cmp);
  FILE *f = xpt_create_stream(o->dir, "samples.folded", path, sizeof path);
  if (f) {
    for (size_t i = 0; i < nl; ++i)
      fprintf(f, "%s %llu\n", sorted[i]->text, (unsigned long long)sorted[i]->count);
    fclose(f);
  } else {
    fprintf(stderr, "xptrace: cannot write %s: %s\n", path, strerror(errno));
  }
  free(sorted);
  ht_free(&lines);

  function_t **fns = calloc(y.functions.len + 1, sizeof *fns);
  size_t nf = 0;
  for (size_t i = 0; fns && i < y.functions.cap; ++i) {
    function_t *fn = y.functions.slot[i];
    if (fn && fn->incl)
      fns[nf++] = fn;
  }
  if (fns)
    qsort(fns, nf, sizeof *fns, fn_cmp);
  double scale = total ? 100.0 / (double)total : 0;
  f = xpt_create_stream(o->dir, "samples.csv", path, sizeof path);
  if (f) {
    fputs("function,module,self_samples,inclusive_samples,self_percent,inclusive_percent\n", f);
    for (size_t i = 0; i < nf; ++i) {
      csv_field(f, fns[i]->name);
      fputc(',', f);
      csv_field(f, fns[i]->module);
      fprintf(f, ",%llu,%llu,%.2f,%.2f\n", (unsigned long long)fns[i]->self,
              (unsigned long long)fns[i]->incl, (double)fns[i]->self * scale,
              (double)fns[i]->incl * scale);
    }
    fclose(f);
  } else {
    fprintf(stderr, "xptrace: cannot write %s: %s\n", path, strerror(errno));
  }

  size_t sampled = 0;
  for (size_t i = 0; i < s->nthreads; ++i)
    sampled += s->threads[i].samples != 0;
  fprintf(stderr, "xptrace sample: %s (pid %d): %llu cputime samples at %g Hz, %zu of %zu thread(s) sampled\n",
          base_name(command), (int)root, (unsigned long long)total, hz, sampled, s->nthreads);
  if (nf) {
    fprintf(stderr, "  %6s %6s %8s  %s\n", "self%", "incl%", "samples", "function (module)");
    for (size_t i = 0; i < nf && i < 20; ++i)
      fprintf(stderr, "  %6.1f %6.1f %8llu  %s (%s)\n", (double)fns[i]->self * scale,
              (double)fns[i]->incl * scale, (unsigned long long)fns[i]->self, fns[i]->name,
              fns[i]->module);
  }
  free(fns);
  fprintf(stderr,
          "xptrace sample: method perf (kernel cpu-clock events, frame-pointer call chains): "
          "%.0f samples per CPU-second (%llu samples, %.3f CPU-seconds)\n",
          cpu > 0 ? (double)total / cpu : 0.0, (unsigned long long)total, cpu);
  if (s->truncated)
    fprintf(stderr, "xptrace sample: some stacks were deeper than --depth %u: their innermost frames were kept\n",
            o->depth);
  if (s->throttled)
    fprintf(stderr, "xptrace sample: the kernel throttled sampling %llu time(s) (kernel.perf_event_max_sample_rate)\n",
            (unsigned long long)s->throttled);
  fprintf(stderr, "xptrace sample: %llu sample(s) lost; output in %s\n", (unsigned long long)s->lost,
          o->dir);
  ht_free(&y.functions);
  ht_free(&y.frames);
}

void sample_perf_state_free(state_t *s) {
  for (size_t i = 0; i < s->nprocs; ++i)
    free(s->procs[i].maps);
  free(s->procs);
  free(s->threads);
  for (size_t i = 0; i < s->nmodules; ++i) {
    free(s->modules[i].path);
    if (s->modules[i].dwfl)
      dwfl_end(s->modules[i].dwfl);
  }
  free(s->modules);
  ht_free(&s->stacks);
}
