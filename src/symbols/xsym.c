/* Symbols with libdwfl/libdw: one offline Dwfl per file, looked up by
 * file offset; inlined frames from the DWARF scopes at the address. */
#include "xsym.h"
#include "xsym_plt.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strings owned by the symbolizer (interned) ---- */

typedef struct strtab {
  char **slot;
  size_t cap, len;
} strtab_t;

static uint64_t str_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

static const char *str_intern(strtab_t *t, const char *s) {
  if (!s)
    return NULL;
  if ((t->len + 1) * 2 > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 1024;
    char **slot = calloc(cap, sizeof *slot);
    if (!slot)
      return NULL;
    for (size_t i = 0; i < t->cap; ++i) {
      if (!t->slot[i])
        continue;
      size_t j = str_hash(t->slot[i]) & (cap - 1);
      while (slot[j])
        j = (j + 1) & (cap - 1);
      slot[j] = t->slot[i];
    }
    free(t->slot);
    t->slot = slot;
    t->cap = cap;
  }
  size_t i = str_hash(s) & (t->cap - 1);
  while (t->slot[i] && strcmp(t->slot[i], s) != 0)
    i = (i + 1) & (t->cap - 1);
  if (!t->slot[i]) {
    if (!(t->slot[i] = strdup(s)))
      return NULL;
    t->len++;
  }
  return t->slot[i];
}

static void strtab_free(strtab_t *t) {
  for (size_t i = 0; i < t->cap; ++i)
    free(t->slot[i]);
  free(t->slot);
}

/* ---- modules ---- */

struct xsym_module {
  char *path;
  const char *name; /* the real file's name (of `real`), else the path's */
  char *real;
  uint8_t build_id[64];
  size_t build_id_len;
  Dwfl *dwfl;
  Dwfl_Module *mod;
  bool opened, mismatch;
  /* Function starts (ELF addresses, sorted) from .eh_frame_hdr, read
   * when an address has no symbol; NULL: none there. */
  GElf_Addr *starts;
  size_t nstarts;
  bool starts_read;
};

/* Cached lookups: (module, offset) -> frames. */
typedef struct cached {
  const xsym_module_t *m;
  uint64_t off;
  uint32_t n, used;
  xsym_frame_t frames[];
} cached_t;

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

struct xsym {
  unsigned flags;
  xsym_module_t **mods;
  size_t nmods;
  strtab_t strings;
  cached_t **cache;
  size_t cache_cap, cache_len;
  demangle_fn demangle;
  void *libstdcxx;
  bool demangle_tried;
};

static char *debuginfo_path;
static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

xsym_t *xsym_new(unsigned flags) {
  xsym_t *x = calloc(1, sizeof *x);
  if (x)
    x->flags = flags;
  return x;
}

void xsym_free(xsym_t *x) {
  if (!x)
    return;
  for (size_t i = 0; i < x->nmods; ++i) {
    if (x->mods[i]->dwfl)
      dwfl_end(x->mods[i]->dwfl);
    free(x->mods[i]->path);
    free(x->mods[i]->real);
    free(x->mods[i]->starts);
    free(x->mods[i]);
  }
  free(x->mods);
  for (size_t i = 0; i < x->cache_cap; ++i)
    free(x->cache[i]);
  free(x->cache);
  strtab_free(&x->strings);
  if (x->libstdcxx)
    dlclose(x->libstdcxx);
  free(x);
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash && slash[1] ? slash + 1 : path;
}

xsym_module_t *xsym_module(xsym_t *x, const char *path, const uint8_t *build_id, size_t len) {
  if (len > sizeof(((xsym_module_t *)0)->build_id))
    len = 0;
  for (size_t i = 0; i < x->nmods; ++i) {
    xsym_module_t *m = x->mods[i];
    if (strcmp(m->path, path) == 0 &&
        (!len || !m->build_id_len ||
         (m->build_id_len == len && memcmp(m->build_id, build_id, len) == 0))) {
      if (!m->build_id_len && len) {
        memcpy(m->build_id, build_id, len);
        m->build_id_len = len;
      }
      return m;
    }
  }
  xsym_module_t **mods = realloc(x->mods, (x->nmods + 1) * sizeof *mods);
  if (!mods)
    return NULL;
  x->mods = mods;
  xsym_module_t *m = calloc(1, sizeof *m);
  if (!m || !(m->path = strdup(path))) {
    free(m);
    return NULL;
  }
  /* One name for one file: a library mapped through its soname link
   * (libz.so.1, as the loader names it) and through its file (perf's
   * libz.so.1.2.13) are the same module in every output. */
  m->real = realpath(m->path, NULL);
  m->name = base_name(m->real ? m->real : m->path);
  if (len) {
    memcpy(m->build_id, build_id, len);
    m->build_id_len = len;
  }
  x->mods[x->nmods++] = m;
  return m;
}

const char *xsym_module_path(const xsym_module_t *m) { return m->path; }
const char *xsym_module_name(const xsym_module_t *m) { return m->name; }
bool xsym_module_changed(const xsym_module_t *m) { return m->mismatch; }

static void module_open(xsym_module_t *m) {
  if (m->opened)
    return;
  m->opened = true;
  /* "[vdso]", "[anon:...]", "//anon": nothing to read from a file. */
  if (m->path[0] != '/' || !(m->dwfl = dwfl_begin(&offline_callbacks)))
    return;
  dwfl_report_begin(m->dwfl);
  m->mod = dwfl_report_elf(m->dwfl, m->name, m->path, -1, 0, false);
  dwfl_report_end(m->dwfl, NULL, NULL);
  if (m->mod && m->build_id_len) {
    const unsigned char *bits;
    GElf_Addr vaddr;
    int n = dwfl_module_build_id(m->mod, &bits, &vaddr);
    /* The file at this path is not the one that was mapped. */
    if (n > 0 && ((size_t)n != m->build_id_len || memcmp(bits, m->build_id, (size_t)n) != 0))
      m->mismatch = true;
  }
}

size_t xsym_module_file_build_id(xsym_t *x, xsym_module_t *m, const uint8_t **bits) {
  (void)x;
  module_open(m);
  const unsigned char *b;
  GElf_Addr vaddr;
  int n = m->mod ? dwfl_module_build_id(m->mod, &b, &vaddr) : 0;
  if (n <= 0)
    return 0;
  *bits = b;
  return (size_t)n;
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

const char *xsym_demangle(xsym_t *x, const char *name) {
  if (!name || !(x->flags & XSYM_DEMANGLE) || name[0] != '_' || name[1] != 'Z')
    return name;
  if (!x->demangle_tried) {
    /* libstdc++'s demangler, loaded only when a C++ name shows up: the
     * launcher stays a C program and works without libstdc++. */
    x->demangle_tried = true;
    x->libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    if (x->libstdcxx)
      *(void **)&x->demangle = dlsym(x->libstdcxx, "__cxa_demangle");
  }
  if (!x->demangle)
    return name;
  int status = -1;
  char *out = x->demangle(name, NULL, NULL, &status);
  if (status != 0 || !out) {
    free(out);
    return name;
  }
  const char *r = str_intern(&x->strings, out);
  free(out);
  return r ? r : name;
}

static const char *die_name(xsym_t *x, Dwarf_Die *die) {
  Dwarf_Attribute a;
  const char *linkage = NULL;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
      dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
    linkage = dwarf_formstring(&a);
  if (linkage)
    return xsym_demangle(x, linkage);
  return dwarf_diename(die);
}

static const char *cu_file(Dwarf_Die *cu, Dwarf_Word index) {
  Dwarf_Files *files;
  size_t n;
  if (dwarf_getsrcfiles(cu, &files, &n) != 0 || index >= n)
    return NULL;
  return dwarf_filesrc(files, index, NULL, NULL);
}

/* The innermost function, inlined call or block holding pc below `parent`,
 * looking inside namespaces and classes too: clang defines functions there,
 * where libdw's dwarf_getscopes (elfutils 0.188) does not look. */
static bool code_scope_at(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *out, int level) {
  Dwarf_Die child;
  if (level > 64 || dwarf_child(parent, &child) != 0)
    return false;
  do {
    switch (dwarf_tag(&child)) {
    case DW_TAG_subprogram:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_lexical_block:
      if (dwarf_haspc(&child, pc) > 0) {
        *out = child;
        code_scope_at(&child, pc, out, level + 1); /* deeper, if any */
        return true;
      }
      break;
    case DW_TAG_namespace:
    case DW_TAG_class_type:
    case DW_TAG_structure_type:
    case DW_TAG_union_type:
      if (code_scope_at(&child, pc, out, level + 1))
        return true;
      break;
    default:
      break;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
  return false;
}

/* The inlined calls at addr, innermost first, then the function. */
static size_t inline_frames(xsym_t *x, Dwfl_Module *mod, GElf_Addr addr, xsym_frame_t *out,
                            size_t max) {
  Dwarf_Addr bias;
  Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
  /* Without .debug_aranges (clang does not emit them) libdw finds no unit:
   * ask each unit whether it covers the address. */
  for (Dwarf_Die *c = NULL; !cu && (c = dwfl_module_nextcu(mod, c, &bias)) != NULL;)
    if (dwarf_haspc(c, addr - bias) > 0)
      cu = c;
  if (!cu)
    return 0;
  Dwarf_Die *scopes = NULL;
  int n = dwarf_getscopes(cu, addr - bias, &scopes);
  /* Past an inlined call, dwarf_getscopes follows its abstract origin;
   * the concrete chain of callers is the innermost scope's parents. */
  Dwarf_Die inner;
  if (n > 0) {
    inner = scopes[0];
  } else if (code_scope_at(cu, addr - bias, &inner, 0)) {
    n = 1;
  }
  free(scopes);
  scopes = NULL;
  if (n > 0)
    n = dwarf_getscopes_die(&inner, &scopes);
  size_t k = 0;
  const char *file = NULL;
  int line = 0;
  Dwfl_Line *l = dwfl_module_getsrc(mod, addr);
  Dwarf_Line *dl;
  if (l) {
    file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
  } else if ((dl = dwarf_getsrc_die(cu, addr - bias)) != NULL) {
    /* dwfl_module_getsrc finds its unit through .debug_aranges too (none
     * from clang): the unit found above has the line table. */
    file = dwarf_linesrc(dl, NULL, NULL);
    if (dwarf_lineno(dl, &line) != 0)
      line = 0;
  }
  for (int i = 0; i < n && k < max; ++i) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
      continue;
    const char *name = die_name(x, &scopes[i]);
    out[k].function = name ? str_intern(&x->strings, name) : NULL;
    out[k].file = file ? str_intern(&x->strings, file) : NULL;
    out[k].line = line > 0 ? (unsigned)line : 0;
    out[k].inlined = tag == DW_TAG_inlined_subroutine;
    ++k;
    if (tag == DW_TAG_subprogram)
      break;
    /* The caller's position is where this call was inlined. */
    Dwarf_Attribute a;
    Dwarf_Word w = 0;
    file = dwarf_attr(&scopes[i], DW_AT_call_file, &a) && dwarf_formudata(&a, &w) == 0 ? cu_file(cu, w) : NULL;
    line = dwarf_attr(&scopes[i], DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0 ? (int)w : 0;
  }
  free(scopes);
  return k;
}

static int32_t le32(const uint8_t *p) {
  return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* The function starts of .eh_frame_hdr's search table (the unwinder's
 * own index: one entry per function with unwind information), in the
 * encodings every x86-64 linker writes; another encoding: none. */
static void read_starts(xsym_module_t *m) {
  m->starts_read = true;
  GElf_Addr bias;
  Elf *elf = dwfl_module_getelf(m->mod, &bias);
  size_t n;
  if (!elf || elf_getphdrnum(elf, &n) != 0)
    return;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_GNU_EH_FRAME || ph.p_filesz < 12)
      continue;
    Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_BYTE);
    const uint8_t *h = d ? d->d_buf : NULL;
    /* version 1; eh_frame_ptr pcrel|sdata4; fde_count udata4; table datarel|sdata4 */
    if (!h || h[0] != 1 || h[1] != 0x1b || h[2] != 0x03 || h[3] != 0x3b)
      return;
    uint32_t count = (uint32_t)le32(h + 8);
    if (count == 0 || 12 + (size_t)count * 8 > ph.p_filesz || !(m->starts = malloc(count * sizeof *m->starts)))
      return;
    for (uint32_t k = 0; k < count; ++k)
      m->starts[k] = (GElf_Addr)((int64_t)ph.p_vaddr + le32(h + 12 + (size_t)k * 8)) + bias;
    m->nstarts = count;
    return;
  }
}

/* The start of the function holding `addr` (a module address). */
static bool function_start(xsym_module_t *m, GElf_Addr addr, GElf_Addr *start) {
  if (!m->starts_read)
    read_starts(m);
  size_t lo = 0, hi = m->nstarts;
  while (lo < hi) { /* the first start above addr */
    size_t mid = lo + (hi - lo) / 2;
    if (m->starts[mid] <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return false;
  *start = m->starts[lo - 1];
  return true;
}

static size_t resolve(xsym_t *x, xsym_module_t *m, uint64_t off, xsym_frame_t *out, size_t max) {
  module_open(m);
  GElf_Addr addr;
  size_t k = 0;
  if (m->mod && !m->mismatch && offset_to_addr(m->mod, off, &addr)) {
    k = inline_frames(x, m->mod, addr, out, max);
    /* The symbol table names the outermost function (also without DWARF). */
    GElf_Sym sym;
    GElf_Off soff;
    const char *name = dwfl_module_addrinfo(m->mod, addr, &soff, &sym, NULL, NULL, NULL);
    char plain[1024];
    if (name && *name) {
      snprintf(plain, sizeof plain, "%s", name);
      char *at = strchr(plain, '@'); /* "memcpy@@GLIBC_2.14" */
      if (at && at != plain)
        *at = '\0';
      const char *shown = str_intern(&x->strings, xsym_demangle(x, plain));
      if (k == 0) {
        out[0] = (xsym_frame_t){shown, NULL, 0, false};
        k = 1;
      } else if (!out[k - 1].inlined || k == max) {
        out[k - 1].function = shown;
      }
    }
  }
  for (size_t i = 0; i < k; ++i)
    if (!out[i].function)
      out[i].function = str_intern(&x->strings, "[unknown]");
  char plt[1024];
  GElf_Addr bias;
  Elf *elf = k == 0 && m->mod && !m->mismatch ? dwfl_module_getelf(m->mod, &bias) : NULL;
  if (elf && offset_to_addr(m->mod, off, &addr) && xsym_plt_name(elf, addr - bias, plt, sizeof plt)) {
    out[0] = (xsym_frame_t){str_intern(&x->strings, plt), NULL, 0, false};
    k = 1;
  }
  if (k == 0 || !out[k - 1].function) {
    /* No name: the function's start from the unwind tables, so that the
     * addresses of one function of a stripped library are one row. */
    GElf_Addr start;
    if (m->mod && !m->mismatch && offset_to_addr(m->mod, off, &addr) &&
        function_start(m, addr, &start) && start <= addr && addr - start <= off)
      off -= addr - start;
    char unknown[1200];
    snprintf(unknown, sizeof unknown, "%s+0x%llx", m->name, (unsigned long long)off);
    out[0] = (xsym_frame_t){str_intern(&x->strings, unknown), NULL, 0, false};
    k = 1;
  }
  return k;
}

static uint64_t cache_hash(const xsym_module_t *m, uint64_t off) {
  uint64_t h = ((uint64_t)(uintptr_t)m * 0x9e3779b97f4a7c15ull) ^ (off * 0xff51afd7ed558ccdull);
  return h ^ (h >> 31);
}

size_t xsym_lookup(xsym_t *x, xsym_module_t *m, uint64_t off, xsym_frame_t *out, size_t max) {
  if (max == 0)
    return 0;
  if ((x->cache_len + 1) * 2 > x->cache_cap) {
    size_t cap = x->cache_cap ? 2 * x->cache_cap : 4096;
    cached_t **c = calloc(cap, sizeof *c);
    if (!c)
      return resolve(x, m, off, out, max);
    for (size_t i = 0; i < x->cache_cap; ++i) {
      if (!x->cache[i])
        continue;
      size_t j = cache_hash(x->cache[i]->m, x->cache[i]->off) & (cap - 1);
      while (c[j])
        j = (j + 1) & (cap - 1);
      c[j] = x->cache[i];
    }
    free(x->cache);
    x->cache = c;
    x->cache_cap = cap;
  }
  size_t i = cache_hash(m, off) & (x->cache_cap - 1);
  while (x->cache[i] && !(x->cache[i]->m == m && x->cache[i]->off == off))
    i = (i + 1) & (x->cache_cap - 1);
  cached_t *e = x->cache[i];
  if (!e) {
    xsym_frame_t frames[32];
    size_t n = resolve(x, m, off, frames, 32);
    e = malloc(sizeof *e + n * sizeof frames[0]);
    if (!e) {
      n = n < max ? n : max;
      memcpy(out, frames, n * sizeof *out);
      return n;
    }
    e->m = m;
    e->off = off;
    e->n = (uint32_t)n;
    memcpy(e->frames, frames, n * sizeof frames[0]);
    x->cache[i] = e;
    x->cache_len++;
  }
  size_t n = e->n < max ? e->n : max;
  memcpy(out, e->frames, n * sizeof *out);
  /* Cut: keep the outermost function rather than an inlined middle. */
  if (n < e->n)
    out[n - 1] = e->frames[e->n - 1];
  return n;
}

/* ---- mappings over time ---- */

typedef struct pmaps {
  pid_t pid;
  xsym_map_t *v;
  size_t n, cap;
  uint64_t generation;
} pmaps_t;

struct xsym_maps {
  pmaps_t *p;
  size_t n, cap;
};

xsym_maps_t *xsym_maps_new(void) { return calloc(1, sizeof(xsym_maps_t)); }

void xsym_maps_free(xsym_maps_t *ms) {
  if (!ms)
    return;
  for (size_t i = 0; i < ms->n; ++i)
    free(ms->p[i].v);
  free(ms->p);
  free(ms);
}

static pmaps_t *pmaps_find(const xsym_maps_t *ms, pid_t pid) {
  for (size_t i = ms->n; i-- > 0;)
    if (ms->p[i].pid == pid)
      return &ms->p[i];
  return NULL;
}

static pmaps_t *pmaps_get(xsym_maps_t *ms, pid_t pid) {
  pmaps_t *p = pmaps_find(ms, pid);
  if (p)
    return p;
  if (ms->n == ms->cap) {
    size_t cap = ms->cap ? 2 * ms->cap : 16;
    pmaps_t *v = realloc(ms->p, cap * sizeof *v);
    if (!v)
      return NULL;
    ms->p = v;
    ms->cap = cap;
  }
  p = &ms->p[ms->n++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  return p;
}

static void pmaps_push(pmaps_t *p, const xsym_map_t *m) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    xsym_map_t *v = realloc(p->v, cap * sizeof *v);
    if (!v)
      return;
    p->v = v;
    p->cap = cap;
  }
  p->v[p->n++] = *m;
  p->generation++;
}

void xsym_maps_add(xsym_maps_t *ms, pid_t pid, uint64_t t, uint64_t start, uint64_t end,
                   uint64_t pgoff, xsym_module_t *m) {
  pmaps_t *p = pmaps_get(ms, pid);
  if (!p || end <= start)
    return;
  for (size_t i = 0; i < p->n; ++i) {
    xsym_map_t *o = &p->v[i];
    if (o->t_end == UINT64_MAX && o->start < end && start < o->end)
      o->t_end = t;
  }
  pmaps_push(p, &(xsym_map_t){start, end, pgoff, t, UINT64_MAX, m});
}

void xsym_maps_end_all(xsym_maps_t *ms, pid_t pid, uint64_t t) {
  pmaps_t *p = pmaps_find(ms, pid);
  if (!p)
    return;
  for (size_t i = 0; i < p->n; ++i)
    if (p->v[i].t_end == UINT64_MAX)
      p->v[i].t_end = t;
  p->generation++;
}

void xsym_maps_fork(xsym_maps_t *ms, pid_t parent, pid_t child, uint64_t t) {
  (void)t;
  pmaps_t *c = pmaps_get(ms, child); /* first: it may move the array */
  pmaps_t *p = pmaps_find(ms, parent);
  if (!c || !p || c == p)
    return;
  for (size_t i = 0; i < p->n; ++i)
    if (p->v[i].t_end == UINT64_MAX) {
      xsym_map_t m = p->v[i];
      m.t_begin = 0; /* the child had them from its start */
      pmaps_push(c, &m);
    }
}

const xsym_map_t *xsym_maps_find(const xsym_maps_t *ms, pid_t pid, uint64_t t, uint64_t addr) {
  const pmaps_t *p = pmaps_find(ms, pid);
  if (!p)
    return NULL;
  const xsym_map_t *alive = NULL;
  for (size_t i = p->n; i-- > 0;) {
    const xsym_map_t *m = &p->v[i];
    if (addr < m->start || addr >= m->end)
      continue;
    if (m->t_begin <= t && t < m->t_end)
      return m;
    /* A sample stamped a little before its mapping's record (records of
     * several CPUs are merged): the newest mapping at that address. */
    if (!alive && m->t_begin > t)
      alive = m;
  }
  return alive;
}

const xsym_map_t *xsym_maps_all(const xsym_maps_t *ms, pid_t pid, size_t *n, uint64_t *generation) {
  const pmaps_t *p = pmaps_find(ms, pid);
  *n = p ? p->n : 0;
  if (generation)
    *generation = p ? p->generation : 0;
  return p ? p->v : NULL;
}
