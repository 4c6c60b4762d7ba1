/* xptrace symbols — the source line of a call site in this process
 * (libdw, cached per address, thread-safe; not for signal handlers). */
#ifndef XSYM_SITE_H
#define XSYM_SITE_H

#include <stddef.h>
#include <stdint.h>

/* file:line of the call whose return address is `address`; file "" and
 * line XPTI_INVALID_LINE when unknown. */
void xsym_site_resolve(const void *address, char *file, size_t size, uint32_t *line);

#endif
