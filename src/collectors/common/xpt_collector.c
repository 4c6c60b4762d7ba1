/* xptrace — helpers shared by the collectors (see xpt_collector.h). */
#include "xpt_collector.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <xpti/xpti_trace_framework.h>

/* Tool names come from xpt_api.c (any dispatcher), linked into the
 * collectors but not into the xptrace tool: only used when there. */
__attribute__((visibility("hidden"))) const char *xpt_api_tool_name(uint8_t tool);
#pragma weak xpt_api_tool_name

/* ---- flush hooks ------------------------------------------------------ */
/* No signal handler of ours: a program's dispositions stay its own, and
 * nothing runs at signal time (recordings survive in their files). */

enum { FLUSH_MAX_HOOKS = 64 };

static struct {
  pthread_mutex_t register_lock;
  struct {
    xpt_flush_fn fn;
    void *ctx;
  } hooks[FLUSH_MAX_HOOKS];
  _Atomic int count;   /* published after the slot is written */
  _Atomic pid_t owner; /* thread id running hooks; 0 when none */
} flush = {.register_lock = PTHREAD_MUTEX_INITIALIZER};

static pid_t flush_thread_id(void) { return (pid_t)syscall(SYS_gettid); }

/* Run hooks one caller at a time; a hook calling back in is skipped. */
static void flush_run(enum xpt_flush_reason reason) {
  pid_t self = flush_thread_id();
  pid_t expected = 0;
  if (atomic_load(&flush.owner) == self)
    return;
  while (!atomic_compare_exchange_weak(&flush.owner, &expected, self)) {
    expected = 0;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  for (int i = atomic_load(&flush.count) - 1; i >= 0; --i)
    flush.hooks[i].fn(flush.hooks[i].ctx, reason);
  atomic_store(&flush.owner, 0);
}

void xpt_flush_all(enum xpt_flush_reason reason) { flush_run(reason); }

/* A library destructor runs after every atexit handler of the program,
 * even those registered before tracing started: their events count. */
__attribute__((destructor)) static void flush_at_exit(void) { flush_run(XPT_FLUSH_EXIT); }

void xpt_register_flush(xpt_flush_fn fn, void *ctx) {
  if (!fn)
    return;
  pthread_mutex_lock(&flush.register_lock);
  int n = atomic_load(&flush.count);
  if (n < FLUSH_MAX_HOOKS) {
    flush.hooks[n].fn = fn;
    flush.hooks[n].ctx = ctx;
    atomic_store(&flush.count, n + 1);
  } else {
    fprintf(stderr, "xpti: too many flush hooks (at most %d); one is ignored\n", FLUSH_MAX_HOOKS);
  }
  pthread_mutex_unlock(&flush.register_lock);
}

/* ---- fork --------------------------------------------------------------- */

/* The output folder's fork handling is in src/common (xpt_outdir.c). */
static void fork_child(void) {
  atomic_store(&flush.owner, 0);
  flush_run(XPT_FLUSH_FORK_CHILD);
}

__attribute__((constructor)) static void xpt_collector_common_init(void) {
  pthread_atfork(NULL, NULL, fork_child);
}

/* ---- sizes: src/common/xpt_env.c ---------------------------------------- */

/* ---- clock ------------------------------------------------------------------ */

uint64_t xpt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* TSC ticks at a constant rate through frequency changes and idle states. */
static bool xpt_tsc_invariant(void) {
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f)
    return false;
  char *line = NULL;
  size_t cap = 0;
  bool constant = false, nonstop = false;
  while (getline(&line, &cap, f) > 0) {
    if (strncmp(line, "flags", 5) != 0)
      continue;
    for (char *tok = strtok(line + 5, " \t\n:"); tok; tok = strtok(NULL, " \t\n"))
      constant |= !strcmp(tok, "constant_tsc"), nonstop |= !strcmp(tok, "nonstop_tsc");
    break; /* the first CPU speaks for all */
  }
  free(line);
  fclose(f);
  return constant && nonstop;
}

void xpt_clock_pair(uint64_t *ticks, uint64_t *ns) {
  *ticks = 0;
  *ns = xpt_now_ns();
#if defined(__x86_64__)
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; i++) { /* as close together as a few tries allow */
    uint64_t t0 = __rdtsc(), n = xpt_now_ns(), t1 = __rdtsc();
    if (t1 - t0 < best_gap) {
      best_gap = t1 - t0;
      *ticks = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
#endif
}

bool xpt_clock_tsc(bool report) {
#if defined(__x86_64__)
  const char *mode = getenv("XPTRACE_CLOCK");
  if (mode && !strcmp(mode, "monotonic"))
    return false;
  if (report && mode && *mode && strcmp(mode, "auto"))
    xpt_msg("xpti: XPTRACE_CLOCK='%s' is not auto or monotonic; using auto", mode);
  return xpt_tsc_invariant();
#else
  (void)report;
  return false;
#endif
}

/* ---- trace point type names ------------------------------------------------ */

/* Indexed by type >> 1 for the standard types below 128. */
static const char *const trace_type_base[64] = {
    [1] = "graph_create",     [2] = "node_create",  [3] = "edge_create",
    [4] = "region",           [5] = "task",         [6] = "barrier",
    [7] = "lock",             [8] = "signal",       [9] = "transfer",
    [10] = "thread",          [11] = "wait",        [12] = "function",
    [13] = "metadata",        [14] = "function_with_args",
    [16] = "mem_alloc",       [17] = "mem_release", [63] = "diagnostics",
};

/* Types that are single points, not begin/end pairs. */
static bool trace_type_is_point(unsigned index) {
  return index == 1 || index == 2 || index == 3 || index == 8 || index == 13 || index == 63;
}

const char *xpt_trace_type_name(uint16_t trace_type, char *buf, size_t buflen) {
  if (!buf || buflen == 0)
    return buf;
  const char *suffix = (trace_type & 1) ? "_end" : "_begin";
  if (trace_type & 0x80) {
    uint8_t tool = XPTI_TOOL_ID(trace_type);
    unsigned n = (unsigned)(trace_type & 0x7f) >> 1;
    if (trace_type == XPTI_TRACE_USER_DEFINED) {
      snprintf(buf, buflen, "user_defined");
      return buf;
    }
    const char *tool_name = (xpt_api_tool_name && tool) ? xpt_api_tool_name(tool) : NULL;
    if (tool_name)
      snprintf(buf, buflen, "%s:%u%s", tool_name, n, suffix);
    else
      snprintf(buf, buflen, "tool%u:%u%s", (unsigned)tool, n, suffix);
    return buf;
  }
  unsigned index = trace_type >> 1;
  const char *base = trace_type < 128 ? trace_type_base[index] : NULL;
  if (!base || (trace_type_is_point(index) && (trace_type & 1)))
    snprintf(buf, buflen, "type_%u", (unsigned)trace_type);
  else if (trace_type_is_point(index))
    snprintf(buf, buflen, "%s", base);
  else
    snprintf(buf, buflen, "%s%s", base, suffix);
  return buf;
}

/* ---- stream selection ------------------------------------------------------- */

static struct {
  pthread_once_t once;
  char *list; /* NULL: every stream */
} streams = {.once = PTHREAD_ONCE_INIT};

/* Whether the list names at least one stream (not only commas/blanks). */
static bool streams_has_name(const char *list) {
  for (; *list; ++list)
    if (*list != ',' && *list != ' ' && *list != '\t')
      return true;
  return false;
}

static void streams_read(void) {
  const char *env = getenv("XPTRACE_STREAMS");
  if (!env || !*env)
    return;
  if (!streams_has_name(env)) {
    xpt_msg_once("env-streams", "xpti: XPTRACE_STREAMS='%s' names no stream; recording every stream",
                 env);
    return;
  }
  streams.list = strdup(env);
}

bool xpt_stream_selected(const char *name) {
  pthread_once(&streams.once, streams_read);
  if (!streams.list)
    return true;
  if (!name)
    return false;
  const char *item = streams.list;
  while (*item) {
    const char *end = strchr(item, ',');
    size_t len = end ? (size_t)(end - item) : strlen(item);
    char pattern[256];
    /* Surrounding spaces are not part of a name. */
    while (len && (*item == ' ' || *item == '\t'))
      ++item, --len;
    while (len && (item[len - 1] == ' ' || item[len - 1] == '\t'))
      --len;
    if (len && len < sizeof pattern) {
      memcpy(pattern, item, len);
      pattern[len] = '\0';
      if (fnmatch(pattern, name, 0) == 0)
        return true;
    }
    if (!end)
      break;
    item = end + 1;
  }
  return false;
}
