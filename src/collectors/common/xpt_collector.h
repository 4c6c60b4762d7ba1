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

/* Output directory: $XPTRACE_OUTPUT if set (read once), else
 * "xptrace-<program>-<pid>" in the cwd; created (mkdir -p) on first call
 * and returned as an absolute path.  In a forked child the first call
 * returns "<parent dir>/child-<pid>" (created), even when the parent never
 * asked for its own.  On failure prints once
 * "xpti: cannot create output directory '<d>': <strerror>" and returns
 * NULL (again on later calls). */
XPT_HIDDEN const char *xpt_output_dir(void);
/* mkdir -p of path (trailing slashes are cut in place), then check it is a
 * writable directory.  Returns 0 or an errno value. */
int xpt_mkdir_p(char *path);

/* Short program name (program_invocation_short_name). */
XPT_HIDDEN const char *xpt_program_name(void);

/* Flush hooks.  fn(ctx, reason) is called:
 *  - XPT_FLUSH_EXIT: at process exit (atexit, or when the collector
 *    library is unloaded);
 *  - XPT_FLUSH_SIGNAL: on the first SIGINT/SIGTERM/SIGSEGV/SIGABRT/
 *    SIGBUS/SIGFPE; then the previously installed handler is chained, or
 *    the default action re-raised (a later signal only chains);
 *  - any reason given to xpt_flush_all() (collectors use FINALIZE);
 *  - XPT_FLUSH_FORK_CHILD: in a forked child, right after fork (from the
 *    pthread_atfork child handler).  Data inherited from the parent is
 *    the parent's to write: drop or reset it, do not write it.
 * Hooks run in reverse registration order, one caller at a time; a hook
 * re-entered from a signal on the thread already running hooks is
 * skipped.  A hook must tolerate being called more than once.  After
 * fork the child keeps the registrations.  At most 64 hooks. */
enum xpt_flush_reason { XPT_FLUSH_EXIT, XPT_FLUSH_SIGNAL, XPT_FLUSH_FINALIZE, XPT_FLUSH_FORK_CHILD };
typedef void (*xpt_flush_fn)(void *ctx, enum xpt_flush_reason reason);
XPT_HIDDEN void xpt_register_flush(xpt_flush_fn fn, void *ctx);
XPT_HIDDEN void xpt_flush_all(enum xpt_flush_reason reason);

/* Parse a size: decimal digits with an optional K, M or G suffix (powers
 * of 1024; "KB"/"KiB" spellings too).  Returns false for anything else,
 * including an empty string, a sign, or a value over 2^63. */
XPT_HIDDEN bool xpt_parse_size(const char *text, uint64_t *value);

/* Size from env var `name` (the caller keeps the result: read once per
 * call site).  Unset or empty: the default.  Malformed: one line
 * "xpti: <name>='<v>' is not a size; using <default>" and the default. */
XPT_HIDDEN uint64_t xpt_env_size(const char *name, uint64_t default_value);

/* Monotonic timestamp in ns (CLOCK_MONOTONIC): the one clock all
 * collectors use, so their timestamps can be compared. */
XPT_HIDDEN uint64_t xpt_now_ns(void);

/* Name of a trace point type into buf: "task_begin",
 * "function_with_args_end", ...; user-defined types
 * "<tool>:<n>_begin" / "<tool>:<n>_end" with n = (type & 0x7f) >> 1
 * (tool name from the framework when it is loaded, else "tool<id>");
 * anything else "type_<value>".  Returns buf. */
XPT_HIDDEN const char *xpt_trace_type_name(uint16_t trace_type, char *buf, size_t buflen);

/* Whether stream `name` is selected by XPTRACE_STREAMS (read once): a
 * comma list of names or shell patterns ("sycl*"); unset/empty = all. */
XPT_HIDDEN bool xpt_stream_selected(const char *name);

#endif /* XPT_COLLECTOR_H */
