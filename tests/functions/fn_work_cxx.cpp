// C++ fixture for the function hooks: exceptions unwinding through
// traced frames.  Each of 3 rounds: catcher -> mid (a Guard whose
// destructor calls cleanup_fn while unwinding) -> thrower throws; catcher
// catches, then calls after_catch.  Exact counts: catcher, mid, thrower,
// cleanup_fn, after_catch 3 each; main 1.
#include <cstdio>

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

int main() {
  int total = 0;
  for (int i = 0; i < 3; ++i)
    total += catcher(i);
  std::printf("fn_work_cxx caught %d\n", total);
  return 0;
}
