/* xptrace sampler — counting stacks, symbolizing them, writing
 * samples.folded (flamegraph.pl, speedscope) and samples.csv, and the top
 * functions on stderr.  Called with the sampler's report lock held. */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampler_internal.h"
#include "xpt_collector.h"

/* ---- a small open-addressing table of pointers ------------------------- */

typedef struct ptable {
  void **slot;
  uint64_t *hash;
  size_t cap; /* power of two, or 0 */
  size_t len;
} ptable_t;

typedef bool (*ptable_eq_fn)(const void *entry, const void *key);

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static uint64_t hash_bytes(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (size_t i = 0; i < len; ++i)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return mix64(h);
}

/* The entry equal to key, or NULL; *index receives its slot or the free
 * slot where it belongs. */
static void *ptable_find(const ptable_t *t, uint64_t h, const void *key, ptable_eq_fn eq, size_t *index) {
  if (!t->cap)
    return NULL;
  size_t mask = t->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    if (!t->slot[i]) {
      *index = i;
      return NULL;
    }
    if (t->hash[i] == h && eq(t->slot[i], key)) {
      *index = i;
      return t->slot[i];
    }
  }
}

static bool ptable_grow(ptable_t *t) {
  size_t cap = t->cap ? t->cap * 2 : 256;
  void **slot = calloc(cap, sizeof *slot);
  uint64_t *hash = calloc(cap, sizeof *hash);
  if (!slot || !hash) {
    free(slot);
    free(hash);
    return false;
  }
  for (size_t i = 0; i < t->cap; ++i) {
    if (!t->slot[i])
      continue;
    size_t j = t->hash[i] & (cap - 1);
    while (slot[j])
      j = (j + 1) & (cap - 1);
    slot[j] = t->slot[i];
    hash[j] = t->hash[i];
  }
  free(t->slot);
  free(t->hash);
  t->slot = slot;
  t->hash = hash;
  t->cap = cap;
  return true;
}

/* Insert an entry known to be absent. */
static bool ptable_insert(ptable_t *t, uint64_t h, void *entry) {
  if ((t->len + 1) * 2 > t->cap && !ptable_grow(t))
    return false;
  size_t mask = t->cap - 1, i = h & mask;
  while (t->slot[i])
    i = (i + 1) & mask;
  t->slot[i] = entry;
  t->hash[i] = h;
  ++t->len;
  return true;
}

static void ptable_free(ptable_t *t, bool free_entries) {
  if (free_entries)
    for (size_t i = 0; i < t->cap; ++i)
      free(t->slot[i]);
  free(t->slot);
  free(t->hash);
  memset(t, 0, sizeof *t);
}

/* ---- stacks as recorded ------------------------------------------------- */

typedef struct stack_entry {
  uint64_t count;
  uint32_t thread;
  uint8_t clock;
  uint8_t truncated;
  uint16_t depth;
  uintptr_t pc[];
} stack_entry_t;

static ptable_t stacks;
static uint64_t stacks_lost; /* no memory to count them */

static bool stack_eq(const void *entry, const void *key) {
  const stack_entry_t *a = entry;
  const sample_record_t *b = key;
  return a->thread == b->thread && a->clock == b->clock && a->truncated == b->truncated &&
         a->depth == b->depth && memcmp(a->pc, b->pc, a->depth * sizeof(uintptr_t)) == 0;
}

void sampler_report_add(sample_buffer_t *buffer) {
  for (uint32_t i = 0; i < buffer->count; ++i) {
    const sample_record_t *s = sample_at(buffer, i);
    uint64_t seed = ((uint64_t)s->thread << 24) ^ ((uint64_t)s->clock << 16) ^
                    ((uint64_t)s->truncated << 20) ^ s->depth;
    uint64_t h = hash_bytes(s->pc, s->depth * sizeof(uintptr_t), seed);
    size_t index;
    stack_entry_t *e = ptable_find(&stacks, h, s, stack_eq, &index);
    if (e) {
      ++e->count;
      continue;
    }
    e = malloc(sizeof *e + s->depth * sizeof(uintptr_t));
    if (!e) {
      ++stacks_lost;
      continue;
    }
    e->count = 1;
    e->thread = s->thread;
    e->clock = s->clock;
    e->truncated = s->truncated;
    e->depth = s->depth;
    memcpy(e->pc, s->pc, s->depth * sizeof(uintptr_t));
    if (!ptable_insert(&stacks, h, e)) {
      free(e);
      ++stacks_lost;
    }
  }
}

void sampler_report_reset(void) {
  ptable_free(&stacks, true);
  stacks_lost = 0;
}

/* ---- symbols ------------------------------------------------------------------ */

typedef struct function {
  char *name;
  char *module;
  uint64_t self;
  uint64_t inclusive;
  size_t stamp; /* last stack counted in `inclusive`, + 1 */
} function_t;

typedef struct pc_entry {
  uintptr_t pc;
  function_t *fn;
} pc_entry_t;

typedef struct symbolizer {
  Dwfl *dwfl;
  char self_module[256]; /* the sampler's own frames are left out */
  ptable_t functions; /* function_t, by (name, module) */
  ptable_t pcs;       /* pc_entry_t */
} symbolizer_t;

typedef struct fn_key {
  const char *name;
  const char *module;
} fn_key_t;

static bool fn_eq(const void *entry, const void *key) {
  const function_t *f = entry;
  const fn_key_t *k = key;
  return strcmp(f->name, k->name) == 0 && strcmp(f->module, k->module) == 0;
}

static bool pc_eq(const void *entry, const void *key) {
  return ((const pc_entry_t *)entry)->pc == *(const uintptr_t *)key;
}

static char *debuginfo_path;
static const Dwfl_Callbacks dwfl_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

static const char *base_name(const char *path);

static void symbolizer_open(symbolizer_t *s) {
  memset(s, 0, sizeof *s);
  Dl_info self;
  if (dladdr((void *)symbolizer_open, &self) && self.dli_fname)
    snprintf(s->self_module, sizeof s->self_module, "%s", base_name(self.dli_fname));
  s->dwfl = dwfl_begin(&dwfl_callbacks);
  if (!s->dwfl)
    return;
  dwfl_report_begin(s->dwfl);
  if (dwfl_linux_proc_report(s->dwfl, getpid()) != 0 || dwfl_report_end(s->dwfl, NULL, NULL) != 0) {
    dwfl_end(s->dwfl);
    s->dwfl = NULL;
  }
}

static void symbolizer_close(symbolizer_t *s) {
  for (size_t i = 0; i < s->functions.cap; ++i) {
    function_t *f = s->functions.slot[i];
    if (f) {
      free(f->name);
      free(f->module);
    }
  }
  ptable_free(&s->functions, true);
  ptable_free(&s->pcs, true);
  if (s->dwfl)
    dwfl_end(s->dwfl);
}

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

static function_t *function_get(symbolizer_t *s, const char *raw_name, const char *module) {
  char *name = strdup(raw_name);
  if (!name)
    return NULL;
  /* "memcpy@@GLIBC_2.14": the version is not part of the name. */
  char *at = strchr(name, '@');
  if (at && at != name)
    *at = '\0';
  clean_name(name);
  fn_key_t key = {name, module};
  uint64_t h = hash_bytes(name, strlen(name), hash_bytes(module, strlen(module), 0));
  size_t index;
  function_t *f = ptable_find(&s->functions, h, &key, fn_eq, &index);
  if (f) {
    free(name);
    return f;
  }
  f = calloc(1, sizeof *f);
  if (!f) {
    free(name);
    return NULL;
  }
  f->name = name;
  f->module = strdup(module);
  if (!f->module || !ptable_insert(&s->functions, h, f)) {
    free(f->name);
    free(f->module);
    free(f);
    return NULL;
  }
  return f;
}

/* The function holding `pc`: libdw (full symbol table), else dladdr. */
static function_t *symbolize(symbolizer_t *s, uintptr_t pc) {
  uint64_t h = mix64(pc);
  size_t index;
  pc_entry_t *e = ptable_find(&s->pcs, h, &pc, pc_eq, &index);
  if (e)
    return e->fn;
  const char *name = NULL, *module = NULL;
  if (s->dwfl) {
    Dwfl_Module *m = dwfl_addrmodule(s->dwfl, (Dwarf_Addr)pc);
    if (m) {
      name = dwfl_module_addrname(m, (GElf_Addr)pc);
      module = dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    }
  }
  Dl_info info;
  if ((!name || !module) && dladdr((void *)pc, &info)) {
    if (!name)
      name = info.dli_sname;
    if (!module)
      module = info.dli_fname;
  }
  char unknown[PATH_MAX + 4];
  module = module && *module ? base_name(module) : "?";
  if (!name || !*name) {
    if (strcmp(module, "?") == 0)
      snprintf(unknown, sizeof unknown, "[unknown]");
    else
      snprintf(unknown, sizeof unknown, "[%s]", module);
    name = unknown;
  }
  function_t *f = function_get(s, name, module);
  e = malloc(sizeof *e);
  if (e) {
    e->pc = pc;
    e->fn = f;
    if (!ptable_insert(&s->pcs, h, e))
      free(e);
  }
  return f;
}

/* ---- output ---------------------------------------------------------------------- */

typedef struct strbuf {
  char *data;
  size_t len, cap;
} strbuf_t;

static bool sb_add(strbuf_t *b, const char *text) {
  size_t n = strlen(text);
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data)
      return false;
    b->data = data;
    b->cap = cap;
  }
  memcpy(b->data + b->len, text, n + 1);
  b->len += n;
  return true;
}

typedef struct folded_line {
  uint64_t count;
  char text[];
} folded_line_t;

static bool line_eq(const void *entry, const void *key) {
  return strcmp(((const folded_line_t *)entry)->text, key) == 0;
}

static int line_cmp(const void *a, const void *b) {
  return strcmp((*(folded_line_t *const *)a)->text, (*(folded_line_t *const *)b)->text);
}

static int function_cmp(const void *a, const void *b) {
  const function_t *x = *(function_t *const *)a, *y = *(function_t *const *)b;
  if (x->self != y->self)
    return x->self < y->self ? 1 : -1;
  if (x->inclusive != y->inclusive)
    return x->inclusive < y->inclusive ? 1 : -1;
  return strcmp(x->name, y->name);
}

static const char *thread_label(const sampler_summary_t *sum, uint32_t index, char *buf, size_t len) {
  const char *main_name = NULL, *name = NULL;
  for (size_t i = 0; i < sum->nthreads; ++i) {
    if (sum->threads[i].index == 0)
      main_name = sum->threads[i].name;
    if (sum->threads[i].index == index)
      name = sum->threads[i].name;
  }
  if (index == 0)
    snprintf(buf, len, "[main]");
  else if (name && *name && (!main_name || strcmp(name, main_name) != 0))
    snprintf(buf, len, "[thread-%u:%s]", (unsigned)index, name);
  else
    snprintf(buf, len, "[thread-%u]", (unsigned)index);
  clean_name(buf);
  return buf;
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

static FILE *open_output(const char *dir, const char *name, char *path, size_t len) {
  FILE *f = xpt_create_stream(dir, name, path, len);
  if (!f)
    xpt_msg("xptrace: cannot write %s: %s\n", path, strerror(errno));
  return f;
}

/* One clock: fold, count, write, print. */
static void report_clock(symbolizer_t *s, const char *dir, const sampler_summary_t *sum, int clock,
                         const char *stem) {
  ptable_t lines = {0};
  strbuf_t sb = {0};
  uint64_t total = 0;
  size_t stamp = 0;
  for (size_t i = 0; i < s->functions.cap; ++i) {
    function_t *f = s->functions.slot[i];
    if (f)
      f->self = f->inclusive = 0, f->stamp = 0;
  }
  for (size_t i = 0; i < stacks.cap; ++i) {
    const stack_entry_t *e = stacks.slot[i];
    if (!e || e->clock != clock)
      continue;
    total += e->count;
    ++stamp;
    char label[64];
    sb.len = 0;
    if (!sb_add(&sb, thread_label(sum, e->thread, label, sizeof label)))
      continue;
    if (e->truncated)
      sb_add(&sb, ";[truncated]");
    for (int d = (int)e->depth - 1; d >= 0; --d) {
      /* Return addresses point after the call: look up the call itself. */
      uintptr_t pc = d == 0 ? e->pc[0] : e->pc[d] - 1;
      function_t *f = symbolize(s, pc);
      if (f && strcmp(f->module, s->self_module) == 0)
        continue; /* the thread start trampoline */
      sb_add(&sb, ";");
      sb_add(&sb, f ? f->name : "[unknown]");
      if (!f)
        continue;
      if (d == 0)
        f->self += e->count;
      if (f->stamp != stamp) {
        f->stamp = stamp;
        f->inclusive += e->count;
      }
    }
    if (!sb.data)
      continue;
    uint64_t h = hash_bytes(sb.data, sb.len, 0);
    size_t index;
    folded_line_t *line = ptable_find(&lines, h, sb.data, line_eq, &index);
    if (line) {
      line->count += e->count;
      continue;
    }
    line = malloc(sizeof *line + sb.len + 1);
    if (!line)
      continue;
    line->count = e->count;
    memcpy(line->text, sb.data, sb.len + 1);
    if (!ptable_insert(&lines, h, line))
      free(line);
  }
  free(sb.data);

  char path[PATH_MAX + 64], name[64];
  /* samples.folded: sorted, one line per distinct stack. */
  folded_line_t **sorted = calloc(lines.len ? lines.len : 1, sizeof *sorted);
  size_t nlines = 0;
  for (size_t i = 0; sorted && i < lines.cap; ++i)
    if (lines.slot[i])
      sorted[nlines++] = lines.slot[i];
  if (sorted)
    qsort(sorted, nlines, sizeof *sorted, line_cmp);
  snprintf(name, sizeof name, "%s.folded", stem);
  char folded_path[PATH_MAX + 64];
  FILE *f = open_output(dir, name, folded_path, sizeof folded_path);
  if (f) {
    for (size_t i = 0; i < nlines; ++i)
      fprintf(f, "%s %llu\n", sorted[i]->text, (unsigned long long)sorted[i]->count);
    fclose(f);
  }
  free(sorted);
  ptable_free(&lines, true);

  /* samples.csv: per function, most self samples first. */
  function_t **fns = calloc(s->functions.len ? s->functions.len : 1, sizeof *fns);
  size_t nfns = 0;
  for (size_t i = 0; fns && i < s->functions.cap; ++i) {
    function_t *fn = s->functions.slot[i];
    if (fn && fn->inclusive)
      fns[nfns++] = fn;
  }
  if (fns)
    qsort(fns, nfns, sizeof *fns, function_cmp);
  snprintf(name, sizeof name, "%s.csv", stem);
  f = open_output(dir, name, path, sizeof path);
  double scale = total ? 100.0 / (double)total : 0;
  if (f) {
    fputs("function,module,self_samples,inclusive_samples,self_percent,inclusive_percent\n", f);
    for (size_t i = 0; i < nfns; ++i) {
      csv_field(f, fns[i]->name);
      fputc(',', f);
      csv_field(f, fns[i]->module);
      fprintf(f, ",%llu,%llu,%.2f,%.2f\n", (unsigned long long)fns[i]->self,
              (unsigned long long)fns[i]->inclusive, (double)fns[i]->self * scale,
              (double)fns[i]->inclusive * scale);
    }
    fclose(f);
  }

  uint64_t thread_samples = 0;
  size_t sampled_threads = 0;
  for (size_t i = 0; i < sum->nthreads; ++i) {
    thread_samples += sum->threads[i].samples[clock];
    sampled_threads += sum->threads[i].samples[clock] != 0;
  }
  (void)thread_samples;
  xpt_msg(
          "xptrace sample: %s (pid %d): %llu %s samples at %g Hz, %zu of %zu thread(s) sampled\n",
          xpt_program_name(), (int)getpid(), (unsigned long long)total,
          clock == SAMPLER_CPUTIME ? "cputime" : "realtime", sum->freq[clock], sampled_threads,
          sum->nthreads);
  if (sum->signal_note[clock])
    xpt_msg("xptrace sample: %s sampling stopped early: the program %s its signal\n",
            clock == SAMPLER_CPUTIME ? "cputime" : "realtime", sum->signal_note[clock]);
  if (nfns && !sum->brief) {
    xpt_msg("  %6s %6s %8s  %s\n", "self%", "incl%", "samples", "function (module)");
    for (size_t i = 0; i < nfns && i < 20; ++i)
      xpt_msg("  %6.1f %6.1f %8llu  %s (%s)\n", (double)fns[i]->self * scale,
              (double)fns[i]->inclusive * scale, (unsigned long long)fns[i]->self, fns[i]->name,
              fns[i]->module);
  }
  free(fns);
}

void sampler_report_write(const char *dir, const sampler_summary_t *sum) {
  symbolizer_t s;
  symbolizer_open(&s);
  bool first = true;
  for (int k = 0; k < SAMPLER_NCLOCKS; ++k) {
    if (!sum->on[k])
      continue;
    /* The first clock sampled owns samples.*; a second one gets its name. */
    report_clock(&s, dir, sum, k, first ? "samples" : "samples_realtime");
    first = false;
  }
  uint64_t dropped = sum->dropped + stacks_lost;
  xpt_msg("xptrace sample: %llu sample(s) dropped; output in %s\n",
          (unsigned long long)dropped, dir);
  symbolizer_close(&s);
  sampler_report_reset();
}
