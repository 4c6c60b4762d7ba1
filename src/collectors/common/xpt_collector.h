/* xptrace — helpers shared by the collectors (static library
 * xptrace_collector_common, linked into each collector; all hidden).
 *
 * Every collector library carries its own copy, so each copy keeps its
 * own hook list and installs its own signal handlers, chained to the
 * handler that was there before (possibly another collector's). */
#ifndef XPT_COLLECTOR_H
#define XPT_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XPT_HIDDEN __attribute__((visibility("hidden")))

/* Output folder, program name (xpt_output_dir, xpt_program_name), safe
 * files, messages and sizes (xpt_parse_size, xpt_env_size,
 * xpt_env_buffer_size): src/common. */
#include "xpt_env.h"
#include "xpt_files.h"
#include "xpt_msg.h"

/* Flush hooks.  fn(ctx, reason) is called:
 *  - XPT_FLUSH_EXIT: at process exit, from a library destructor (after
 *    every atexit handler of the program);
 *  - any reason given to xpt_flush_all() (collectors use FINALIZE);
 *  - XPT_FLUSH_FORK_CHILD: in a forked child, right after fork (from the
 *    pthread_atfork child handler).  Data inherited from the parent is
 *    the parent's to write: drop or reset it, do not write it.
 * Never at signal time: no signal handler is installed (XPT_FLUSH_SIGNAL
 * is never given).  Hooks run in reverse registration order, one caller
 * at a time.  A hook must tolerate being called more than once.  After
 * fork the child keeps the registrations.  At most 64 hooks. */
enum xpt_flush_reason { XPT_FLUSH_EXIT, XPT_FLUSH_SIGNAL, XPT_FLUSH_FINALIZE, XPT_FLUSH_FORK_CHILD };
typedef void (*xpt_flush_fn)(void *ctx, enum xpt_flush_reason reason);
XPT_HIDDEN void xpt_register_flush(xpt_flush_fn fn, void *ctx);
XPT_HIDDEN void xpt_flush_all(enum xpt_flush_reason reason);

/* Monotonic timestamp in ns (CLOCK_MONOTONIC): the one clock all
 * collectors use, so their timestamps can be compared. */
XPT_HIDDEN uint64_t xpt_now_ns(void);
/* Whether to stamp with raw TSC ticks (x86-64, invariant TSC, and
 * XPTRACE_CLOCK not "monotonic"); report: say once when XPTRACE_CLOCK is
 * neither auto nor monotonic (one collector does). */
XPT_HIDDEN bool xpt_clock_tsc(bool report);
/* A (TSC ticks, CLOCK_MONOTONIC ns) pair read together (ticks 0 where
 * there is no TSC): the calibration of tick stamps. */
XPT_HIDDEN void xpt_clock_pair(uint64_t *ticks, uint64_t *ns);

/* Name of a trace point type into buf: "task_begin",
 * "function_with_args_end", ...; user-defined types
 * "<tool>:<n>_begin" / "<tool>:<n>_end" with n = (type & 0x7f) >> 1
 * (tool name from the framework when it is loaded, else "tool<id>");
 * anything else "type_<value>".  Returns buf. */
XPT_HIDDEN const char *xpt_trace_type_name(uint16_t trace_type, char *buf, size_t buflen);

/* Whether stream `name` is selected by XPTRACE_STREAMS (read once): a
 * comma list of names or shell patterns ("sycl*"); unset/empty = all; a
 * list with no name in it (",") = all, after one message per process. */
XPT_HIDDEN bool xpt_stream_selected(const char *name);

#endif /* XPT_COLLECTOR_H */
