/* A statically linked program: the timer method cannot preload into it,
 * and says so (test_sample_timer.py static). */
#include <stdio.h>

int main(void) {
  puts("static ok");
  return 0;
}
