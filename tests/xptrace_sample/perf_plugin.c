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

/* Local: no symbol left once the plugin is stripped (module+0xoffset). */
static __attribute__((noinline)) void hidden_spin(long units) {
  uint64_t x = plugin_sink;
  for (long i = 0; i < units * 20 * 1000 * 1000; ++i) {
    x = x * 2862933555777941757ull + 3037000493ull;
    __asm__ volatile("" : "+r"(x));
  }
  plugin_sink = x;
}

__attribute__((visibility("default"), noinline)) void plugin_hidden(long units) {
  hidden_spin(units);
  __asm__ volatile(""); /* not a tail call */
}
