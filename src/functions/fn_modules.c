/* xptrace function hooks — the modules a program is made of: the program
 * and the libraries it needs (its DT_NEEDED, and theirs), not those only
 * our own preloaded library brought in (libdw, libelf, capstone and what
 * they need), nor those never patched (fn_module_skipped) and what only
 * they need. */
#include <elf.h>
#include <link.h>
#include <string.h>

#include "fn_internal.h"

static int fn_module_phdr(struct dl_phdr_info *info, size_t size, void *ctx) {
  (void)size;
  fn_modules_t *ms = ctx;
  if (ms->n == sizeof ms->m / sizeof ms->m[0])
    return 1;
  fn_module_t *m = &ms->m[ms->n];
  *m = (fn_module_t){
      .lo = UINTPTR_MAX, .name = info->dlpi_name ? info->dlpi_name : "", .base = info->dlpi_addr};
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_DYNAMIC)
      m->dynamic = (const void *)(info->dlpi_addr + ph->p_vaddr);
    if (ph->p_type == PT_GNU_RELRO) {
      m->relro_lo = info->dlpi_addr + ph->p_vaddr;
      m->relro_hi = m->relro_lo + ph->p_memsz;
    }
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
    if (a < m->lo)
      m->lo = a;
    if (b > m->hi)
      m->hi = b;
  }
  if (m->hi > m->lo)
    ++ms->n;
  return 0;
}

/* The loader relocates a loaded object's DT_STRTAB in place; the vDSO's
 * (read-only) stays an offset. */
static const char *fn_strtab(const fn_module_t *m) {
  for (const ElfW(Dyn) *d = m->dynamic; d && d->d_tag != DT_NULL; ++d)
    if (d->d_tag == DT_STRTAB) {
      uintptr_t p = d->d_un.d_ptr;
      return (const char *)(p < m->base ? p + m->base : p);
    }
  return NULL;
}

static const char *fn_basename(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Libraries never patched: the C library and the loader (everything runs
 * on them, the hooks too); the unwinders (an exception is unwound through
 * their own frames, whose return addresses must stay real; the sampler
 * unwinds in its signal handler, which may interrupt the patching); ours,
 * the sanitizers' runtimes, the vDSO. */
bool fn_module_is(const char *path, const char *const *prefixes, size_t n) {
  const char *base = fn_basename(path);
  for (size_t i = 0; i < n; ++i)
    if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return false;
}

static bool fn_module_skipped(const char *path) {
  static const char *const skip[] = {
      "libc.so",    "ld-linux",    "libm.so",    "libmvec.so",  "libpthread.so", "libdl.so",
      "librt.so",   "libgcc_s.so", "libunwind",  "libxpti",     "libxptrace_",   "libasan.so",
      "libtsan.so", "libubsan.so", "liblsan.so", "libclang_rt", "linux-vdso",    "linux-gate"};
  return !*fn_basename(path) || fn_module_is(path, skip, sizeof skip / sizeof skip[0]);
}

/* The module a DT_NEEDED name names: by file name, else by DT_SONAME. */
static fn_module_t *fn_module_named(fn_modules_t *ms, const char *needed) {
  for (unsigned i = 1; i < ms->n; ++i) {
    fn_module_t *m = &ms->m[i];
    if (strcmp(fn_basename(m->name), needed) == 0)
      return m;
    const char *strtab = fn_strtab(m);
    for (const ElfW(Dyn) *d = m->dynamic; strtab && d && d->d_tag != DT_NULL; ++d)
      if (d->d_tag == DT_SONAME && strcmp(strtab + d->d_un.d_val, needed) == 0)
        return m;
  }
  return NULL;
}

void fn_modules_list(fn_modules_t *ms) {
  ms->n = 0;
  dl_iterate_phdr(fn_module_phdr, ms);
  if (ms->n == 0)
    return;
  ms->m[0].wanted = true;
  /* Breadth first from the program: every module is visited once. */
  for (bool grew = true; grew;) {
    grew = false;
    for (unsigned i = 0; i < ms->n; ++i) {
      fn_module_t *m = &ms->m[i];
      const char *strtab = m->wanted ? fn_strtab(m) : NULL;
      for (const ElfW(Dyn) *d = m->dynamic; strtab && d && d->d_tag != DT_NULL; ++d) {
        fn_module_t *dep =
            d->d_tag == DT_NEEDED ? fn_module_named(ms, strtab + d->d_un.d_val) : NULL;
        /* A library never patched: neither are those only it needs
         * (libasan's libstdc++). */
        if (dep && !dep->wanted && !fn_module_skipped(dep->name))
          dep->wanted = grew = true;
      }
    }
  }
}
