/* xptrace common — time windows for every recorder (XPTRACE_PERIODS).
 *
 * Document 004's windows (`clock:delay:duration:cycles ...`, the syntax of
 * XPTRACE_SAMPLE_PERIODS) gate the collectors as they gate the sampler:
 * outside a window nothing new is recorded, a slice begun inside one is
 * recorded whole (its end is kept), a slice begun outside is not.  One
 * controller thread per process (whichever collector copy starts it)
 * opens and closes the windows and tells every registered copy. */
#ifndef XPT_WINDOWS_H
#define XPT_WINDOWS_H

#include <stdbool.h>
#include <stdint.h>

/* Called on the controller thread at each change, with the time
 * (CLOCK_MONOTONIC ns); at registration with the state then (time 0); in
 * a forked child, closed (time 0) from the fork handler: store only. */
typedef void (*xpt_window_fn)(bool open, uint64_t mono_ns);

/* Whether XPTRACE_PERIODS asks for windows (read once; a malformed value
 * is one message, then the whole run is recorded). */
__attribute__((visibility("hidden"))) bool xpt_windows_configured(void);

/* Registers `fn` (at most 8 per process) and starts the controller once.
 * Returns false when no windows are configured (fn is not called). */
__attribute__((visibility("hidden"))) bool xpt_windows_start(xpt_window_fn fn);

#endif /* XPT_WINDOWS_H */
