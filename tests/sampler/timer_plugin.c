/* A plugin whose one function is hot (timer_shapes plugins): built twice,
 * as libtimer_plugin_a.so (plugin_a_spin) and libtimer_plugin_b.so
 * (plugin_b_spin), so a library loaded where another was unloaded is
 * told apart from it. */
#include <stdint.h>
#include <time.h>

#define CAT3(a, b, c) a##b##c
#define NAME3(a, b, c) CAT3(a, b, c)
#define NAME(letter) NAME3(plugin_, letter, _spin)

__attribute__((visibility("default"), noinline)) void NAME(PLUGIN_LETTER)(double ms) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  double end = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + ms * 1e-3;
  volatile uint64_t x = 1;
  for (;;) {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    if ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 >= end)
      break;
    for (int i = 0; i < 50000; ++i)
      x = x * 6364136223846793005ull + 1;
  }
}
