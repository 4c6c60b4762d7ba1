/* The probes of peer_lttng_tp.h, built into the driver program. */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "peer_lttng_tp.h"
