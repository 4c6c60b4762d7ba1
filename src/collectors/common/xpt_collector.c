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
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <xpti/xpti_trace_framework.h>

/* The framework may not be linked (e.g. into the xptrace tool): only use
 * its tool-name lookup when it is there. */
#pragma weak xptiLookupToolName

/* ---- program name ---------------------------------------------------- */

const char *xpt_program_name(void) {
  const char *name = program_invocation_short_name;
  return (name && *name) ? name : "program";
}

/* ---- output directory ------------------------------------------------ */

static struct {
  pthread_mutex_t lock;
  pid_t pid; /* the process `path` belongs to; 0: not computed yet */
  bool created;
  bool failed;
  char path[PATH_MAX];
} outdir = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Make `path` absolute so that a later chdir() in the program does not
 * move the output. */
static void outdir_set(const char *path) {
  if (path[0] == '/') {
    snprintf(outdir.path, sizeof outdir.path, "%s", path);
    return;
  }
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) {
    snprintf(outdir.path, sizeof outdir.path, "%s", path);
    return;
  }
  int n = snprintf(outdir.path, sizeof outdir.path, "%s/%s", cwd, path);
  if (n < 0 || (size_t)n >= sizeof outdir.path)
    snprintf(outdir.path, sizeof outdir.path, "%s", path);
}

static void outdir_compute_base_locked(void) {
  if (outdir.pid)
    return;
  const char *env = getenv("XPTRACE_OUTPUT");
  if (env && *env) {
    outdir_set(env);
  } else {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "xptrace-%s-%d", xpt_program_name(), (int)getpid());
    outdir_set(name);
  }
  outdir.pid = getpid();
}

int xpt_mkdir_p(char *path) {
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/')
    path[--len] = '\0';
  for (char *p = path + 1; *p; ++p) {
    if (*p != '/')
      continue;
    *p = '\0';
    int rc = mkdir(path, 0777);
    int err = errno;
    *p = '/';
    if (rc != 0 && err != EEXIST)
      return err;
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST)
    return errno;
  struct stat st;
  if (stat(path, &st) != 0)
    return errno;
  if (!S_ISDIR(st.st_mode))
    return ENOTDIR;
  if (access(path, W_OK | X_OK) != 0)
    return errno;
  return 0;
}

const char *xpt_output_dir(void) {
  pthread_mutex_lock(&outdir.lock);
  outdir_compute_base_locked();
  if (outdir.pid != getpid()) {
    /* A forked child: its own folder under the parent's. */
    char child[PATH_MAX];
    int n = snprintf(child, sizeof child, "%s/child-%d", outdir.path, (int)getpid());
    if (n > 0 && (size_t)n < sizeof child)
      memcpy(outdir.path, child, (size_t)n + 1);
    outdir.pid = getpid();
    outdir.created = outdir.failed = false;
  }
  if (!outdir.created && !outdir.failed) {
    int err = xpt_mkdir_p(outdir.path);
    if (err == 0) {
      outdir.created = true;
    } else {
      outdir.failed = true;
      fprintf(stderr, "xpti: cannot create output directory '%s': %s\n", outdir.path,
              strerror(err));
    }
  }
  const char *result = outdir.created ? outdir.path : NULL;
  pthread_mutex_unlock(&outdir.lock);
  return result;
}

/* ---- flush hooks ------------------------------------------------------ */

enum { FLUSH_MAX_HOOKS = 64 };
static const int flush_signals[] = {SIGINT, SIGTERM, SIGSEGV, SIGABRT, SIGBUS, SIGFPE};
enum { FLUSH_NSIGNALS = sizeof flush_signals / sizeof flush_signals[0] };

static struct {
  pthread_mutex_t register_lock;
  struct {
    xpt_flush_fn fn;
    void *ctx;
  } hooks[FLUSH_MAX_HOOKS];
  _Atomic int count;     /* published after the slot is written */
  _Atomic pid_t owner;   /* thread id running hooks; 0 when none */
  atomic_bool signal_seen;
  bool installed;
  struct sigaction previous[FLUSH_NSIGNALS];
} flush = {.register_lock = PTHREAD_MUTEX_INITIALIZER};

static pid_t flush_thread_id(void) { return (pid_t)syscall(SYS_gettid); }

/* Run hooks one caller at a time.  A signal arriving on the thread that
 * is already running them must not wait for itself: it skips them. */
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

static void flush_at_exit(void) { flush_run(XPT_FLUSH_EXIT); }

static void flush_on_signal(int sig, siginfo_t *info, void *uctx) {
  int saved_errno = errno;
  int index = 0;
  while (index < FLUSH_NSIGNALS && flush_signals[index] != sig)
    ++index;
  if (index == FLUSH_NSIGNALS)
    return;
  if (!atomic_exchange(&flush.signal_seen, true))
    flush_run(XPT_FLUSH_SIGNAL);

  const struct sigaction *prev = &flush.previous[index];
  if (prev->sa_flags & SA_SIGINFO) {
    if (prev->sa_sigaction) {
      prev->sa_sigaction(sig, info, uctx);
      errno = saved_errno;
      return;
    }
  } else if (prev->sa_handler == SIG_IGN) {
    errno = saved_errno;
    return;
  } else if (prev->sa_handler != SIG_DFL) {
    prev->sa_handler(sig);
    errno = saved_errno;
    return;
  }
  /* Default action: the signal is blocked while we run, so it is
   * delivered (and kills) as soon as this handler returns. */
  signal(sig, SIG_DFL);
  raise(sig);
  errno = saved_errno;
}

static void flush_install_locked(void) {
  if (flush.installed)
    return;
  flush.installed = true;
  atexit(flush_at_exit);
  for (int i = 0; i < FLUSH_NSIGNALS; ++i) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = flush_on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(flush_signals[i], &sa, &flush.previous[i]);
  }
}

void xpt_register_flush(xpt_flush_fn fn, void *ctx) {
  if (!fn)
    return;
  pthread_mutex_lock(&flush.register_lock);
  flush_install_locked();
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

/* Before fork the parent's folder name is fixed (not created), so that
 * the child can name its own folder under it. */
static void fork_prepare(void) {
  pthread_mutex_lock(&outdir.lock);
  outdir_compute_base_locked();
}

static void fork_parent(void) { pthread_mutex_unlock(&outdir.lock); }

static void fork_child(void) {
  pthread_mutex_unlock(&outdir.lock);
  atomic_store(&flush.owner, 0);
  atomic_store(&flush.signal_seen, false);
  flush_run(XPT_FLUSH_FORK_CHILD);
}

__attribute__((constructor)) static void xpt_collector_common_init(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- sizes ---------------------------------------------------------------- */

bool xpt_parse_size(const char *text, uint64_t *value) {
  if (!text || *text < '0' || *text > '9')
    return false;
  uint64_t n = 0;
  const char *p = text;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (n > (UINT64_MAX - 9) / 10)
      return false;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  unsigned shift = 0;
  switch (*p) {
  case '\0':
    break;
  case 'k': case 'K': shift = 10; ++p; break;
  case 'm': case 'M': shift = 20; ++p; break;
  case 'g': case 'G': shift = 30; ++p; break;
  default:
    return false;
  }
  if (shift && *p) {
    if (strcmp(p, "B") == 0 || strcmp(p, "b") == 0 || strcmp(p, "iB") == 0)
      p += strlen(p);
    else
      return false;
  }
  if (*p)
    return false;
  if (n > (UINT64_C(1) << 63) >> shift)
    return false;
  *value = n << shift;
  return true;
}

uint64_t xpt_env_size(const char *name, uint64_t default_value) {
  const char *text = getenv(name);
  if (!text || !*text)
    return default_value;
  uint64_t value;
  if (xpt_parse_size(text, &value))
    return value;
  fprintf(stderr, "xpti: %s='%s' is not a size; using %llu\n", name, text,
          (unsigned long long)default_value);
  return default_value;
}

/* ---- clock ------------------------------------------------------------------ */

uint64_t xpt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
    const char *tool_name = (xptiLookupToolName && tool) ? xptiLookupToolName(tool) : NULL;
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

static void streams_read(void) {
  const char *env = getenv("XPTRACE_STREAMS");
  if (env && *env)
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
