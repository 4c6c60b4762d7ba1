/* xptrace function hooks — names of functions (libdw: symbol tables of
 * every loaded module, static functions included), C++ demangling and
 * the selection filters.  Called with the function map's lock held, the
 * first time an address is seen. */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fn_internal.h"

static Dwfl *fn_dwfl;

static const Dwfl_Callbacks fn_dwfl_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};

/* (Re)read the process's modules: a library loaded since is seen. */
static bool fn_dwfl_report(void) {
  if (!fn_dwfl && !(fn_dwfl = dwfl_begin(&fn_dwfl_callbacks)))
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
