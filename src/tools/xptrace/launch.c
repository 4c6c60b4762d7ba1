/* What the subcommands share: where our libraries are, checking and
 * launching the command, the output folder, messages.  See docs/xptrace.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <time.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xpti/xpti_data_types.h>

#include "xpt_collector.h"
#include "xptrace_cmds.h"

#ifndef XPTRACE_REL_LIBDIR
#define XPTRACE_REL_LIBDIR "../lib"
#endif
#define XPTRACE_BUILD_REL_LIBDIR "../lib"

const struct xptrace_collector xptrace_collectors[NCOLLECTORS] = {
    {"perfetto", "libxpti_perfetto.so", "trace file for ui.perfetto.dev (Perfetto protobuf or Chrome JSON)"},
    {"stats", "libxpti_stats.so", "count, total, self, mean, min, max, p50/p95/p99 per event name"},
    {"text", "libxpti_text.so", "one line per notification (reference collector)"},
};

/* ---- library location -------------------------------------------------- */

char lib_dir[PATH_MAX];

/* The folder holding libxptifw.so, found next to the executable. */
void locate_lib_dir(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(lib_dir, sizeof lib_dir, "%s", XPTRACE_REL_LIBDIR);
    return;
  }
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash)
    *slash = '\0';
  const char *candidates[] = {XPTRACE_REL_LIBDIR, XPTRACE_BUILD_REL_LIBDIR};
  for (size_t i = 0; i < 2; ++i) {
    char dir[PATH_MAX + 32], probe[PATH_MAX + 64], resolved[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", exe, candidates[i]);
    snprintf(probe, sizeof probe, "%s/libxptifw.so", dir);
    if (access(probe, R_OK) == 0 && realpath(dir, resolved)) {
      snprintf(lib_dir, sizeof lib_dir, "%s", resolved);
      return;
    }
  }
  if (snprintf(lib_dir, sizeof lib_dir, "%s/%s", exe, XPTRACE_REL_LIBDIR) >= (int)sizeof lib_dir)
    snprintf(lib_dir, sizeof lib_dir, "%s", XPTRACE_REL_LIBDIR);
}

void lib_path(const char *library, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", lib_dir, library);
}

bool lib_exists(const char *library) {
  char path[PATH_MAX + 64];
  lib_path(library, path, sizeof path);
  return access(path, R_OK) == 0;
}

/* One line naming the problem, then the usage; the program is not run. */
int usage_error(const char *usage, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("xptrace: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fputs(usage, stderr);
  return EXIT_USAGE;
}

/* Levenshtein distance of a and b's first nb bytes (short words only). */
static size_t edit_distance(const char *a, const char *b, size_t nb) {
  size_t na = strlen(a), row[64];
  if (na >= 63 || nb >= 63)
    return SIZE_MAX;
  for (size_t j = 0; j <= nb; j++)
    row[j] = j;
  for (size_t i = 1; i <= na; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[nb];
}

static const char *nearest_n(const char *const *names, const char *word, size_t n) {
  const char *best = NULL;
  size_t bd = SIZE_MAX;
  for (size_t i = 0; names[i]; i++) {
    size_t d = edit_distance(names[i], word, n);
    if (d < bd)
      bd = d, best = names[i];
  }
  return bd <= 2 && 2 * bd <= n ? best : NULL;
}

const char *nearest_name(const char *const *names, const char *word) {
  return nearest_n(names, word, strlen(word));
}

void option_names(const void *longopts, const char **names, size_t max) {
  const struct option *o = longopts;
  size_t n = 0;
  for (; o && o->name && n + 1 < max; o++)
    names[n++] = o->name;
  names[n] = NULL;
}

int unknown_option(const char *usage, const char *const *names, const char *arg) {
  const char *word = arg;
  while (*word == '-')
    word++;
  const char *near = word > arg ? nearest_n(names, word, strcspn(word, "=")) : NULL;
  if (near)
    return usage_error(usage, "unknown option '%s' (did you mean --%s?)", arg, near);
  return usage_error(usage, "unknown option '%s'", arg);
}

/* Whether `cmd` can be executed, searching PATH as execvp does.  Returns 0,
 * or the shell's exit status (127 not found, 126 not executable) after
 * the shell's one-line message; nothing is created before this. */
int command_check(const char *cmd) {
  struct stat st;
  if (strchr(cmd, '/')) {
    if (stat(cmd, &st) != 0) {
      fprintf(stderr, "xptrace: %s: %s\n", cmd, strerror(errno));
      return errno == ENOENT || errno == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
    }
    if (S_ISDIR(st.st_mode)) {
      fprintf(stderr, "xptrace: %s: %s\n", cmd, strerror(EISDIR));
      return EXIT_CANNOT_RUN;
    }
    if (access(cmd, X_OK) != 0) {
      fprintf(stderr, "xptrace: %s: %s\n", cmd, strerror(errno));
      return EXIT_CANNOT_RUN;
    }
    return 0;
  }
  const char *path = getenv("PATH");
  if (!path)
    path = "/bin:/usr/bin";
  bool denied = false;
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    char full[PATH_MAX];
    if (snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? path : ".", cmd) < (int)sizeof full &&
        stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(full, X_OK) == 0)
        return 0;
      denied = true;
    }
    if (!end)
      break;
    path = end + 1;
  }
  if (denied) {
    fprintf(stderr, "xptrace: %s: %s\n", cmd, strerror(EACCES));
    return EXIT_CANNOT_RUN;
  }
  fprintf(stderr, "xptrace: %s: command not found\n", cmd);
  return EXIT_NOT_FOUND;
}

const char *signal_name(int sig) {
  static char buf[16];
  const char *abbrev = sigabbrev_np(sig);
  if (!abbrev)
    return "unknown";
  snprintf(buf, sizeof buf, "SIG%s", abbrev);
  return buf;
}

static volatile sig_atomic_t child_pid, forwarded_sig;
/* When this xptrace started its command: files older are another run's. */
static struct timespec launch_t0;

/* A signal that would end xptrace goes to the command instead, which then
 * ends (or not) as it would have; xptrace says so and reports that. */
static void forward_signal(int sig) {
  if (child_pid > 0) {
    kill((pid_t)child_pid, sig);
    forwarded_sig = sig;
  }
}

/* Every signal whose default action ends a process, but the terminal's
 * (SIGINT, SIGQUIT: the terminal sends them to the command too; ignored
 * here meanwhile), the faults and SIGPIPE (xptrace's own). */
static const int forwarded_signals[] = {SIGTERM, SIGHUP,    SIGUSR1, SIGUSR2, SIGALRM,
                                        SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPOLL,
#ifdef SIGSTKFLT
                                        SIGSTKFLT,
#endif
#ifdef SIGPWR
                                        SIGPWR,
#endif
};

/* The forwarded signals as a set: blocked across the fork, so that one
 * sent to xptrace before its handlers are in place waits for them. */
static void forwarded_set(sigset_t *set) {
  sigemptyset(set);
  for (size_t i = 0; i < sizeof forwarded_signals / sizeof *forwarded_signals; i++)
    sigaddset(set, forwarded_signals[i]);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
    sigaddset(set, sig);
}

void launch_forward_signals(int pid) {
  /* pid 0: the command is reaped (its pid may be reused): the defaults
   * again, for what xptrace does after it. */
  child_pid = pid;
  if (pid && !launch_t0.tv_sec) /* the clock file times are taken from */
    clock_gettime(CLOCK_REALTIME_COARSE, &launch_t0);
  struct sigaction forward = {.sa_handler = pid ? forward_signal : SIG_DFL}, old;
  sigemptyset(&forward.sa_mask);
  size_t n = sizeof forwarded_signals / sizeof *forwarded_signals;
  for (int i = 0; i < (int)n + SIGRTMAX - SIGRTMIN + 1; i++) {
    int sig = i < (int)n ? forwarded_signals[i] : SIGRTMIN + (i - (int)n);
    /* One ignored when xptrace started (nohup) stays ignored: the command
     * inherited that. */
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
      sigaction(sig, &forward, NULL);
  }
}

void launch_forward_said(const char *command) {
  int sig = forwarded_sig;
  if (sig)
    fprintf(stderr, "xptrace: passed %s on to %s\n", signal_name(sig), command);
}

void set_env(bool verbose, const char *name, const char *value) {
  setenv(name, value, 1);
  if (verbose)
    fprintf(stderr, "xptrace: %s=%s\n", name, value);
}
/* ---- launching (run and sample) --------------------------------------- */

/* The output folder, absolute, created before the program starts so that
 * its name can be printed and a bad one refused.  -o: an existing folder
 * must be ours and not writable by others; the default name is always a
 * new folder ("-1", "-2" ... when taken: the pid is easy to guess). */
/* A folder that cannot be made: one line, no usage (the usage was right). */
static int folder_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int folder_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("xptrace: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return EXIT_USAGE;
}

int output_dir_prepare(const char *usage, const char *output, const char *command0,
                              char *dir, size_t len) {
  if (output && !*output)
    return usage_error(usage, "empty output folder name");
  if (output) {
    snprintf(dir, len, "%s", output);
  } else {
    const char *base = strrchr(command0, '/');
    snprintf(dir, len, "xptrace-%s-%d", base ? base + 1 : command0, (int)getpid());
  }
  if (dir[0] != '/') {
    char cwd[PATH_MAX], joined[2 * PATH_MAX + 1];
    if (!getcwd(cwd, sizeof cwd))
      return folder_error("cannot read the current folder: %s", strerror(errno));
    snprintf(joined, sizeof joined, "%s/%s", cwd, dir);
    if (snprintf(dir, len, "%s", joined) >= (int)len)
      return folder_error("output folder name too long: %s", joined);
  }
  char why[2 * PATH_MAX];
  int err = output ? xpt_dir_prepare(dir, why, sizeof why)
                   : xpt_dir_create_new(dir, len, why, sizeof why);
  if (err)
    return folder_error("%s", why);
  return 0;
}

/* LD_PRELOAD gets the sampler first, before what the user preloads. */
int preload_sampler(const char *usage, bool verbose) {
  char sampler[PATH_MAX + 64];
  lib_path("libxptrace_sampler.so", sampler, sizeof sampler);
  if (access(sampler, R_OK) != 0)
    return usage_error(usage, "sampler not installed: %s: %s", sampler, strerror(errno));
  const char *preload = getenv("LD_PRELOAD");
  if (preload && *preload) {
    size_t n = strlen(preload) + strlen(sampler) + 2;
    char *joined = malloc(n);
    if (!joined)
      return 1;
    snprintf(joined, n, "%s:%s", sampler, preload);
    set_env(verbose, "LD_PRELOAD", joined);
    free(joined);
  } else {
    set_env(verbose, "LD_PRELOAD", sampler);
  }
  /* A sampled xptrace's own root marker is not the command's. */
  unsetenv("XPTRACE_SAMPLE_ROOT_PID");
  return 0;
}

/* This run's samples*.folded in `dir` (written since the command
 * started: a folder used before keeps the other run's samples.folded and
 * this one's takes a new name, samples-1.folded), the CPU-time one before
 * the real-time one, else the newest; a planted symlink is never what we
 * wrote. */
void print_sample_outputs(const char *dir, bool explain) {
  DIR *d = opendir(dir);
  char best[NAME_MAX + 1] = "";
  struct timespec best_t = {0, 0};
  bool best_cpu = false;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    size_t n = strlen(e->d_name);
    if (strncmp(e->d_name, "samples", 7) != 0 || n < 14 || strcmp(e->d_name + n - 7, ".folded") != 0)
      continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (st.st_mtim.tv_sec < launch_t0.tv_sec ||
        (st.st_mtim.tv_sec == launch_t0.tv_sec && st.st_mtim.tv_nsec < launch_t0.tv_nsec))
      continue; /* another run's */
    bool cpu = !strstr(e->d_name, "realtime") && !strstr(e->d_name, "offcpu");
    bool newer = !best[0] || st.st_mtim.tv_sec > best_t.tv_sec ||
                 (st.st_mtim.tv_sec == best_t.tv_sec && st.st_mtim.tv_nsec > best_t.tv_nsec);
    if (!best[0] || (cpu && !best_cpu) || (cpu == best_cpu && newer)) {
      snprintf(best, sizeof best, "%s", e->d_name);
      best_t = st.st_mtim;
      best_cpu = cpu;
    }
  }
  if (d)
    closedir(d);
  if (best[0]) {
    size_t n = strlen(best) - 7;
    fprintf(stderr, "xptrace: samples %s/%s (flamegraph.pl, speedscope), %s/%.*s.csv; "
            "flame graph %s/%.*s.svg (a browser)\n", dir, best, dir, (int)n, best, dir, (int)n, best);
  } else {
    /* Most often a command too short for the rate: said here for `run
     * --sample` (`xptrace sample` says why in its own summary). */
    struct rusage ru;
    double cpu = getrusage(RUSAGE_CHILDREN, &ru) == 0
                     ? (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6
                     : -1.0;
    const char *f = getenv("XPTRACE_SAMPLE_FREQ");
    double hz = f && atof(f) > 0 ? atof(f) : 100.0;
    /* A few periods' worth: the CPU time counts the start-up before the
     * sampler is armed (`true` used 21 ms under a loaded CI run). */
    if (explain && cpu >= 0 && cpu * hz < 5.0)
      fprintf(stderr,
              "xptrace: no samples written in %s: the command used %.1f ms of CPU time, "
              "about %.1f samples' worth at %g Hz (xptrace sample --freq samples faster)\n",
              dir, cpu * 1e3, cpu * hz, hz);
    else
      fprintf(stderr, "xptrace: no samples written in %s\n", dir);
  }
}

void (*launch_on_fork)(int pid, void *ctx);
void *launch_on_fork_ctx;

/* Run the command with the environment set up, wait for it; returns its
 * exit status (128+N when killed by signal N).  `after` prints what it
 * left, before the status is reported. */
int launch_and_wait(char **command, bool verbose, void (*after)(const void *), const void *ctx) {
  if (verbose) {
    fputs("xptrace: running", stderr);
    for (char **a = command; *a; ++a)
      fprintf(stderr, " %s", *a);
    fputc('\n', stderr);
  }

  /* Ctrl-C reaches the command from the terminal; xptrace waits for it
   * to finish its output instead of dying first. */
  struct sigaction ignore = {.sa_handler = SIG_IGN};
  struct sigaction old_int, old_quit;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  fflush(NULL);
  /* launch_on_fork: the command waits at a gate (a pipe closed at exec)
   * until the hook has run, so that what it sets up sees the exec. */
  int gate[2] = {-1, -1};
  if (launch_on_fork && pipe2(gate, O_CLOEXEC) != 0)
    gate[0] = gate[1] = -1;
  /* A signal sent to xptrace as soon as the command shows a sign of life
   * (a test's SIGUSR2) must not find the default action still in place:
   * blocked until the handlers are, then forwarded. */
  sigset_t forwarded, old_mask;
  forwarded_set(&forwarded);
  sigprocmask(SIG_BLOCK, &forwarded, &old_mask);
  pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    fprintf(stderr, "xptrace: cannot start %s: %s\n", command[0], strerror(errno));
    if (gate[0] >= 0)
      close(gate[0]), close(gate[1]);
    return 1;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    if (gate[0] >= 0) {
      char go;
      close(gate[1]);
      while (read(gate[0], &go, 1) < 0 && errno == EINTR)
        ;
    }
    execvp(command[0], command);
    fprintf(stderr, "xptrace: cannot run %s: %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? EXIT_NOT_FOUND : 126);
  }
  if (launch_on_fork) {
    if (gate[0] >= 0)
      close(gate[0]);
    launch_on_fork(pid, launch_on_fork_ctx);
    if (gate[1] >= 0)
      close(gate[1]);
  }
  launch_forward_signals(pid);
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "xptrace: lost %s: %s\n", command[0], strerror(errno));
      return 1;
    }
  }
  launch_forward_signals(0);
  launch_forward_said(command[0]);
  if (after)
    after(ctx);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fprintf(stderr, "xptrace: %s killed by signal %d (%s)\n", command[0], sig, signal_name(sig));
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

