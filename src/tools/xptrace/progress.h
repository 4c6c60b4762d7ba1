/* A progress line on a terminal (progress.c): for one piece of work at a
 * time, from one thread; nothing at all when stderr is no terminal. */
#ifndef XPTRACE_PROGRESS_H
#define XPTRACE_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

/* `what`: the line's start ("xptrace report: reading traces"); total: bytes
 * (0: unknown, then `done` counts items). */
void progress_begin(const char *what, uint64_t total);
void progress_set(uint64_t done);
void progress_add_total(uint64_t more);
/* Before printing a message: the line is cleared (drawn again later). */
void progress_clear(void);
void progress_end(void);

#endif
