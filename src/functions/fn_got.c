/* xptrace function hooks — calls into the C library, at their call sites.
 *
 * The C library is never patched (everything runs on it, the hooks too).
 * A regex that names one of its functions is served through the PLT
 * instead: each slot of the program's (and its libraries') GOT bound to
 * that function points to a stub of its own, whose body jumps to the
 * function, so the same entry and exit hooks time the call.  Calls made
 * inside the C library, or through a pointer taken elsewhere, are not
 * seen.  A slot not bound yet (lazy binding) is bound here, with the
 * symbol's version.  Refused, with one line each: functions that return
 * twice (a hijacked return would have no frame the second time) and
 * those that look at their caller (dlsym's RTLD_NEXT). */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fn_internal.h"
#include "fn_stub.h"
#include "xpt_msg.h"

typedef struct fn_got_site {
  uintptr_t *slot; /* NULL: not written */
  uintptr_t orig;  /* the function: what the slot is put back to */
  bool ro;         /* in the read-only part (RELRO) */
} fn_got_site_t;

static fn_got_site_t *got_sites;
static size_t got_n, got_cap;

/* The C library's modules: their functions are traced at call sites. */
static bool fn_libc_module(const char *path) {
  static const char *const libc[] = {"libc.so",       "libm.so",  "libmvec.so",
                                     "libpthread.so", "libdl.so", "librt.so"};
  return fn_module_is(path, libc, sizeof libc / sizeof libc[0]);
}

static const char *fn_got_refusal(const char *name) {
  static const char *const twice[] = {"setjmp",  "_setjmp",          "__sigsetjmp", "sigsetjmp",
                                      "vfork",   "__vfork",          "getcontext",  "swapcontext",
                                      "savectx", "__libc_start_main"};
  static const char *const caller[] = {"dlsym", "dlvsym", "dlopen", "dlmopen", "__libc_dlsym"};
  for (size_t i = 0; i < sizeof twice / sizeof twice[0]; ++i)
    if (strcmp(name, twice[i]) == 0)
      return "it returns twice";
  for (size_t i = 0; i < sizeof caller / sizeof caller[0]; ++i)
    if (strcmp(name, caller[i]) == 0)
      return "it depends on its caller's address";
  return NULL;
}

/* A dynamic-section pointer: relocated in place by the loader, except in
 * read-only dynamic sections (an offset then). */
static const void *fn_dyn_ptr(const fn_module_t *m, uintptr_t p) {
  return (const void *)(p < m->base ? p + m->base : p);
}

typedef struct fn_dyn {
  const ElfW(Rela) * jmprel;
  size_t njmprel;
  const ElfW(Sym) * symtab;
  const char *strtab;
  const ElfW(Half) * versym;
  const ElfW(Verneed) * verneed;
} fn_dyn_t;

static bool fn_dyn_read(const fn_module_t *m, fn_dyn_t *d) {
  memset(d, 0, sizeof *d);
  bool rela = false;
  for (const ElfW(Dyn) *e = m->dynamic; e && e->d_tag != DT_NULL; ++e)
    switch (e->d_tag) {
    case DT_JMPREL:
      d->jmprel = fn_dyn_ptr(m, e->d_un.d_ptr);
      break;
    case DT_PLTRELSZ:
      d->njmprel = e->d_un.d_val / sizeof(ElfW(Rela));
      break;
    case DT_PLTREL:
      rela = e->d_un.d_val == DT_RELA;
      break;
    case DT_SYMTAB:
      d->symtab = fn_dyn_ptr(m, e->d_un.d_ptr);
      break;
    case DT_STRTAB:
      d->strtab = fn_dyn_ptr(m, e->d_un.d_ptr);
      break;
    case DT_VERSYM:
      d->versym = fn_dyn_ptr(m, e->d_un.d_ptr);
      break;
    case DT_VERNEED:
      d->verneed = fn_dyn_ptr(m, e->d_un.d_ptr);
      break;
    }
  return rela && d->jmprel && d->njmprel && d->symtab && d->strtab;
}

/* The version a symbol of this module is bound with (NULL: none). */
static const char *fn_sym_version(const fn_dyn_t *d, size_t sym) {
  unsigned index = d->versym ? d->versym[sym] & 0x7fff : 0;
  if (index < 2 || !d->verneed)
    return NULL;
  for (const ElfW(Verneed) *vn = d->verneed;;
       vn = (const ElfW(Verneed) *)((const char *)vn + vn->vn_next)) {
    const ElfW(Vernaux) *a = (const ElfW(Vernaux) *)((const char *)vn + vn->vn_aux);
    for (unsigned k = 0; k < vn->vn_cnt;
         ++k, a = (const ElfW(Vernaux) *)((const char *)a + a->vna_next))
      if (a->vna_other == index)
        return d->strtab + a->vna_name;
    if (!vn->vn_next)
      return NULL;
  }
}

/* Whether a GOT slot lies in the part the loader made read-only (RELRO). */
static bool fn_got_ro(const fn_module_t *m, const uintptr_t *slot) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = (uintptr_t)slot & ~(page - 1);
  return at >= (m->relro_lo & ~(page - 1)) && at < (m->relro_hi & ~(page - 1));
}

static bool fn_got_write(uintptr_t *slot, bool ro, uintptr_t value) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = (uintptr_t)slot & ~(page - 1);
  if (ro && mprotect((void *)at, page, PROT_READ | PROT_WRITE) != 0)
    return false;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  if (ro)
    mprotect((void *)at, page, PROT_READ);
  return true;
}

static bool fn_got_site_add(uintptr_t *slot, uintptr_t orig, bool ro) {
  if (got_n == got_cap) {
    size_t cap = got_cap ? 2 * got_cap : 64;
    fn_got_site_t *s = realloc(got_sites, cap * sizeof *s);
    if (!s)
      return false;
    got_sites = s;
    got_cap = cap;
  }
  got_sites[got_n++] = (fn_got_site_t){slot, orig, ro};
  return true;
}

unsigned fn_got_hook(const fn_module_t *m) {
  fn_dyn_t d;
  if (!fn_dyn_read(m, &d))
    return 0;
  size_t len = (d.njmprel * FN_STUB_SIZE + 0xffff) & ~(size_t)0xffff;
  uint8_t *stubs = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stubs == MAP_FAILED)
    return 0;
  size_t used = 0, first = got_n;
  for (size_t i = 0; i < d.njmprel; ++i) {
    const ElfW(Rela) *r = &d.jmprel[i];
    if (ELF64_R_TYPE(r->r_info) != R_X86_64_JUMP_SLOT)
      continue;
    size_t sym = ELF64_R_SYM(r->r_info);
    const ElfW(Sym) *s = &d.symtab[sym];
    const char *name = d.strtab + s->st_name;
    if (!*name || !fn_selected(name))
      continue;
    uintptr_t *slot = (uintptr_t *)(m->base + r->r_offset);
    uintptr_t target = *slot;
    Dl_info info;
    if (target >= m->lo && target < m->hi) { /* its PLT entry: not bound yet */
      /* The loader would bind the first definition in scope: an object
       * without versions (an interposer: ours) takes any version. */
      const char *version = fn_sym_version(&d, sym);
      void *in_scope = dlsym(RTLD_DEFAULT, name);
      void *versioned = version ? dlvsym(RTLD_DEFAULT, name, version) : in_scope;
      Dl_info vi;
      bool same_object = in_scope && versioned && dladdr(in_scope, &info) &&
                         dladdr(versioned, &vi) && info.dli_fbase == vi.dli_fbase;
      target = (uintptr_t)(same_object ? versioned : in_scope);
    }
    if (!target || !dladdr((void *)target, &info) || !info.dli_fname ||
        !fn_libc_module(info.dli_fname))
      continue; /* not the C library's (ours, or a library patched at its entry) */
    const char *why = fn_got_refusal(name);
    if (why) {
      xpt_msg("xpti: functions: cannot patch %s: %s", name, why);
      continue;
    }
    fn_func_t *f = fn_func_add(target, name);
    if (!f || !f->event || !fn_got_site_add(slot, target, fn_got_ro(m, slot)))
      continue;
    fn_stub_end(fn_stub_begin(stubs + used, f), target);
    used += FN_STUB_SIZE;
  }
  if (!used) {
    munmap(stubs, len);
    return 0;
  }
  mprotect(stubs, len, PROT_READ | PROT_EXEC);
  unsigned hooked = 0;
  for (size_t k = first, n = 0; k < got_n; ++k, n += FN_STUB_SIZE)
    if (fn_got_write(got_sites[k].slot, got_sites[k].ro, (uintptr_t)stubs + n))
      ++hooked;
    else
      got_sites[k].slot = NULL;
  return hooked;
}

/* The slots get their functions back (the stubs stay: a call already in
 * one returns through it). */
void fn_got_unhook(void) {
  for (size_t k = 0; k < got_n; ++k)
    if (got_sites[k].slot)
      fn_got_write(got_sites[k].slot, got_sites[k].ro, got_sites[k].orig);
  got_n = 0;
}
