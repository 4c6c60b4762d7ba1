/* Recursion of known counts for check_recursion.py: fib(N) makes
 * 2 fib(N+1) - 1 calls (21891 for N = 20), nested up to N deep; a(5)
 * calls b calls a ... down to b(0): three calls each, mutually nested;
 * halve once, inlined. */
#include <stdlib.h>

__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) int b(int n);
__attribute__((noinline)) int a(int n) { return n <= 0 ? 0 : 1 + b(n - 1); }
__attribute__((noinline)) int b(int n) { return n <= 0 ? 0 : 1 + a(n - 1); }

/* Inlined into main, hooks and all: its hooks are called from main's
 * frame (the same stack address and call site as main's own). */
static inline __attribute__((always_inline)) int halve(int x) { return x / 2; }

int main(int argc, char **argv) {
  volatile int n = argc > 1 ? atoi(argv[1]) : 20; /* not folded at compile time */
  return fib(halve(2 * n)) + a(5) < 0; /* used: not optimized away */
}
