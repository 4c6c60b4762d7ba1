/* libxpti_text.so: the reference subscriber.  It prints one line for every
 * notification of every stream.  The line format is specified in
 * docs/text.md and is the oracle of the integration tests: change both
 * together. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "xpti/xpti_trace_framework.h"
#include "xptrace/xptrace_protocol.h"
#include "xpt_windows.h"
#include "xpt_fd.h"
#include "xpt_msg.h"
#include "xpt_api.h"

/* A line of at most PIPE_BUF bytes goes out in one atomic write(2), even
 * when the output is a pipe shared with other processes. */
#define TEXT_LINE_MAX 4096
#define TEXT_TRUNCATED_MARK " ...[truncated]"

/* ---- output ------------------------------------------------------------ */

static pthread_once_t text_output_once = PTHREAD_ONCE_INIT;
static int text_fd = -1;
static _Atomic uint64_t text_lost_lines;
static _Atomic int text_lost_errno;
static uint64_t text_start_ns;
static _Atomic int text_pid;
static __thread int text_tid;

static uint64_t text_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* XPTI_TEXT_OUTPUT names a file the user chose, anywhere: it is created
 * (O_EXCL), or reused when it is a regular file of ours with one link
 * (truncated, as documented) or a device or pipe; never followed when a
 * symlink, never a file of someone else's.  O_APPEND keeps the lines of a
 * forked child (which shares the descriptor) whole and in order. */
static int text_output_open_path(const char *path) {
  int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY;
  int fd = open(path, flags | O_CREAT | O_EXCL, 0644);
  if (fd >= 0 || errno != EEXIST)
    return fd;
  fd = open(path, flags);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return -1;
  }
  if (S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1 && ftruncate(fd, 0) == 0)
    return fd;
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return fd; /* /dev/null, /dev/full, a FIFO */
  close(fd);
  errno = S_ISREG(st.st_mode) ? EPERM : EISDIR;
  return -1;
}

/* Unset: the standard error the program had at start (never fd 2 as it
 * is now: a file of the program's may have taken it). */
static void text_output_open(void) {
  text_fd = xpt_msg_fd();
  const char *path = secure_getenv("XPTI_TEXT_OUTPUT");
  if (!path || !*path)
    return;
  int fd = text_output_open_path(path);
  if (fd < 0) {
    int err = errno;
    struct stat st;
    if (err == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
      xpt_msg("xpti: text collector cannot open '%s': it is a symbolic link", path);
    else if (err == EPERM)
      xpt_msg("xpti: text collector cannot open '%s': a file of another user or with several "
              "links; not writing there", path);
    else
      xpt_msg("xpti: text collector cannot open '%s': %s", path, strerror(err));
    return;
  }
  text_fd = xpt_fd_raise(fd); /* held while the program runs: out of its way */
}

static int text_output_fd(void) {
  pthread_once(&text_output_once, text_output_open);
  return text_fd;
}

static void text_after_fork_child(void) {
  atomic_store_explicit(&text_pid, (int)getpid(), memory_order_relaxed);
  text_tid = 0; /* the forking thread is the child's only thread */
}

__attribute__((constructor)) static void text_load(void) {
  text_start_ns = text_now_ns();
  atomic_store_explicit(&text_pid, (int)getpid(), memory_order_relaxed);
  pthread_atfork(NULL, NULL, text_after_fork_child);
}

/* Lines that could not be written are counted and reported once at exit. */
__attribute__((destructor)) static void text_unload(void) {
  uint64_t lost = atomic_load(&text_lost_lines);
  if (lost)
    xpt_msg("xpti: text collector could not write %" PRIu64 " lines: %s", lost,
            strerror(atomic_load(&text_lost_errno)));
}

static int text_thread_id(void) {
  if (!text_tid)
    text_tid = (int)syscall(SYS_gettid);
  return text_tid;
}

/* ---- line building ------------------------------------------------------ */

typedef struct text_line {
  size_t len;
  bool truncated;
  char buf[TEXT_LINE_MAX];
} text_line_t;

/* Room kept free for the truncation mark and the newline (sizeof counts
 * the mark's NUL, which the newline replaces). */
#define TEXT_LINE_CAP (TEXT_LINE_MAX - sizeof(TEXT_TRUNCATED_MARK))

static void text_put(text_line_t *l, const char *s, size_t n) {
  if (l->truncated)
    return;
  if (n > TEXT_LINE_CAP - l->len) {
    n = TEXT_LINE_CAP - l->len;
    l->truncated = true;
  }
  memcpy(l->buf + l->len, s, n);
  l->len += n;
}

static void text_puts(text_line_t *l, const char *s) { text_put(l, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void text_printf(text_line_t *l, const char *fmt,
                                                              ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0)
    text_put(l, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void text_put_hex_byte(text_line_t *l, unsigned char c) {
  static const char digits[] = "0123456789abcdef";
  char h[2] = {digits[c >> 4], digits[c & 15]};
  text_put(l, h, 2);
}

/* Unquoted fields (stream, file, key, tool) must stay one token: blanks,
 * control characters, quotes and backslashes become \xHH. */
static void text_put_token(text_line_t *l, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c <= ' ' || c == 0x7f || c == '"' || c == '\\') {
      text_puts(l, "\\x");
      text_put_hex_byte(l, c);
    } else {
      text_put(l, s, 1);
    }
  }
}

/* A quoted string of at most n bytes, stopping at a NUL; escapes keep
 * the record on one line. */
static void text_put_quoted(text_line_t *l, const char *s, size_t n) {
  text_put(l, "\"", 1);
  for (size_t i = 0; i < n && s[i]; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      text_put(l, e, 2);
    } else if (c == '\n') {
      text_puts(l, "\\n");
    } else if (c == '\t') {
      text_puts(l, "\\t");
    } else if (c < ' ' || c == 0x7f) {
      text_puts(l, "\\x");
      text_put_hex_byte(l, c);
    } else {
      text_put(l, s + i, 1);
    }
  }
  text_put(l, "\"", 1);
}

static void text_line_start(text_line_t *l, const char *stream) {
  l->len = 0;
  l->truncated = false;
  text_printf(l, "%" PRIu64 " %d:%d ", text_now_ns() - text_start_ns,
              atomic_load_explicit(&text_pid, memory_order_relaxed), text_thread_id());
  text_put_token(l, stream);
}

/* One write(2) per line: lines of concurrent threads never interleave. */
static void text_line_emit(text_line_t *l) {
  if (l->truncated) {
    memcpy(l->buf + l->len, TEXT_TRUNCATED_MARK, sizeof TEXT_TRUNCATED_MARK - 1);
    l->len += sizeof TEXT_TRUNCATED_MARK - 1;
  }
  l->buf[l->len++] = '\n';
  int fd = text_output_fd();
  if (fd < 0)
    return; /* no stderr at start and no file: nowhere to write */
  const char *p = l->buf;
  size_t left = l->len;
  while (left) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      atomic_store(&text_lost_errno, n < 0 ? errno : EIO);
      atomic_fetch_add(&text_lost_lines, 1);
      return;
    }
    p += n;
    left -= (size_t)n;
  }
}

/* ---- trace point type names ------------------------------------------ */

static const char *const text_predefined_names[128] = {
    [XPTI_TRACE_GRAPH_CREATE] = "graph_create",
    [XPTI_TRACE_NODE_CREATE] = "node_create",
    [XPTI_TRACE_EDGE_CREATE] = "edge_create",
    [XPTI_TRACE_REGION_BEGIN] = "region_begin",
    [XPTI_TRACE_REGION_END] = "region_end",
    [XPTI_TRACE_TASK_BEGIN] = "task_begin",
    [XPTI_TRACE_TASK_END] = "task_end",
    [XPTI_TRACE_BARRIER_BEGIN] = "barrier_begin",
    [XPTI_TRACE_BARRIER_END] = "barrier_end",
    [XPTI_TRACE_LOCK_BEGIN] = "lock_begin",
    [XPTI_TRACE_LOCK_END] = "lock_end",
    [XPTI_TRACE_SIGNAL] = "signal",
    [XPTI_TRACE_TRANSFER_BEGIN] = "transfer_begin",
    [XPTI_TRACE_TRANSFER_END] = "transfer_end",
    [XPTI_TRACE_THREAD_BEGIN] = "thread_begin",
    [XPTI_TRACE_THREAD_END] = "thread_end",
    [XPTI_TRACE_WAIT_BEGIN] = "wait_begin",
    [XPTI_TRACE_WAIT_END] = "wait_end",
    [XPTI_TRACE_FUNCTION_BEGIN] = "function_begin",
    [XPTI_TRACE_FUNCTION_END] = "function_end",
    [XPTI_TRACE_METADATA] = "metadata",
    [XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN] = "function_with_args_begin",
    [XPTI_TRACE_FUNCTION_WITH_ARGS_END] = "function_with_args_end",
    [XPTI_TRACE_MEM_ALLOC_BEGIN] = "mem_alloc_begin",
    [XPTI_TRACE_MEM_ALLOC_END] = "mem_alloc_end",
    [XPTI_TRACE_MEM_RELEASE_BEGIN] = "mem_release_begin",
    [XPTI_TRACE_MEM_RELEASE_END] = "mem_release_end",
    [XPTI_TRACE_DIAGNOSTICS] = "diagnostics",
};

/* Predefined: its name.  User-defined (tool id != 0, bit 7 set): the
 * document's convention, an even extension opens and an odd one closes
 * pair n = id >> 1, so "<tool>:user<n>_begin" / "_end". */
static void text_put_type(text_line_t *l, uint16_t type) {
  uint8_t tool = XPTI_TOOL_ID(type);
  if (tool == 0 && type < 128 && text_predefined_names[type]) {
    text_puts(l, text_predefined_names[type]);
  } else if (tool != 0 && (type & XPTI_TRACE_USER_DEFINED)) {
    const char *tool_name = xpt_api_tool_name(tool);
    if (tool_name)
      text_put_token(l, tool_name);
    else
      text_printf(l, "tool%u", (unsigned)tool);
    uint8_t id = XPTI_EXTRACT_USER_DEFINED_ID(type);
    text_printf(l, ":user%u_%s", (unsigned)(id >> 1), (id & 1) ? "end" : "begin");
  } else {
    text_printf(l, "type%u", (unsigned)type);
  }
}

/* ---- metadata values ------------------------------------------------- */

/* Shortest decimal that reads back as the same value. */
static void text_put_double(text_line_t *l, double v, bool single) {
  char tmp[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    double back = strtod(tmp, NULL);
    if (single ? (float)back == (float)v : back == v)
      break;
  }
  text_puts(l, tmp);
}

static void text_put_hex(text_line_t *l, const char *data, size_t size) {
  text_puts(l, "hex:");
  for (size_t i = 0; i < size && !l->truncated; i++)
    text_put_hex_byte(l, (unsigned char)data[i]);
}

static void text_put_object(text_line_t *l, xpti_object_data_t o) {
  if (!o.data) {
    text_puts(l, "<invalid>");
    return;
  }
  switch (o.type) {
  case XPTI_METADATA_STRING:
    text_put_quoted(l, o.data, o.size);
    return;
  case XPTI_METADATA_SIGNED_INTEGER:
    switch (o.size) {
    case 1: { int8_t v; memcpy(&v, o.data, 1); text_printf(l, "%" PRId8, v); return; }
    case 2: { int16_t v; memcpy(&v, o.data, 2); text_printf(l, "%" PRId16, v); return; }
    case 4: { int32_t v; memcpy(&v, o.data, 4); text_printf(l, "%" PRId32, v); return; }
    case 8: { int64_t v; memcpy(&v, o.data, 8); text_printf(l, "%" PRId64, v); return; }
    }
    break;
  case XPTI_METADATA_UNSIGNED_INTEGER:
    switch (o.size) {
    case 1: { uint8_t v; memcpy(&v, o.data, 1); text_printf(l, "%" PRIu8, v); return; }
    case 2: { uint16_t v; memcpy(&v, o.data, 2); text_printf(l, "%" PRIu16, v); return; }
    case 4: { uint32_t v; memcpy(&v, o.data, 4); text_printf(l, "%" PRIu32, v); return; }
    case 8: { uint64_t v; memcpy(&v, o.data, 8); text_printf(l, "%" PRIu64, v); return; }
    }
    break;
  case XPTI_METADATA_FLOAT:
    if (o.size == sizeof(float)) {
      float v;
      memcpy(&v, o.data, sizeof v);
      text_put_double(l, v, true);
      return;
    }
    if (o.size == sizeof(double)) {
      double v;
      memcpy(&v, o.data, sizeof v);
      text_put_double(l, v, false);
      return;
    }
    break;
  case XPTI_METADATA_BOOLEAN:
    if (o.size >= 1 && o.size <= 8) {
      bool set = false;
      for (size_t i = 0; i < o.size; i++)
        set |= o.data[i] != 0;
      text_puts(l, set ? "true" : "false");
      return;
    }
    break;
  }
  /* Binary, or a size that does not fit the declared type. */
  text_put_hex(l, o.data, o.size);
}

/* ---- notifications ----------------------------------------------------- */

static void text_put_stream_name(text_line_t *l, uint8_t stream) {
  const char *name = xpt_api_stream_name(stream);
  if (name) {
    text_line_start(l, name);
  } else {
    char fallback[16];
    snprintf(fallback, sizeof fallback, "stream%u", (unsigned)stream);
    text_line_start(l, fallback);
  }
}

/* The xptrace timed-slice type, whose user data is printed. */
static _Atomic uint16_t text_timed_type;

/* Inside a time window (XPTRACE_PERIODS), or no windows: the log has
 * lines only from inside them. */
static _Atomic bool text_open = true;
static void text_window_change(bool open, uint64_t mono_ns) {
  (void)mono_ns;
  atomic_store(&text_open, open);
}

static void text_notify(uint8_t stream, uint16_t type, xpti_trace_event_data_t *parent,
                        xpti_trace_event_data_t *event, uint64_t instance, const void *user_data) {
  if (!atomic_load_explicit(&text_open, memory_order_relaxed))
    return;
  /* user data is the stream's protocol: read only where the predefined
   * types define it (a function's name) */
  text_line_t l;
  text_put_stream_name(&l, stream);
  text_put(&l, " ", 1);
  text_put_type(&l, type);

  const xpti_payload_t *payload = event ? xptiQueryPayload(event) : NULL;
  text_put(&l, " ", 1);
  const char *name = payload ? payload->name : xpti_user_data_name(type, user_data);
  if (name)
    text_put_quoted(&l, name, SIZE_MAX);
  else
    text_puts(&l, "<unnamed>");
  text_printf(&l, " uid=%" PRIu64 " instance=%" PRIu64, event ? event->unique_id : 0, instance);

  text_puts(&l, " src=");
  if (payload && payload->source_file) {
    text_put_token(&l, payload->source_file);
    if (payload->line_no != XPTI_INVALID_LINE)
      text_printf(&l, ":%" PRIu32, payload->line_no);
  } else {
    text_puts(&l, "-");
  }
  if (event && (event->source_id || event->target_id))
    text_printf(&l, " source=%" PRIu64 " target=%" PRIu64, event->source_id, event->target_id);
  if (parent)
    text_printf(&l, " parent=%" PRIu64, parent->unique_id);
  if (type == atomic_load_explicit(&text_timed_type, memory_order_relaxed) && user_data) {
    const xptrace_timed_slice_t *slice = user_data; /* the xptrace protocol */
    text_printf(&l, " ran=%" PRIu64 "..%" PRIu64 " (%" PRIu64 " ns) track=", slice->begin_ns,
                slice->end_ns, slice->end_ns - slice->begin_ns);
    text_put_quoted(&l, slice->track_name ? slice->track_name : "", SIZE_MAX);
  }

  uint32_t count = event ? xpt_api_metadata_count(event) : 0;
  if (count)
    text_puts(&l, " |");
  for (uint32_t i = 0; i < count; i++) {
    uint32_t key_id;
    int32_t value_id;
    if (xpt_api_metadata_at(event, i, &key_id, &value_id) != XPTI_RESULT_SUCCESS)
      break;
    const char *key = xptiLookupString(key_id);
    text_put(&l, " ", 1);
    text_put_token(&l, key ? key : "<invalid>");
    text_put(&l, "=", 1);
    text_put_object(&l, xptiLookupObject(value_id));
  }
  text_line_emit(&l);
}

/* ---- registration -------------------------------------------------- */

static _Atomic bool text_register_failed_said;

/* One stream-wide callback sees every type, user-defined ones of tools
 * registered at any time included.  DUPLICATE/UNDELETE: a stream
 * initialised again, already (or again) covered. */
static void text_subscribe(uint8_t stream, const char *name) {
  xpti_result_t r = xpt_api_subscribe(stream, name, text_notify);
  if (r != XPTI_RESULT_SUCCESS && r != XPTI_RESULT_DUPLICATE && r != XPTI_RESULT_UNDELETE &&
      !atomic_exchange(&text_register_failed_said, true))
    xpt_msg("xpti: text collector cannot register for stream %u: 0x%x", (unsigned)stream,
            (unsigned)r);
}

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor, const char *version,
                                     const char *stream_name) {
  text_line_t l;
  text_line_start(&l, stream_name ? stream_name : "<null>");
  text_printf(&l, " xptiTraceInit major=%u minor=%u version=", major, minor);
  if (version)
    text_put_quoted(&l, version, SIZE_MAX);
  else
    text_puts(&l, "<null>");
  text_line_emit(&l);
  if (!stream_name)
    return;

  atomic_store_explicit(&text_timed_type,
                        xpt_api_user_type(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID),
                        memory_order_relaxed);
  uint8_t stream = xptiRegisterStream(stream_name);
  if (stream != XPTI_INVALID_STREAM_ID)
    text_subscribe(stream, stream_name);
  static _Atomic bool windows;
  if (xpt_windows_configured() && !atomic_exchange(&windows, true))
    xpt_windows_start(text_window_change);
}

/* Callbacks stay registered: a producer may notify a finished stream
 * again, and the text collector never loses a line it was given. */
XPTI_CALLBACK_API void xptiTraceFinish(const char *stream_name) {
  text_line_t l;
  text_line_start(&l, stream_name ? stream_name : "<null>");
  text_puts(&l, " xptiTraceFinish");
  text_line_emit(&l);
}
