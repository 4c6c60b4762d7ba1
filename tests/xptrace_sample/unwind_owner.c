/* Prints which library the program's _Unwind_RaiseException comes from (the
 * one its C++ exceptions would use): a sampler preloaded must not change it. */
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
  void *f = dlsym(RTLD_DEFAULT, "_Unwind_RaiseException");
  Dl_info info;
  puts(f && dladdr(f, &info) && info.dli_fname ? info.dli_fname : "none");
  return 0;
}
