/* LTTng-UST tracepoint provider for the peers benchmark: a begin/end
 * pair carrying the same two integers an xptrace notification carries. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER xptrace_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./peer_lttng_tp.h"

#if !defined(PEER_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define PEER_LTTNG_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(xptrace_bench, begin,
                           LTTNG_UST_TP_ARGS(uint64_t, id, uint64_t, instance),
                           LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, id, id)
                                                   lttng_ust_field_integer(uint64_t, instance,
                                                                           instance)))

LTTNG_UST_TRACEPOINT_EVENT(xptrace_bench, end,
                           LTTNG_UST_TP_ARGS(uint64_t, id, uint64_t, instance),
                           LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, id, id)
                                                   lttng_ust_field_integer(uint64_t, instance,
                                                                           instance)))

#endif /* PEER_LTTNG_TP_H */

#include <lttng/tracepoint-event.h>
