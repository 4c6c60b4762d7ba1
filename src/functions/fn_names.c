/* xptrace function hooks — names of functions (libdw: symbol tables of
 * every loaded module, static functions included), C++ demangling and
 * the selection filters.  Called with the function map's lock held, the
 * first time an address is seen. */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fn_internal.h"
#include "xsym_proc.h"

static Dwfl *fn_dwfl;

/* (Re)read the process's modules: a library loaded since is seen. */
static bool fn_dwfl_report(void) {
  if (!fn_dwfl && !(fn_dwfl = dwfl_begin(&xsym_proc_callbacks)))
    return false;
  dwfl_report_begin(fn_dwfl);
  if (dwfl_linux_proc_report(fn_dwfl, getpid()) != 0 ||
      dwfl_report_end(fn_dwfl, NULL, NULL) != 0) {
    dwfl_end(fn_dwfl);
    fn_dwfl = NULL;
    return false;
  }
  return true;
}

/* What libdw holds (the files it read, and the debuginfod client it
 * starts for a module without symbols when DEBUGINFOD_URLS names a
 * server: a socket pair at the lowest free descriptors) goes once
 * patching is done. */
void fn_names_release(void) {
  if (fn_dwfl)
    dwfl_end(fn_dwfl);
  fn_dwfl = NULL;
}

bool fn_name_of(uintptr_t addr, char *name, size_t len, const char **module, uintptr_t *offset) {
  name[0] = '\0';
  if (!fn_dwfl && !fn_dwfl_report())
    return false;
  Dwfl_Module *m = dwfl_addrmodule(fn_dwfl, (Dwarf_Addr)addr);
  if (!m) {
    if (!fn_dwfl_report() || !(m = dwfl_addrmodule(fn_dwfl, (Dwarf_Addr)addr)))
      return false;
  }
  Dwarf_Addr base = 0;
  const char *path = dwfl_module_info(m, NULL, &base, NULL, NULL, NULL, NULL, NULL);
  *module = path;
  *offset = (uintptr_t)(addr - base);
  const char *sym = dwfl_module_addrname(m, (GElf_Addr)addr);
  if (!sym)
    return false;
  snprintf(name, len, "%s", sym);
  return true;
}

int fn_each_function(uintptr_t in_module, fn_each_cb_t each, void *arg, const char **module,
                     bool *symtab) {
  *module = NULL;
  *symtab = false;
  if (!fn_dwfl && !fn_dwfl_report())
    return -1;
  Dwfl_Module *m = dwfl_addrmodule(fn_dwfl, (Dwarf_Addr)in_module);
  if (!m)
    return -1;
  /* libdw's best table: the file's .symtab, else that of a separate debug
   * file (build id under /usr/lib/debug, a debug link, debuginfod when
   * DEBUGINFOD_URLS names a server: xsym_proc.h), else .dynsym. */
  int n = dwfl_module_getsymtab(m);
  const char *debug = NULL;
  *module = dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, &debug);
  GElf_Addr bias = 0;
  Elf *main_elf = dwfl_module_getelf(m, &bias);
  for (Elf_Scn *scn = NULL; main_elf && !*symtab && (scn = elf_nextscn(main_elf, scn));) {
    GElf_Shdr h;
    *symtab = gelf_getshdr(scn, &h) && h.sh_type == SHT_SYMTAB;
  }
  *symtab = *symtab || debug != NULL;
  int calls = 0;
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    Elf *elf = NULL;
    Dwarf_Addr sym_bias = 0;
    const char *name = dwfl_module_getsym_info(m, i, &sym, &addr, &shndx, &elf, &sym_bias);
    if (!name || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0 ||
        shndx == SHN_UNDEF || !elf)
      continue;
    ++calls;
    each(name, (uintptr_t)addr, (size_t)sym.st_size, elf, shndx, arg);
  }
  return calls;
}

typedef char *(*fn_demangle_t)(const char *, char *, size_t *, int *);

const char *fn_demangle(const char *name, char *buf, size_t len) {
  if (strncmp(name, "_Z", 2) != 0)
    return name;
  /* libstdc++'s demangler, present whenever C++ code is. */
  static fn_demangle_t demangle;
  static bool looked;
  if (!looked) {
    demangle = (fn_demangle_t)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    looked = true;
  }
  if (!demangle)
    return name;
  int status = 0;
  char *out = demangle(name, NULL, NULL, &status);
  if (!out || status != 0) {
    free(out);
    return name;
  }
  snprintf(buf, len, "%s", out);
  free(out);
  return buf;
}

bool fn_selected(const char *name) {
  if (fn_cfg.has_select && regexec(&fn_cfg.select, name, 0, NULL, 0) != 0)
    return false;
  if (fn_cfg.has_exclude && regexec(&fn_cfg.exclude, name, 0, NULL, 0) == 0)
    return false;
  return true;
}
