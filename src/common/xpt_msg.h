/* xptrace common — messages to the original standard error.
 *
 * Usage (collectors, sampler, tool):
 *   xpt_msg("xpti: cannot write '%s': %s", path, strerror(err));
 *   xpt_msg_once("outdir-unwritable", "xpti: ...");   once per process
 *   xpt_msg_write(table, len);                        several lines at once
 * The caller gives the prefix ("xpti:" in-process, "xptrace:" in the tool);
 * a missing newline is added.
 *
 * At load, fd 2 is recorded (open or not, and which file) and duplicated
 * with F_DUPFD_CLOEXEC to a high descriptor.  Messages go to that copy,
 * never to fds 0-2, so a program that closes fd 2 and lets a trace file
 * take it does not get our messages written into the file.  If fd 2 was
 * not open at load, messages are dropped.  The first copy of this library
 * loaded in the process (each collector links its own) does the
 * recording for all; see xpt_shared.c. */
#ifndef XPT_MSG_H
#define XPT_MSG_H

#include <stdbool.h>
#include <stddef.h>

#define XPT_COMMON_API __attribute__((visibility("hidden")))

/* One line.  Returns whether it was written. */
XPT_COMMON_API bool xpt_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line, the first time `key` is used in this process (every copy of
 * the library in the process shares the keys; a forked child inherits
 * them).  Returns whether it printed. */
XPT_COMMON_API bool xpt_msg_once(const char *key, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Raw bytes (e.g. a table), written as they are. */
XPT_COMMON_API bool xpt_msg_write(const char *buf, size_t len);

/* The descriptor messages go to (the saved stderr), or -1 when stderr was
 * not open at load or is gone.  For writers of many lines (text
 * collector); do not close it. */
XPT_COMMON_API int xpt_msg_fd(void);

/* Record the current fd 2 as the original stderr again (tests that
 * redirect fd 2 on purpose). */
XPT_COMMON_API void xpt_msg_rebind(void);

#endif /* XPT_MSG_H */
