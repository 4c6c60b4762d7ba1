/* A plugin whose function is hot, loaded and unloaded by perf_work. */
#include <stdint.h>

static volatile uint64_t plugin_sink;

__attribute__((visibility("default"), noinline)) void plugin_spin(long units) {
  uint64_t x = plugin_sink;
  for (long i = 0; i < units * 20 * 1000 * 1000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  plugin_sink = x;
}
