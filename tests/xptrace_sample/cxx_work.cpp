// C++ fixture for `xptrace sample`: a template whose helper is inlined
// into it (inline frames, demangled names).  Built -O2 -g.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace shapes {
template <typename T> struct Mixer {
  T state;
  __attribute__((always_inline)) inline void step() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(state));
  }
};

template <typename T> __attribute__((noinline)) T churn(long n) {
  Mixer<T> m{1};
  for (long i = 0; i < n; ++i)
    m.step();
  return m.state;
}
} // namespace shapes

int main(int argc, char **argv) {
  long units = argc > 1 ? std::atol(argv[1]) : 4;
  volatile std::uint64_t r = shapes::churn<std::uint64_t>(units * 20 * 1000 * 1000);
  std::printf("%llu\n", (unsigned long long)(r & 1));
  return 0;
}
