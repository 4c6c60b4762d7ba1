/* xptrace symbols — the source line of a call site in this process
 * (libdw, cached per address, thread-safe; not for signal handlers). */
#ifndef XSYM_SITE_H
#define XSYM_SITE_H

#include <stddef.h>
#include <stdint.h>

/* file:line of the call whose return address is `address`; file "" and
 * line XPTI_INVALID_LINE when unknown. */
void xsym_site_resolve(const void *address, char *file, size_t size, uint32_t *line);

/* The load address of the module holding `address` (dladdr), 0 if none. */
uintptr_t xsym_module_base(const void *address);

/* The program's call site: the first frame of the calling thread's stack
 * outside the modules whose bases are given (the layer itself, the API's
 * loader, libc's backtrace), or `fallback`. */
const void *xsym_call_site(const uintptr_t *skip_bases, size_t nskip, const void *fallback);

#endif
