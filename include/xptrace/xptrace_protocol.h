/* xptrace protocol: trace point types of the tool "xptrace" that any
 * producer may send on any stream (C11, usable from C++).
 *
 * Timed slice: "this work ran from begin_ns to end_ns on that track".
 * The type value comes from the framework, by tool name:
 *
 *   uint16_t timed = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME,
 *                                                      XPTRACE_TIMED_SLICE_ID);
 *   xptrace_timed_slice_t s = {begin, end, queue_id, "OpenCL queue 1 (in-order)", NULL};
 *   xptiNotifySubscribers(stream, timed, parent, node_event, instance, &s);
 *
 * event: the work's trace point (a graph node: edges between nodes then
 * link their slices); required, as for every user-defined type (the
 * dispatcher answers INVALIDARG to a NULL event).  name overrides its
 * payload name.  instance: the event's instance number of this work.
 * The notification may come at any time after the work ended, from any
 * thread; the struct and its strings need only live during the call.
 * The trace collector draws it at the given times on a track of its own
 * (one per track_id, named track_name, extra lanes for overlaps). */
#ifndef XPTRACE_PROTOCOL_H
#define XPTRACE_PROTOCOL_H

#include <stdbool.h>
#include <stdint.h>

#include "xpti/xpti_data_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XPTRACE_TOOL_NAME "xptrace"
/* xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID)
 * gives the type value. */
#define XPTRACE_TIMED_SLICE_ID XPTI_TRACE_POINT_BEGIN(0)

/* Flows between slices, also across processes: "this thread's next
 * slice begin starts flow <instance>" (FLOW_OUT) and "this thread's next
 * slice end ends flow <instance>" (FLOW_IN), on any stream of the thread.
 * instance = the flow id: 64 bits, nonzero, the same in the two processes.
 * Ids with bit 63 set promise to be unique across processes and runs
 * (the MPI layer's: a hash of the job, the message's channel and order):
 * `xptrace merge` keeps them, so they join processes merged from any
 * folders; other ids are made unique per merged run by the merge.  event: any trace point of the producer (required for a
 * user-defined type).  Type values, as for timed slices:
 *   xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_FLOW_OUT_ID)
 * The stats collector skips them; the trace writer attaches them to the
 * slice (Perfetto flow_ids / terminating_flow_ids). */
#define XPTRACE_FLOW_OUT_ID XPTI_TRACE_POINT_BEGIN(1)
#define XPTRACE_FLOW_IN_ID XPTI_TRACE_POINT_BEGIN(2)

typedef struct xptrace_timed_slice_t {
  uint64_t begin_ns, end_ns; /* CLOCK_MONOTONIC nanoseconds */
  uint64_t track_id;         /* e.g. one per OpenCL queue; slices of a track may
                                overlap (the collector lanes them) */
  const char *track_name;    /* e.g. "OpenCL queue 1 (in-order)"; copied by the collector */
  const char *name;          /* NULL: the event's payload name */
} xptrace_timed_slice_t;

/* A direct path for high-rate producers (function tracing).  A subscriber
 * may export
 *   xptrace_try_record_t xptraceTryRecordFor(xpti_stream_callback_api_t cb);
 * returning, for its stream callback cb, a function that handles the
 * notification (stream, type, NULL parent, event, instance 0, NULL user
 * data) exactly as cb would and returns true, or changes nothing and
 * returns false (the producer then notifies as usual).  It must use the
 * general-purpose registers only (x86-64: no vector or x87 register).
 * A producer may call it instead of xptiNotifySubscribers only while
 * tracing is enabled and cb is the stream's one listener.  xptrace's
 * dispatcher exports the two words xptiNotifySubscribers reads first:
 *   const void *xptraceStreamSoleListener(uint8_t stream);
 *     an _Atomic(xpti_stream_callback_api_t): the stream's callback when
 *     it has exactly one (stream-wide), else NULL;
 *   const void *xptraceTraceEnabledWord(void);
 *     an _Atomic bool: xptiTraceEnabled(). */
typedef bool (*xptrace_try_record_t)(uint8_t stream, uint16_t type,
                                     const xpti_trace_event_data_t *event);

/* One time stamp per notification, whatever the number of collectors:
 * xptrace's dispatcher counts each thread's notifications (seq), and
 *   xptrace_stamp_t *xptraceThreadStamp(void);
 * gives the calling thread's record.  A collector that stamps an event
 * may publish its stamp (stamped = seq, stamp, clock); a collector called
 * later for the same notification finds stamped == seq and the same clock
 * and may use it instead of reading the clock again.  Per thread: plain
 * loads and stores. */
enum { XPTRACE_STAMP_NONE = 0, XPTRACE_STAMP_TSC = 1, XPTRACE_STAMP_MONOTONIC_NS = 2 };
typedef struct xptrace_stamp_t {
  uint64_t seq;     /* this thread's notifications so far (the dispatcher's) */
  uint64_t stamped; /* the seq that stamp belongs to */
  uint64_t stamp;   /* TSC ticks or CLOCK_MONOTONIC ns, as clock says */
  uint32_t clock;   /* XPTRACE_STAMP_* */
  uint32_t reserved;
} xptrace_stamp_t;

/* Exported by xptrace's dispatcher (libxptifw.so) only: see above.  A
 * program or library meant for other dispatchers too looks them up
 * (dlsym) instead of linking them. */
const void *xptraceStreamSoleListener(uint8_t stream);
const void *xptraceTraceEnabledWord(void);
xptrace_stamp_t *xptraceThreadStamp(void);

#ifdef __cplusplus
}
#endif
#endif /* XPTRACE_PROTOCOL_H */
