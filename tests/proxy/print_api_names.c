/* Prints the name of every function of src/api.def, one a line (the
 * expected export list of the dispatcher). */
#include <stdio.h>

int main(void) {
#define XPTI_API(ret, name, params, args, off) puts(#name);
#define XPTI_API_VOID(name, params, args) puts(#name);
#include "api.def"
#undef XPTI_API
#undef XPTI_API_VOID
  return 0;
}
