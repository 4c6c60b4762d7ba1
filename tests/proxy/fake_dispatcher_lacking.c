/* The fake dispatcher without the last API function: the proxy has
 * resolved all others before it finds the gap, and must publish none. */
#define FAKE_OMIT_xptiCheckTracepointScopeNotification ~, 1
#include "fake_dispatcher.c"
