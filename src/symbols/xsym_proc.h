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

#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xpt_fd.h"

static inline int xsym_proc_find_elf(Dwfl_Module *mod, void **userdata, const char *name,
                                     Dwarf_Addr base, char **file_name, Elf **elfp) {
  return xpt_fd_raise(dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp));
}

/* The file a module's .gnu_debuglink names, where gdb and libdw look:
 * beside the module, in .debug/ beside it, under /usr/lib/debug and the
 * module's directory.  A file with another build id is not its. */
static inline int xsym_proc_debuglink(Dwfl_Module *mod, const char *file_name, const char *link,
                                      char **found) {
  if (!file_name || !link || !*link || strchr(link, '/'))
    return -1;
  const unsigned char *want = NULL;
  GElf_Addr vaddr;
  int want_len = dwfl_module_build_id(mod, &want, &vaddr);
  const char *slash = strrchr(file_name, '/');
  int dir_len = slash ? (int)(slash - file_name) : 0;
  static const char *const where[] = {"%.*s/%s", "%.*s/.debug/%s", "/usr/lib/debug%.*s/%s"};
  for (size_t i = 0; i < sizeof where / sizeof *where; ++i) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, where[i], dir_len, file_name, link) >= (int)sizeof path ||
        strcmp(path, file_name) == 0)
      continue;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *id = NULL;
    ssize_t id_len = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
    bool same = elf && (want_len <= 0 || id_len <= 0 ||
                        (id_len == want_len && memcmp(id, want, (size_t)want_len) == 0));
    if (elf)
      elf_end(elf);
    if (same && (*found = strdup(path)))
      return fd;
    close(fd);
  }
  return -1;
}

/* A module's separate debug file.  From debuginfod too only when
 * DEBUGINFOD_URLS names a server: libdw otherwise still starts a client
 * in this process, loading libcurl and taking the program's lowest free
 * descriptors (a socket pair), to ask nobody. */
static inline int xsym_proc_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *name,
                                           Dwarf_Addr base, const char *file_name,
                                           const char *debuglink_file, GElf_Word debuglink_crc,
                                           char **debuginfo_file_name) {
  static int servers = -1; /* DEBUGINFOD_URLS read once */
  if (servers < 0) {
    const char *urls = secure_getenv("DEBUGINFOD_URLS");
    servers = urls && urls[strspn(urls, " \t")] != '\0';
  }
  if (servers)
    return xpt_fd_raise(dwfl_standard_find_debuginfo(
        mod, userdata, name, base, file_name, debuglink_file, debuglink_crc, debuginfo_file_name));
  int fd = dwfl_build_id_find_debuginfo(mod, userdata, name, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  if (fd < 0)
    fd = xsym_proc_debuglink(mod, file_name, debuglink_file, debuginfo_file_name);
  return xpt_fd_raise(fd);
}

static const Dwfl_Callbacks xsym_proc_callbacks = {
    .find_elf = xsym_proc_find_elf,
    .find_debuginfo = xsym_proc_find_debuginfo,
};

#endif /* XSYM_PROC_H */
