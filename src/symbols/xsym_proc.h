/* xptrace symbols — libdw callbacks for reading the running process's own
 * modules (dwfl_linux_proc_report), for in-process users that keep a Dwfl
 * while the program runs (function tracing, the OpenCL layer's call
 * sites).  libdw holds the files it opens until dwfl_end: these raise
 * them out of the program's way (xpt_fd.h).
 *
 * Usage:
 *   Dwfl *d = dwfl_begin(&xsym_proc_callbacks);   */
#ifndef XSYM_PROC_H
#define XSYM_PROC_H

#include <elfutils/libdwfl.h>

#include "xpt_fd.h"

static inline int xsym_proc_find_elf(Dwfl_Module *mod, void **userdata, const char *name,
                                     Dwarf_Addr base, char **file_name, Elf **elfp) {
  return xpt_fd_raise(dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp));
}

static inline int xsym_proc_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *name,
                                           Dwarf_Addr base, const char *file_name,
                                           const char *debuglink_file, GElf_Word debuglink_crc,
                                           char **debuginfo_file_name) {
  return xpt_fd_raise(dwfl_standard_find_debuginfo(
      mod, userdata, name, base, file_name, debuglink_file, debuglink_crc, debuginfo_file_name));
}

static const Dwfl_Callbacks xsym_proc_callbacks = {
    .find_elf = xsym_proc_find_elf,
    .find_debuginfo = xsym_proc_find_debuginfo,
};

#endif /* XSYM_PROC_H */
