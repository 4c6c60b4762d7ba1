/* PLT stubs named as their targets ("strlen@plt"), as binutils and perf
 * name them: a stub has no symbol of its own, and grouped by its unwind
 * table range every stub of a file was one row. */
#ifndef XSYM_PLT_H
#define XSYM_PLT_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>

/* The name of the PLT stub at `addr` (an ELF address of `elf`) into buf:
 * "target@plt", or "[plt]" for the lazy binder's stub (no named slot);
 * false when addr is in no PLT section (or the machine is not x86-64). */
bool xsym_plt_name(Elf *elf, GElf_Addr addr, char *buf, size_t len);

#endif /* XSYM_PLT_H */
