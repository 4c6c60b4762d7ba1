// C++ fixture for the function hooks: exceptions unwinding through
// traced frames.  Each of 3 rounds: catcher -> mid (a Guard whose
// destructor calls cleanup_fn while unwinding) -> thrower throws; catcher
// catches, then calls after_catch.  Exact counts: catcher, mid, thrower,
// cleanup_fn, after_catch 3 each; main 1.
//   fn_work_cxx nested: ncatcher -> nmid (a NestedGuard whose destructor,
//     while the exception unwinds, throws from thrower and catches it
//     itself, calling inner_caught) -> thrower throws; ncatcher catches.
//   fn_work_cxx exit: a thread texit_thread -> texit_mid (a Guard) ->
//     texit_deep -> pthread_exit: the Guard's destructor runs (the
//     cleanups run are printed).
#include <cstdio>
#include <cstring>
#include <pthread.h>

#define NOINLINE __attribute__((noinline))

static volatile int sink;

extern "C" NOINLINE void cleanup_fn() { sink = sink + 1; }

struct Guard {
  NOINLINE ~Guard() { cleanup_fn(); }
};

extern "C" NOINLINE void thrower(int round) {
  sink = sink + round;
  if (sink >= 0)
    throw round;
}

extern "C" NOINLINE void mid(int round) {
  Guard g;
  thrower(round);
  sink = sink + 1; // not reached
}

extern "C" NOINLINE void after_catch() { sink = sink + 1; }

extern "C" NOINLINE int catcher(int round) {
  int caught = -1;
  try {
    mid(round);
  } catch (int v) {
    caught = v;
  }
  after_catch();
  return caught;
}

extern "C" NOINLINE void inner_caught() { sink = sink + 1; }

struct NestedGuard {
  NOINLINE ~NestedGuard() {
    try {
      thrower(10);
    } catch (int) {
      inner_caught();
    }
  }
};

extern "C" NOINLINE void nmid(int round) {
  NestedGuard g;
  thrower(round);
  sink = sink + 1; // not reached
}

extern "C" NOINLINE int ncatcher(int round) {
  try {
    nmid(round);
  } catch (int v) {
    return v;
  }
  return -1;
}

static int cleanups;

struct Counted {
  NOINLINE ~Counted() {
    cleanup_fn();
    ++cleanups;
  }
};

extern "C" NOINLINE void texit_deep() {
  sink = sink + 1;
  pthread_exit(nullptr);
}

extern "C" NOINLINE void texit_mid() {
  Counted c;
  texit_deep();
  sink = sink + 1; // not reached
}

extern "C" NOINLINE void *texit_thread(void *) {
  texit_mid();
  return nullptr;
}

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "nested") == 0) {
    std::printf("fn_work_cxx nested %d\n", ncatcher(4));
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "exit") == 0) {
    pthread_t t;
    pthread_create(&t, nullptr, texit_thread, nullptr);
    pthread_join(t, nullptr);
    std::printf("fn_work_cxx cleanups %d\n", cleanups);
    return 0;
  }
  int total = 0;
  for (int i = 0; i < 3; ++i)
    total += catcher(i);
  std::printf("fn_work_cxx caught %d\n", total);
  return 0;
}
