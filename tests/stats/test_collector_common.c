/* Tests of the shared collector helper (xptrace_collector_common).
 * Usage: test_collector_common MODE [SCRATCH_DIR]; each mode runs in its
 * own process because the helper reads its environment once. */
#include "xpt_collector.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

static const char *scratch;

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- hooks that log to a file: "<tag><reason letter>" -------------------- */

static char log_path[PATH_MAX];
static const char reason_letter[] = {'E', 'S', 'F', 'C'};

static void log_append(const char *text) {
  int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ssize_t written = write(fd, text, strlen(text));
    (void)written;
    close(fd);
  }
}

static void log_hook(void *ctx, enum xpt_flush_reason reason) {
  char text[3] = {*(const char *)ctx, reason_letter[reason], '\0'};
  log_append(text);
}

static void read_log(char *buf, size_t len) {
  buf[0] = '\0';
  FILE *f = fopen(log_path, "r");
  if (!f)
    return;
  size_t n = fread(buf, 1, len - 1, f);
  buf[n] = '\0';
  fclose(f);
}

static void reset_log(const char *name) {
  snprintf(log_path, sizeof log_path, "%s/%s.log", scratch, name);
  unlink(log_path);
}

/* Run fn in a child process; returns its wait status. */
static int in_child(void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    fn();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

/* ---- modes --------------------------------------------------------------- */

static void mode_outdir_env(void) {
  const char *want = getenv("XPTRACE_OUTPUT");
  CHECK(want && want[0] == '/');
  const char *dir = xpt_output_dir();
  CHECK(dir && strcmp(dir, want) == 0);
  CHECK(dir && is_dir(dir));
  setenv("XPTRACE_OUTPUT", "/nonexistent/elsewhere", 1); /* read once */
  const char *again = xpt_output_dir();
  CHECK(again && strcmp(again, want) == 0);
}

static void mode_outdir_default(void) {
  char cwd[PATH_MAX];
  snprintf(cwd, sizeof cwd, "%s/default-cwd", scratch);
  mkdir(cwd, 0777);
  CHECK(chdir(cwd) == 0);
  unsetenv("XPTRACE_OUTPUT");
  char want[PATH_MAX + 64];
  snprintf(want, sizeof want, "%s/xptrace-%s-%d", cwd, xpt_program_name(), (int)getpid());
  const char *dir = xpt_output_dir();
  CHECK(dir && strcmp(dir, want) == 0);
  CHECK(is_dir(want));
  CHECK(strcmp(xpt_program_name(), "test_collector_common") == 0);
}

static void mode_outdir_fail(void) {
  char errpath[PATH_MAX];
  snprintf(errpath, sizeof errpath, "%s/outdir-fail.err", scratch);
  /* A regular file where a folder should go. */
  char blocker[PATH_MAX];
  snprintf(blocker, sizeof blocker, "%s/blocker", scratch);
  FILE *b = fopen(blocker, "w");
  CHECK(b != NULL);
  if (b)
    fclose(b);
  char target[PATH_MAX + 16];
  snprintf(target, sizeof target, "%s/sub", blocker);
  setenv("XPTRACE_OUTPUT", target, 1);
  fflush(stderr);
  int saved = dup(2);
  int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  xpt_msg_rebind(); /* messages go to the stderr recorded at load */
  const char *first = xpt_output_dir();
  const char *second = xpt_output_dir();
  fflush(stderr);
  dup2(saved, 2);
  xpt_msg_rebind();
  close(fd);
  CHECK(first == NULL && second == NULL);
  char text[2048] = "";
  FILE *f = fopen(errpath, "r");
  if (f) {
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
  }
  char want[PATH_MAX + 128];
  snprintf(want, sizeof want, "xpti: cannot create output directory '%s': Not a directory\n",
           target);
  CHECK(strcmp(text, want) == 0); /* exactly one line, printed once */
}

static int fork_child_hook_calls;
static void count_fork_child(void *ctx, enum xpt_flush_reason reason) {
  (void)ctx;
  if (reason == XPT_FLUSH_FORK_CHILD)
    ++fork_child_hook_calls;
}

static char parent_dir[PATH_MAX];
static void fork_child_checks(void) {
  char want[PATH_MAX + 32];
  snprintf(want, sizeof want, "%s/child-%d", parent_dir, (int)getpid());
  const char *dir = xpt_output_dir();
  if (!dir || strcmp(dir, want) != 0 || !is_dir(want)) {
    fprintf(stderr, "child dir '%s', wanted '%s'\n", dir ? dir : "(null)", want);
    _exit(1);
  }
  if (fork_child_hook_calls != 1)
    _exit(2);
  _exit(0);
}

static void mode_fork(void) {
  const char *env = getenv("XPTRACE_OUTPUT");
  CHECK(env != NULL);
  if (!env)
    return;
  snprintf(parent_dir, sizeof parent_dir, "%s", env);
  xpt_register_flush(count_fork_child, NULL);
  /* The parent has not asked for its folder yet. */
  int status = in_child(fork_child_checks);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const char *dir = xpt_output_dir();
  CHECK(dir && strcmp(dir, parent_dir) == 0);
  status = in_child(fork_child_checks);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(fork_child_hook_calls == 0); /* only children see FORK_CHILD */
}

static void mode_size(void) {
  static const struct {
    const char *text;
    bool ok;
    uint64_t value;
  } cases[] = {
      {"4096", true, 4096},      {"0", true, 0},
      {"64K", true, 65536},      {"64k", true, 65536},
      {"64M", true, 64ull << 20}, {"1G", true, 1ull << 30},
      {"2KiB", true, 2048},      {"3MB", true, 3ull << 20},
      {"", false, 0},            {"K", false, 0},
      {"-1", false, 0},          {"+5", false, 0},
      {"12Q", false, 0},         {"1.5M", false, 0},
      {"64 M", false, 0},        {"99999999999999999999", false, 0},
      {"9000000000G", false, 0}, {"64MX", false, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    uint64_t value = 12345;
    bool ok = xpt_parse_size(cases[i].text, &value);
    if (ok != cases[i].ok || (ok && value != cases[i].value)) {
      fprintf(stderr, "size '%s': ok=%d value=%llu\n", cases[i].text, ok,
              (unsigned long long)value);
      ++failures;
    }
  }
  setenv("XPT_TEST_SIZE", "64M", 1);
  CHECK(xpt_env_size("XPT_TEST_SIZE", 7) == 64ull << 20);
  unsetenv("XPT_TEST_SIZE");
  CHECK(xpt_env_size("XPT_TEST_SIZE", 7) == 7);

  char errpath[PATH_MAX];
  snprintf(errpath, sizeof errpath, "%s/size.err", scratch);
  setenv("XPT_TEST_SIZE", "lots", 1);
  fflush(stderr);
  int saved = dup(2);
  int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  xpt_msg_rebind(); /* messages go to the stderr recorded at load */
  uint64_t got = xpt_env_size("XPT_TEST_SIZE", 4096);
  fflush(stderr);
  dup2(saved, 2);
  xpt_msg_rebind();
  close(fd);
  CHECK(got == 4096);
  char text[512] = "";
  FILE *f = fopen(errpath, "r");
  if (f) {
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
  }
  CHECK(strcmp(text, "xpti: XPT_TEST_SIZE='lots' is not a size; using 4096\n") == 0);
}

/* Issue 8 row 13: XPTRACE_BUFFER_SIZE below one chunk or malformed: the
 * default, with one line per process however often it is read. */
static void mode_buffer_size(void) {
  static const struct {
    const char *text;
    uint64_t want;
    const char *line;
  } cases[] = {
      {NULL, 64ull << 20, ""},
      {"64K", 64ull << 10, ""},
      {"1G", 1ull << 30, ""},
      {"0", 64ull << 20, "xpti: XPTRACE_BUFFER_SIZE='0' is below the minimum of 64K; using 64M\n"},
      {"1K", 64ull << 20, "xpti: XPTRACE_BUFFER_SIZE='1K' is below the minimum of 64K; using 64M\n"},
      {"65535", 64ull << 20,
       "xpti: XPTRACE_BUFFER_SIZE='65535' is below the minimum of 64K; using 64M\n"},
      {"lots", 64ull << 20, "xpti: XPTRACE_BUFFER_SIZE='lots' is not a size; using 64M\n"},
  };
  char errpath[PATH_MAX];
  snprintf(errpath, sizeof errpath, "%s/buffer-size.err", scratch);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* "once" is per process: each case in its own */
      int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 2);
      xpt_msg_rebind();
      if (cases[i].text)
        setenv("XPTRACE_BUFFER_SIZE", cases[i].text, 1);
      else
        unsetenv("XPTRACE_BUFFER_SIZE");
      bool ok = xpt_env_buffer_size() == cases[i].want && xpt_env_buffer_size() == cases[i].want;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char text[512] = "";
    FILE *f = fopen(errpath, "r");
    if (f) {
      size_t n = fread(text, 1, sizeof text - 1, f);
      text[n] = '\0';
      fclose(f);
    }
    if (strcmp(text, cases[i].line) != 0) {
      fprintf(stderr, "XPTRACE_BUFFER_SIZE=%s: printed '%s'\n", cases[i].text ? cases[i].text : "(unset)", text);
      ++failures;
    }
  }
}

static void *exit_from_thread(void *arg) {
  (void)arg;
  exit(3);
}

static void exit_child(void) {
  xpt_register_flush(log_hook, "1");
  xpt_register_flush(log_hook, "2");
  pthread_t t;
  pthread_create(&t, NULL, exit_from_thread, NULL);
  pthread_join(t, NULL);
  _exit(99);
}

static void mode_exit(void) {
  reset_log("exit");
  int status = in_child(exit_child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
  char text[64];
  read_log(text, sizeof text);
  CHECK(strcmp(text, "2E1E") == 0); /* reverse order, once each */
}

static void term_child(void) {
  xpt_register_flush(log_hook, "1");
  raise(SIGTERM);
  _exit(99);
}

static void segv_child(void) {
  xpt_register_flush(log_hook, "1");
  /* A real fault, on a page with no access. */
  volatile int *nowhere = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  *nowhere = 1;
  _exit(99);
}

static void program_handler(int sig) {
  (void)sig;
  log_append("P");
}

static void chain_child(void) {
  signal(SIGINT, program_handler); /* the program's own, installed first */
  xpt_register_flush(log_hook, "1");
  struct sigaction now;
  sigaction(SIGINT, NULL, &now);
  if (now.sa_handler != program_handler) /* the program sees its own handler */
    _exit(98);
  sigaction(SIGTERM, NULL, &now);
  if (now.sa_handler != SIG_DFL)
    _exit(97);
  raise(SIGINT);
  raise(SIGINT);
  exit(0);
}

/* No signal handler of ours: a fatal signal runs no hook (nothing is done
 * at signal time), and the program's own handlers stay its own. */
static void mode_signal(void) {
  reset_log("term");
  int status = in_child(term_child);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  char text[64];
  read_log(text, sizeof text);
  CHECK(strcmp(text, "") == 0);

  reset_log("segv");
  status = in_child(segv_child);
  /* Killed by SIGSEGV; under a sanitizer its own handler reports and exits. */
  CHECK(WIFSIGNALED(status) ? WTERMSIG(status) == SIGSEGV : WEXITSTATUS(status) != 99);
  read_log(text, sizeof text);
  CHECK(strcmp(text, "") == 0);

  reset_log("chain");
  status = in_child(chain_child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  read_log(text, sizeof text);
  /* The program's handler each time, the hooks once at exit. */
  CHECK(strcmp(text, "PP1E") == 0);
}

static void reentrant_hook(void *ctx, enum xpt_flush_reason reason) {
  (void)ctx;
  (void)reason;
  xpt_flush_all(XPT_FLUSH_FINALIZE); /* must not deadlock or recurse */
}

static void flush_all_child(void) {
  xpt_register_flush(log_hook, "1");
  xpt_register_flush(reentrant_hook, NULL);
  xpt_register_flush(log_hook, "2");
  xpt_flush_all(XPT_FLUSH_FINALIZE);
  xpt_flush_all(XPT_FLUSH_FINALIZE);
  _exit(0);
}

static void mode_flush_all(void) {
  reset_log("flush");
  int status = in_child(flush_all_child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char text[64];
  read_log(text, sizeof text);
  CHECK(strcmp(text, "2F1F2F1F") == 0);
}

static void mode_streams(void) {
  /* XPTRACE_STREAMS=" foo ,sycl*" in the test's environment. */
  CHECK(xpt_stream_selected("foo"));
  CHECK(xpt_stream_selected("sycl"));
  CHECK(xpt_stream_selected("sycl.pi"));
  CHECK(!xpt_stream_selected("bar"));
  CHECK(!xpt_stream_selected("fo"));
  CHECK(!xpt_stream_selected(NULL));
  setenv("XPTRACE_STREAMS", "bar", 1); /* read once */
  CHECK(!xpt_stream_selected("bar"));
}

static void mode_names(void) {
  char buf[64];
  static const struct {
    uint16_t type;
    const char *name;
  } cases[] = {
      {2, "graph_create"},   {4, "node_create"},        {6, "edge_create"},
      {8, "region_begin"},   {9, "region_end"},         {10, "task_begin"},
      {11, "task_end"},      {16, "signal"},            {24, "function_begin"},
      {25, "function_end"},  {26, "metadata"},          {28, "function_with_args_begin"},
      {29, "function_with_args_end"}, {32, "mem_alloc_begin"}, {35, "mem_release_end"},
      {126, "diagnostics"},  {128, "user_defined"},     {0, "type_0"},
      {30, "type_30"},       {17, "type_17"},
      {(1 << 8) | 0x80 | 6, "tool1:3_begin"}, {(2 << 8) | 0x80 | 7, "tool2:3_end"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const char *got = xpt_trace_type_name(cases[i].type, buf, sizeof buf);
    if (got != buf || strcmp(got, cases[i].name) != 0) {
      fprintf(stderr, "type %u: '%s', wanted '%s'\n", cases[i].type, buf, cases[i].name);
      ++failures;
    }
  }
  char small[5];
  xpt_trace_type_name(28, small, sizeof small);
  CHECK(strcmp(small, "func") == 0); /* truncated, terminated */
  uint64_t t0 = xpt_now_ns();
  uint64_t t1 = xpt_now_ns();
  CHECK(t0 > 0 && t1 >= t0);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODE SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  scratch = argv[2];
  mkdir(scratch, 0777);
  static const struct {
    const char *name;
    void (*fn)(void);
  } modes[] = {
      {"outdir-env", mode_outdir_env}, {"outdir-default", mode_outdir_default},
      {"outdir-fail", mode_outdir_fail}, {"fork", mode_fork},
      {"size", mode_size},             {"exit", mode_exit},
      {"signal", mode_signal},         {"flush-all", mode_flush_all},
      {"streams", mode_streams},       {"names", mode_names},
      {"buffer-size", mode_buffer_size},
  };
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; ++i) {
    if (strcmp(argv[1], modes[i].name) == 0) {
      modes[i].fn();
      if (failures)
        fprintf(stderr, "%s: %d failure(s)\n", argv[1], failures);
      return failures ? 1 : 0;
    }
  }
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
