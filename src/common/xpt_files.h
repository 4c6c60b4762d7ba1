/* xptrace common — output folders and files.
 *
 * Rules (DESIGN.md, "Fork, exit, signals, other users"): folders we
 * create are mode 0700 (traces hold names and arguments of the program;
 * the owner can still chmod them to share); an output folder that exists
 * must be a real directory (not a symlink), owned by the effective user,
 * and not writable by group or others; files are created O_EXCL |
 * O_NOFOLLOW | O_CLOEXEC, taking a new name when the name is taken
 * ("trace.perfetto-trace" -> "trace-1.perfetto-trace"), so that nothing
 * is ever truncated or followed.
 *
 * Usage:
 *   char why[512];
 *   if (xpt_dir_prepare(dir, why, sizeof why) != 0) xpt_msg("xpti: %s", why);
 *   char path[PATH_MAX];
 *   int fd = xpt_create_file(dir, "trace.perfetto-trace", path, sizeof path);
 *   FILE *f = xpt_create_stream(dir, "stats.csv", path, sizeof path);
 * Errors return -1/NULL with errno set; `why` (when given) gets one line
 * without prefix, e.g. "output folder '/x' is writable by others; not
 * writing there". */
#ifndef XPT_FILES_H
#define XPT_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "xpt_msg.h"

/* mkdir -p path: missing folders are created 0700; the last one, new or
 * not, must then pass the checks above.  Returns 0, or an errno value
 * (EPERM for a folder refused) with `why` filled. */
XPT_COMMON_API int xpt_dir_prepare(const char *path, char *why, size_t whylen);

/* A new folder: `path` itself, else path-1, path-2 ... (up to -999),
 * created 0700 by us, never one that exists (whoever made it).  The
 * parent must exist.  `path` (of `size` bytes) gets the name used.
 * Returns 0 or an errno value with `why` filled. */
XPT_COMMON_API int xpt_dir_create_new(char *path, size_t size, char *why, size_t whylen);

/* Open folder `path` (O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC) and check it as
 * above.  Returns the descriptor, or -1 with errno set and `why` filled. */
XPT_COMMON_API int xpt_dir_open(const char *path, char *why, size_t whylen);

/* Create file `name` in the folder open as `dirfd`: O_WRONLY|O_CREAT|
 * O_EXCL|O_NOFOLLOW|O_CLOEXEC, mode 0644 less the umask; a name taken
 * gives "<stem>-<n><ext>" (n = 1..999).  `actual` (may be NULL) gets the
 * name used.  Returns the descriptor or -1 with errno set. */
XPT_COMMON_API int xpt_create_fileat(int dirfd, const char *name, char *actual, size_t len);

/* Same, in folder `dir` (opened and checked with xpt_dir_open); `path`
 * (may be NULL) gets "<dir>/<name used>". */
XPT_COMMON_API int xpt_create_file(const char *dir, const char *name, char *path, size_t len);

/* xpt_create_file as a stdio stream ("w"). */
XPT_COMMON_API FILE *xpt_create_stream(const char *dir, const char *name, char *path,
                                       size_t len);

/* Output folder of this process (collectors, sampler): $XPTRACE_OUTPUT
 * if set (read once, secure_getenv), else "xptrace-<program>-<pid>" in
 * the cwd — a new folder: if that name exists, "-1", "-2" ... is used.
 * Created on first call (xpt_dir_prepare) and returned absolute.  In a
 * forked child the first call returns "<parent's folder>/child-<pid>"
 * (created), even when the parent never asked for its own.  One per
 * process, whichever library asks.  On failure prints once per process
 * "xpti: <why>" and returns NULL (again on later calls). */
XPT_COMMON_API const char *xpt_output_dir(void);

/* Short program name (program_invocation_short_name, else "program"). */
XPT_COMMON_API const char *xpt_program_name(void);

#endif /* XPT_FILES_H */
