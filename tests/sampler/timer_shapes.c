/* Programs of known shape for the timer sampler's tests (test_timer.py).
 *
 * usage: timer_shapes MODE [MS]      (MS: CPU milliseconds of work, default 400)
 *   short     one thread spinning MS in long_spin, and 500 threads one after
 *             the other spinning MS/500 each in short_spin: CPU 50/50
 *   spin      the main thread spins MS in main_spin
 *   sigint    installs its own SIGINT handler, checks that the action it
 *             replaced was the default and that a query returns its own,
 *             spins, raises SIGINT and checks that its handler ran
 *   closefds  spins MS/2, closes fds 1 and 2, spins MS/2 more
 *   _exit     spins, then _exit(7)
 *   kill      spins, then SIGKILL to itself
 *   plugins   dlopen PLUGIN_A, spin MS/2 in its plugin_a_spin, dlclose it,
 *             then the same with PLUGIN_B (often loaded where A was)
 *   forkexec  forks; the child execs this program ("spin MS"), the parent
 *             spins MS in main_spin and waits for it
 * Prints "ok" on stdout (before closing it, in closefds) when its checks pass. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spin on this thread's CPU clock for `ms` milliseconds. */
#define SPIN_FN(name)                                                     \
  __attribute__((noinline)) void name(double ms) {                        \
    double end = cpu_now(CLOCK_THREAD_CPUTIME_ID) + ms * 1e-3;            \
    volatile uint64_t x = 1;                                              \
    while (cpu_now(CLOCK_THREAD_CPUTIME_ID) < end)                        \
      for (int i = 0; i < 50000; ++i)                                      \
        x = x * 6364136223846793005ull + 1;                               \
  }
SPIN_FN(long_spin)
SPIN_FN(short_spin)
SPIN_FN(main_spin)

static double ms = 400;

static void *long_thread(void *arg) {
  (void)arg;
  long_spin(ms);
  return NULL;
}

static void *short_thread(void *arg) {
  (void)arg;
  short_spin(ms / 500);
  return NULL;
}

static int run_short(void) {
  pthread_t l;
  if (pthread_create(&l, NULL, long_thread, NULL) != 0)
    return 1;
  for (int i = 0; i < 500; ++i) {
    pthread_t s;
    if (pthread_create(&s, NULL, short_thread, NULL) != 0)
      return 1;
    pthread_join(s, NULL);
  }
  pthread_join(l, NULL);
  return 0;
}

static volatile sig_atomic_t got_sigint;
static void on_sigint(int sig) {
  (void)sig;
  got_sigint = 1;
}

static int run_sigint(void) {
  struct sigaction sa, old, now;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  /* What Python does: install its handler only over the default. */
  if (sigaction(SIGINT, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
    fprintf(stderr, "timer_shapes: SIGINT was not at its default action\n");
    return 1;
  }
  if (sigaction(SIGINT, &sa, &old) != 0 || old.sa_handler != SIG_DFL)
    return 1;
  main_spin(ms);
  if (sigaction(SIGINT, NULL, &now) != 0 || (now.sa_flags & SA_SIGINFO) || now.sa_handler != on_sigint) {
    fprintf(stderr, "timer_shapes: SIGINT: a query does not return our handler\n");
    return 1;
  }
  raise(SIGINT);
  if (!got_sigint) {
    fprintf(stderr, "timer_shapes: our SIGINT handler did not run\n");
    return 1;
  }
  return 0;
}

static int run_plugin(const char *env, const char *fn) {
  const char *path = getenv(env);
  if (!path)
    return 1;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "timer_shapes: %s\n", dlerror());
    return 1;
  }
  void (*spin)(double) = (void (*)(double))dlsym(h, fn);
  if (!spin)
    return 1;
  spin(ms / 2);
  return dlclose(h);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "spin";
  if (argc > 2)
    ms = atof(argv[2]);
  int rc = 0;
  if (strcmp(mode, "short") == 0) {
    rc = run_short();
  } else if (strcmp(mode, "spin") == 0) {
    main_spin(ms);
  } else if (strcmp(mode, "sigint") == 0) {
    rc = run_sigint();
  } else if (strcmp(mode, "closefds") == 0) {
    main_spin(ms / 2);
    printf("ok\n");
    fflush(stdout);
    close(1);
    close(2);
    main_spin(ms / 2);
    return 0;
  } else if (strcmp(mode, "_exit") == 0) {
    main_spin(ms);
    printf("ok\n");
    fflush(stdout);
    _exit(7);
  } else if (strcmp(mode, "kill") == 0) {
    main_spin(ms);
    printf("ok\n");
    fflush(stdout);
    kill(getpid(), SIGKILL);
  } else if (strcmp(mode, "plugins") == 0) {
    rc = run_plugin("PLUGIN_A", "plugin_a_spin") || run_plugin("PLUGIN_B", "plugin_b_spin");
  } else if (strcmp(mode, "forkexec") == 0) {
    pid_t pid = fork();
    if (pid < 0)
      return 1;
    if (pid == 0) {
      char arg[32];
      snprintf(arg, sizeof arg, "%g", ms);
      execl("/proc/self/exe", "timer_shapes", "spin", arg, (char *)NULL);
      _exit(127);
    }
    main_spin(ms);
    int status;
    rc = waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  } else {
    fprintf(stderr, "timer_shapes: unknown mode %s\n", mode);
    return 2;
  }
  if (rc == 0)
    printf("ok\n");
  return rc;
}
