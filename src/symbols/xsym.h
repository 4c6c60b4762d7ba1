/* Addresses to names: functions, files, lines, inlined frames (libdw),
 * demangled C++, and the mappings of each process over time.
 *
 * A module is one ELF file (by path and build id); it is read once, when
 * first asked.  Lookups take a file offset, so a caller resolves a code
 * address with the mapping that held it at the time (xsym_maps_find),
 * even after the library was unloaded.  Not thread-safe: one owner. */
#ifndef XSYM_H
#define XSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct xsym xsym_t;
typedef struct xsym_module xsym_module_t;

enum { XSYM_DEMANGLE = 1 };

xsym_t *xsym_new(unsigned flags);
void xsym_free(xsym_t *x);

/* The module of a file (created on first use; NULL when out of memory).
 * A build id, when known, is checked against the file's: a file
 * replaced since it was mapped gives module+0xoffset names, not wrong ones. */
xsym_module_t *xsym_module(xsym_t *x, const char *path, const uint8_t *build_id, size_t len);
const char *xsym_module_path(const xsym_module_t *m);
const char *xsym_module_name(const xsym_module_t *m); /* base name */
/* After a lookup in m: the file at its path is not the one mapped (its
 * build id differs), so its frames were given as module+0xoffset. */
bool xsym_module_changed(const xsym_module_t *m);
/* The build id of the file at m's path (its bytes, 0 when it has none or
 * cannot be read); the bytes belong to x. */
size_t xsym_module_file_build_id(xsym_t *x, xsym_module_t *m, const uint8_t **bits);

typedef struct xsym_frame {
  const char *function; /* never NULL: a name, or "module+0xoffset" */
  const char *file;     /* source file, NULL when unknown */
  unsigned line;        /* 0 when unknown */
  bool inlined;         /* inlined into the next frame */
} xsym_frame_t;

/* The frames at file offset `off` of module m, innermost first: the
 * inlined calls, then the function holding them.  Returns how many were
 * written (1 to max).  Strings belong to x. */
size_t xsym_lookup(xsym_t *x, xsym_module_t *m, uint64_t off, xsym_frame_t *out, size_t max);

/* Demangles a C++ (Itanium ABI) name when demangling is on; else, or for
 * a plain C name, returns `name`.  The result belongs to x. */
const char *xsym_demangle(xsym_t *x, const char *name);

/* ---- mappings over time ---- */

typedef struct xsym_map {
  uint64_t start, end, pgoff;
  uint64_t t_begin, t_end; /* [t_begin, t_end) in the caller's clock; UINT64_MAX: still mapped */
  xsym_module_t *module;   /* NULL for an anonymous mapping */
} xsym_map_t;

typedef struct xsym_maps xsym_maps_t;

xsym_maps_t *xsym_maps_new(void);
void xsym_maps_free(xsym_maps_t *ms);
/* A mapping from time t: ends every mapping of pid it overlaps. */
void xsym_maps_add(xsym_maps_t *ms, pid_t pid, uint64_t t, uint64_t start, uint64_t end,
                   uint64_t pgoff, xsym_module_t *m);
/* pid exec'd (or exited) at t: all its mappings end. */
void xsym_maps_end_all(xsym_maps_t *ms, pid_t pid, uint64_t t);
/* child forked from parent at t: starts with the parent's live mappings. */
void xsym_maps_fork(xsym_maps_t *ms, pid_t parent, pid_t child, uint64_t t);
/* The mapping of pid holding addr at time t, NULL if none. */
const xsym_map_t *xsym_maps_find(const xsym_maps_t *ms, pid_t pid, uint64_t t, uint64_t addr);
/* Every mapping pid ever had (in order added) and a count bumped on each
 * change, for callers that mirror the live set (an unwinder). */
const xsym_map_t *xsym_maps_all(const xsym_maps_t *ms, pid_t pid, size_t *n, uint64_t *generation);

#endif /* XSYM_H */
