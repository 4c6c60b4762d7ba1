/* file:line of the program's call sites (graph nodes keyed by code
 * location, document 002), through libdw on this process's modules: the
 * API layers' (OpenCL, Level Zero) in-process lookup (xsym_site.h). */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xpti/xpti_data_types.h>

#include "xsym_proc.h"
#include "xsym_site.h"

#define SITE_CACHE 256

typedef struct site_entry {
  const void *address;
  bool known;
  uint32_t line;
  char file[256];
} site_entry_t;

static pthread_mutex_t site_lock = PTHREAD_MUTEX_INITIALIZER;
static site_entry_t site_cache[SITE_CACHE];
static Dwfl *site_dwfl;
static bool site_dwfl_failed;

static Dwfl *site_open(void) {
  Dwfl *d = dwfl_begin(&xsym_proc_callbacks); /* its files kept out of the program's way */
  if (d && (dwfl_linux_proc_report(d, getpid()) != 0 || dwfl_report_end(d, NULL, NULL) != 0)) {
    dwfl_end(d);
    d = NULL;
  }
  return d;
}

/* libdw maps an address to its unit through .debug_aranges only, and
 * takes a missing section for "no addresses"; clang (since 11) emits none
 * by default: ask each unit's DIE whether it holds pc. */
static const char *site_by_unit(Dwfl_Module *m, Dwarf_Addr pc, int *line) {
  Dwarf_Addr bias;
  Dwarf *dw = dwfl_module_getdwarf(m, &bias);
  Dwarf_CU *cu = NULL;
  Dwarf_Die unit;
  while (dw && dwarf_get_units(dw, cu, &cu, NULL, NULL, &unit, NULL) == 0) {
    if (dwarf_haspc(&unit, pc - bias) == 1) {
      Dwarf_Line *l = dwarf_getsrc_die(&unit, pc - bias);
      return l && dwarf_lineno(l, line) == 0 ? dwarf_linesrc(l, NULL, NULL) : NULL;
    }
  }
  return NULL;
}

void xsym_site_resolve(const void *address, char *file, size_t size, uint32_t *line) {
  file[0] = 0;
  *line = XPTI_INVALID_LINE;
  pthread_mutex_lock(&site_lock);
  site_entry_t *e = &site_cache[((uintptr_t)address >> 2) % SITE_CACHE];
  if (e->address != address) {
    e->address = address;
    e->known = false;
    if (!site_dwfl && !site_dwfl_failed)
      site_dwfl_failed = !(site_dwfl = site_open());
    Dwarf_Addr pc = (Dwarf_Addr)(uintptr_t)address - 1; /* the call instruction */
    Dwfl_Module *m = site_dwfl ? dwfl_addrmodule(site_dwfl, pc) : NULL;
    Dwfl_Line *l = m ? dwfl_module_getsrc(m, pc) : NULL;
    int ln = 0;
    const char *src = l ? dwfl_lineinfo(l, NULL, &ln, NULL, NULL, NULL) : NULL;
    if (!src && m)
      src = site_by_unit(m, pc, &ln);
    if (src) {
      snprintf(e->file, sizeof e->file, "%s", src);
      e->line = (uint32_t)ln;
      e->known = true;
    }
  }
  if (e->known) {
    snprintf(file, size, "%s", e->file);
    *line = e->line;
  }
  pthread_mutex_unlock(&site_lock);
}

uintptr_t xsym_module_base(const void *address) {
  Dl_info info;
  return address && dladdr(address, &info) ? (uintptr_t)info.dli_fbase : 0;
}

const void *xsym_call_site(const uintptr_t *skip_bases, size_t nskip, const void *fallback) {
  void *frames[16];
  int n = backtrace(frames, 16);
  for (int i = 0; i < n; i++) {
    uintptr_t base = xsym_module_base(frames[i]);
    bool skip = false;
    for (size_t k = 0; k < nskip; k++)
      skip |= base == skip_bases[k];
    if (!skip)
      return frames[i];
  }
  return fallback;
}
