/* xptrace common — descriptors held while the program runs.
 *
 * Recordings, the unwinder's pipe and the files libdw keeps open live at
 * or above a high floor, so that the program's own open() gets the
 * number it would get without us and programs that loop over the first
 * few descriptors miss ours (DESIGN.md: the program's descriptors stay
 * its own).
 *
 * Usage:
 *   int fd = xpt_fd_raise(open(path, O_RDWR | O_CLOEXEC ...));  */
#ifndef XPT_FD_H
#define XPT_FD_H

#define XPT_FD_API __attribute__((visibility("hidden")))

/* 1000, or half of an RLIMIT_NOFILE of 1024 or less (512 unlimited). */
XPT_FD_API int xpt_fd_floor(void);

/* Moves fd to the lowest free descriptor at or above the floor
 * (close-on-exec) and closes fd; returns the new one, or fd itself when
 * none is free up there (or fd < 0).  Async-signal-safe. */
XPT_FD_API int xpt_fd_raise(int fd);

#endif /* XPT_FD_H */
