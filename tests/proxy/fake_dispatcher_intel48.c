/* The fake dispatcher with Intel's 48 entry points only: none of
 * xptrace's extensions.  The proxy must accept it. */
#define FAKE_OMIT_xptiRegisterStreamCallback ~, 1
#define FAKE_OMIT_xptiUnregisterStreamCallback ~, 1
#define FAKE_OMIT_xptiLookupStreamName ~, 1
#define FAKE_OMIT_xptiLookupToolName ~, 1
#define FAKE_OMIT_xptiLookupMetadata ~, 1
#define FAKE_OMIT_xptiMetadataCount ~, 1
#define FAKE_OMIT_xptiMetadataAt ~, 1
#include "fake_dispatcher.c"
