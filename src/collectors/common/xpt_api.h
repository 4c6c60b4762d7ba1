/* xptrace — what the collectors need beyond Intel's 48 entry points.
 *
 * A collector calls only the functions every XPTI dispatcher exports
 * (tests/proxy/intel_api_names.txt).  xptrace's extensions (stream
 * callbacks, stream and tool names, metadata iteration, the per-thread
 * stamp) are looked up once with dlsym; where a dispatcher lacks one, the
 * collector goes on with what Intel's API gives and says so in one line
 * (docs/interop.md).  Linked statically and hidden into each collector. */
#ifndef XPT_API_H
#define XPT_API_H

#include <stdbool.h>
#include <stdint.h>

#include "xpti/xpti_trace_framework.h"
#include "xptrace/xptrace_protocol.h"

#define XPT_API_HIDDEN __attribute__((visibility("hidden")))

/* Calls cb(stream, type, ...) for every notification of `stream` (named
 * `name`, remembered for xpt_api_stream_name).  Without
 * xptiRegisterStreamCallback: one callback per type, for the predefined
 * types, xptrace's own user-defined ones and those of tools registered
 * before xptrace's (not those of later tools); said once per process.
 * Returns the registration's result (DUPLICATE/UNDELETE when already
 * covered). */
XPT_API_HIDDEN xpti_result_t xpt_api_subscribe(uint8_t stream, const char *name,
                                               xpti_stream_callback_api_t cb);

/* Remembers a stream's name (subscribe does it too). */
XPT_API_HIDDEN void xpt_api_note_stream(uint8_t stream, const char *name);

/* The name of a stream: the dispatcher's, else one remembered; NULL. */
XPT_API_HIDDEN const char *xpt_api_stream_name(uint8_t stream);

/* xptiRegisterUserDefinedTracePoint, remembering the tool's name (which
 * must outlive the process: a literal). */
XPT_API_HIDDEN uint16_t xpt_api_user_type(const char *tool, uint8_t id);

/* The name of a tool: the dispatcher's, else one registered through
 * xpt_api_user_type; NULL. */
XPT_API_HIDDEN const char *xpt_api_tool_name(uint8_t tool);

/* Metadata of an event, in the dispatcher's order: xptrace's
 * xptiMetadataCount/At, else Intel's map from xptiQueryMetadata. */
XPT_API_HIDDEN uint32_t xpt_api_metadata_count(const xpti_trace_event_data_t *event);
XPT_API_HIDDEN xpti_result_t xpt_api_metadata_at(const xpti_trace_event_data_t *event, uint32_t index,
                                                 uint32_t *key_id, int32_t *value_id);

/* The dispatcher's per-thread stamp record, else one of this collector's
 * own whose stamp never matches (every notification reads the clock). */
XPT_API_HIDDEN xptrace_stamp_t *xpt_api_thread_stamp(void);

#endif /* XPT_API_H */
