/* Fixture of known shape for the function hooks: every count below is
 * exact and checked by run_functions.sh.
 *   fn_work [calls|longjmp|exit|cancel|threads|all]
 * calls:   leaf x 1000 (from loop_leaf), recurse 5..0 (6 slices),
 *          via_ptr x 3 through a function pointer, each calling the
 *          always-inlined inlined_add (seen by compiler hooks only),
 *          tail_from x 3, each ending in a tail call of tail_to (a jump
 *          when patched: tail_to reuses tail_from's return address; the
 *          compiler hooks' exit call keeps it a call), rare(-2..2): its
 *          block for negative x calls cold_note (2 calls), and gcc moves
 *          it out to "rare.cold", which is not a function entry;
 *          getpid x 7 (the C library's)
 * longjmp: jumper -> deep1 -> deep2 -> longjmp back into jumper, then
 *          after_jump: deep1 and deep2 end inside jumper
 * exit:    exit_deep1 -> exit_deep2 -> exit(3) (status 3)
 * cancel:  a thread in cancel_outer -> cancel_inner is cancelled
 * threads: 4 threads, each worker -> leaf x 250
 * signals: signal_loop -> leaf x 20000 while a timer's signal, every
 *          50 us, runs in_handler on this thread: its calls that land in
 *          a hook are not recorded (at least one is); the rest exact
 * deep:    deep_loop -> descend 300 deep, 50 times (15,000 slices): more
 *          open calls than a small chunk holds the ends of
 * jumps:   for longjmp, siglongjmp and _longjmp: jumps_outer -> jdeep1 ->
 *          jdeep2 -> the jump back into jumps_outer, which spins in
 *          spin_for (its time in ns on stderr: "spin_ns=N"), then calls
 *          after_jump; jdeep1 and jdeep2 end at the jump, before the
 *          spin.  Then a thread: pexit_thread -> pexit_deep1 (a cleanup
 *          handler, pexit_cleanup) -> pexit_deep2 -> pthread_exit; the
 *          cleanup prints a line
 * context: ctx_caller runs a coroutine (makecontext): coro_fn calls
 *          coro_leaf and swaps back; ctx_caller calls coro_leaf and swaps
 *          again; coro_fn calls coro_leaf and returns (uc_link back);
 *          ctx_caller calls coro_leaf.  Calls open at a switch end there
 *          and return untraced: main, ctx_caller, coro_fn 1, coro_leaf 4
 * fib:     fib(15): 1973 calls of fib (2 fib(16) - 1)
 * fork:    forker forks inside its call; the child runs loop_leaf (1000
 *          leaf) and returns through forker and main, which it did not
 *          begin; the parent waits for it */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static _Thread_local volatile unsigned long sink; /* per thread: the workers share no data */

/* Never called: one byte (`ret`), too short to patch in the unmodified
 * build, which says it left one function alone. */
NOINLINE void tiny_fn(void) {}

NOINLINE void leaf(unsigned long i) { sink += i; __asm__ volatile("" ::: "memory"); }

NOINLINE void loop_leaf(int n) {
  for (int i = 0; i < n; ++i)
    leaf((unsigned long)i);
}

NOINLINE int recurse(int n) {
  int r = n > 0 ? recurse(n - 1) + 1 : 0;
  __asm__ volatile("" ::: "memory");
  return r;
}

/* Inlined everywhere: only compiler hooks see it (gcc instruments inlined
 * bodies); patching sees the functions that exist in the binary. */
static inline __attribute__((always_inline)) void inlined_add(int x) { sink += (unsigned long)x; }

NOINLINE void via_ptr(int x) {
  inlined_add(x);
  __asm__ volatile("" ::: "memory");
}
void (*volatile fn_pointer)(int) = via_ptr;

NOINLINE int tail_to(int x) {
  sink += (unsigned long)x;
  __asm__ volatile("" ::: "memory");
  return x + 1;
}

/* The file is built without sibling calls (the other counts rely on it):
 * this one function asks for its tail call back. */
#if defined(__clang__)
NOINLINE int tail_from(int x) {
  sink++;
  __attribute__((musttail)) return tail_to(x);
}
#else
NOINLINE __attribute__((optimize("optimize-sibling-calls"))) int tail_from(int x) {
  sink++;
  return tail_to(x);
}
#endif

__attribute__((cold, noinline)) void cold_note(int x) {
  sink += (unsigned long)x;
  __asm__ volatile("" ::: "memory");
}

NOINLINE int rare(int x) {
  unsigned long a = sink, b = sink * 3;
  if (x < 0) {
    cold_note(x);
    x = -x - (int)(a & 1);
  }
  return x * 2 + (int)((a ^ b) & 1);
}

static jmp_buf jump_target;

NOINLINE void deep2(void) {
  sink++;
  longjmp(jump_target, 1);
}

NOINLINE void deep1(void) {
  deep2();
  sink++; /* not reached */
}

NOINLINE void after_jump(void) { sink++; __asm__ volatile("" ::: "memory"); }

NOINLINE void jumper(void) {
  if (setjmp(jump_target) == 0)
    deep1();
  after_jump();
}

NOINLINE void exit_deep2(void) {
  fflush(stdout);
  exit(3);
}

NOINLINE void exit_deep1(void) {
  exit_deep2();
  sink++;
}

NOINLINE int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static ucontext_t ctx_main, ctx_coro;
static char coro_stack[128 * 1024];

NOINLINE void coro_leaf(void) { sink++; __asm__ volatile("" ::: "memory"); }

NOINLINE void coro_fn(void) {
  coro_leaf();
  swapcontext(&ctx_coro, &ctx_main);
  coro_leaf();
}

NOINLINE void ctx_caller(void) {
  getcontext(&ctx_coro);
  ctx_coro.uc_stack.ss_sp = coro_stack;
  ctx_coro.uc_stack.ss_size = sizeof coro_stack;
  ctx_coro.uc_link = &ctx_main;
  makecontext(&ctx_coro, coro_fn, 0);
  swapcontext(&ctx_main, &ctx_coro);
  coro_leaf();
  swapcontext(&ctx_main, &ctx_coro);
  coro_leaf();
}

static sigjmp_buf jumps_target;

NOINLINE void jdeep2(int kind) {
  sink++;
  if (kind == 0)
    longjmp(jumps_target, 1);
  if (kind == 1)
    siglongjmp(jumps_target, 1);
  _longjmp(jumps_target, 1);
}

NOINLINE void jdeep1(int kind) {
  jdeep2(kind);
  sink++; /* not reached */
}

__attribute__((no_instrument_function)) static inline long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* 20 ms of the clock (a busy machine may preempt a call for a few ms):
 * longer than a jumped call's slice if it ended at
 * the jump, shorter if it lasted until the next traced call. */
NOINLINE void spin_for(void) {
  long long t0 = now_ns(), t;
  while ((t = now_ns()) - t0 < 20000000)
    sink++;
  fprintf(stderr, "spin_ns=%lld\n", t - t0);
}

NOINLINE void jumps_outer(int kind) {
  if (sigsetjmp(jumps_target, kind == 1) == 0)
    jdeep1(kind);
  spin_for();
  after_jump();
}

NOINLINE void pexit_cleanup(void *arg) {
  (void)arg;
  printf("fn_work cleanup ran\n");
}

NOINLINE void pexit_deep2(void) {
  sink++;
  pthread_exit(NULL);
}

NOINLINE void pexit_deep1(void) {
  pthread_cleanup_push(pexit_cleanup, NULL);
  pexit_deep2();
  pthread_cleanup_pop(0);
}

static void *pexit_thread(void *arg) {
  (void)arg;
  pexit_deep1();
  return NULL;
}

static pthread_barrier_t cancel_ready;

NOINLINE void cancel_inner(void) {
  /* Cancellable only after 2 ms: the call lasts at least that long. */
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  pthread_barrier_wait(&cancel_ready);
  usleep(2000);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  for (;;) {
    pthread_testcancel();
    usleep(1000);
  }
}

NOINLINE void cancel_outer(void) {
  cancel_inner();
  sink++;
}

static void *cancel_thread(void *arg) {
  (void)arg;
  cancel_outer();
  return NULL;
}

NOINLINE void worker(void) { loop_leaf(250); }

static void *worker_thread(void *arg) {
  (void)arg;
  worker();
  return NULL;
}

static volatile sig_atomic_t handled;

NOINLINE void in_handler(void) { handled = handled + 1; __asm__ volatile("" ::: "memory"); }

static void on_timer(int sig) {
  (void)sig;
  in_handler();
}

NOINLINE void signal_loop(void) {
  for (unsigned long i = 0; i < 20000; ++i)
    leaf(i);
}

/* A timer's signal interrupting traced calls and their hooks at random
 * points, its handler traced too. */
NOINLINE void run_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_timer;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGRTMIN, &sa, NULL);
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGRTMIN;
  ev._sigev_un._tid = gettid();
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0)
    return;
  struct itimerspec every = {{0, 50000}, {0, 50000}};
  timer_settime(timer, 0, &every, NULL);
  signal_loop();
  while (handled == 0) /* one at least, on a slow machine too */
    pause();
  timer_delete(timer);
  signal(SIGRTMIN, SIG_IGN);
}

NOINLINE int descend(int n) {
  int r = n > 1 ? descend(n - 1) + 1 : 1;
  __asm__ volatile("" ::: "memory");
  return r;
}

NOINLINE void deep_loop(void) {
  for (int i = 0; i < 50; ++i)
    if (descend(300) != 300)
      abort();
}

NOINLINE void forker(void) {
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    loop_leaf(1000);
    return; /* through forker and main: begun in the parent */
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || status != 0)
    abort();
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  int all = strcmp(mode, "all") == 0;
  if (all || strcmp(mode, "calls") == 0) {
    loop_leaf(1000);
    recurse(5);
    for (int i = 0; i < 3; ++i)
      fn_pointer(i);
    for (int i = 0; i < 3; ++i)
      if (tail_from(i) != i + 1)
        return 1;
    for (int i = -2; i < 3; ++i)
      sink += (unsigned long)rare(i);
    for (int i = 0; i < 7; ++i) /* the C library's, through the PLT */
      sink += (unsigned long)getpid() & 1;
  }
  if (all || strcmp(mode, "longjmp") == 0)
    jumper();
  if (strcmp(mode, "context") == 0)
    ctx_caller();
  if (strcmp(mode, "fib") == 0 && fib(15) != 610)
    return 1;
  if (strcmp(mode, "jumps") == 0) {
    for (int kind = 0; kind < 3; ++kind)
      jumps_outer(kind);
    fflush(stdout);
    pthread_t t;
    pthread_create(&t, NULL, pexit_thread, NULL);
    pthread_join(t, NULL);
  }
  if (all || strcmp(mode, "cancel") == 0) {
    pthread_t t;
    pthread_barrier_init(&cancel_ready, NULL, 2);
    pthread_create(&t, NULL, cancel_thread, NULL);
    pthread_barrier_wait(&cancel_ready);
    pthread_cancel(t);
    pthread_join(t, NULL);
  }
  if (all || strcmp(mode, "threads") == 0) {
    pthread_t t[4];
    for (int i = 0; i < 4; ++i)
      pthread_create(&t[i], NULL, worker_thread, NULL);
    for (int i = 0; i < 4; ++i)
      pthread_join(t[i], NULL);
  }
  if (strcmp(mode, "signals") == 0)
    run_signals();
  if (strcmp(mode, "deep") == 0)
    deep_loop();
  if (strcmp(mode, "fork") == 0)
    forker();
  printf("fn_work %s done\n", mode);
  if (all || strcmp(mode, "exit") == 0)
    exit_deep1();
  return 0;
}
