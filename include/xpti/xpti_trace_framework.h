/* xptrace — the XPTI API (C11, usable from C++).
 *
 * Every function here is thread-safe.  An application links the proxy
 * libxpti.a, whose stubs forward to the dispatcher named by
 * XPTI_FRAMEWORK_DISPATCHER; with tracing off each stub returns the
 * value given under "Off:" at the cost of one load and branch.  Linking
 * libxptifw.so directly gives the same API without the proxy.
 *
 * Hot paths (xptiNotifySubscribers, xptiCheckTraceEnabled,
 * xptiTraceEnabled, xptiFindEvent, xptiLookupString, xptiMakeEvent on an
 * existing trace point) take no lock. */
/*
 * Async-signal-safety.  Once the dispatcher is loaded (with the proxy:
 * after any earlier API call), these may be called from a signal handler,
 * even one that interrupted malloc or another xpti call: they take no
 * lock, allocate nothing and make no system call:
 *   xptiTraceEnabled, xptiCheckTraceEnabled,
 *   xptiNotifySubscribers with an event made by xptiMakeEvent (or a NULL
 *     event where the trace type allows one) -- the callbacks it runs
 *     must be async-signal-safe too,
 *   xptiFindEvent, xptiQueryPayload, xptiQueryPayloadByUID,
 *   xptiLookupString, xptiLookupObject, xptiLookupStreamName,
 *   xptiLookupToolName, xptiMetadataCount, xptiMetadataAt,
 *   xptiGetUniqueId, xptiGetUniversalId, xptiSetUniversalId,
 *   xptiGetDefaultStreamID.
 * Nothing else is: registering anything, xptiMakeEvent (its first call on
 * a thread allocates a cache), xptiLookupMetadata (interns its key),
 * xptiQueryMetadata and the tracepoint functions (they allocate once per
 * trace point).
 *
 * Lifetime.  The event, parent, payload and user_data given to a callback
 * are the caller's: a subscriber may read them until its callback
 * returns, and must copy what it needs (ids, values, strings) rather than
 * keep the pointers.  Events made by xptiMakeEvent and strings from the
 * string table live as long as the process (or until xptiReset).
 *
 * Re-entry and fork.  A subscriber's constructor, run while the
 * dispatcher loads XPTI_SUBSCRIBERS, may call any function: those that
 * need the subscribers (xptiFrameworkInitialize, xptiFrameworkFinalize,
 * xptiInitialize) return FALSE and xptiFinalize does nothing on that
 * thread; registration works.  fork() is safe while other threads call
 * any function: the child finds every framework lock free. */
#ifndef XPTI_TRACE_FRAMEWORK_H
#define XPTI_TRACE_FRAMEWORK_H

#include "xpti_data_types.h"

/* Types of Intel's C++-typed entry points.  In C they are opaque (or the
 * integer underneath); in C++ they are Intel's types, completed by
 * xpti_trace_framework.hpp, so Intel-style code compiles unchanged. */
#ifdef __cplusplus
#include <unordered_map>
namespace xpti {
enum class trace_point_type_t : uint16_t;
enum class trace_event_type_t : uint16_t;
/* Intel's metadata map: string id -> object id (libstdc++ layout). */
using metadata_t = std::unordered_map<int32_t, int32_t>;
} // namespace xpti
typedef xpti::metadata_t xpti_metadata_map_t;
typedef xpti::trace_point_type_t xpti_trace_type_t;
typedef xpti::trace_event_type_t xpti_event_type_t;
#else
typedef struct xpti_metadata_map xpti_metadata_map_t;
typedef uint16_t xpti_trace_type_t; /* an xpti_trace_point_type_t value */
typedef uint16_t xpti_event_type_t; /* an xpti_trace_event_type_t value */
#endif
/* Intel's interface objects (virtual methods in C++, see the .hpp). */
typedef struct xpti_tracepoint_t xpti_tracepoint_t;
typedef struct xpti_trace_event_t xpti_trace_event_t;
/* Intel names this one xpti_payload_t, which is the plain payload here. */
typedef struct xpti_payload_iface_t xpti_payload_iface_t;

#ifdef __cplusplus
extern "C" {
#endif

/* ---- framework life cycle ------------------------------------------- */

/* Initialise the dispatcher (load subscribers) if not done yet.  The
 * dispatcher also does this by itself on first use.
 * Returns SUCCESS.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiFrameworkInitialize(void);
/* Finish every stream still initialised (subscribers' xptiTraceFinish).
 * Returns SUCCESS.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiFrameworkFinalize(void);

/* Announce a stream to every subscriber: calls each one's xptiTraceInit
 * in XPTI_SUBSCRIBERS order.  Returns SUCCESS, INVALIDARG for a NULL or
 * empty stream name, FALSE when tracing is off.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiInitialize(const char *stream, uint32_t major,
                                             uint32_t minor, const char *version);
/* Wind a stream down: calls each subscriber's xptiTraceFinish.  NULL is
 * ignored.  Streams not finalised by exit are finalised then. */
XPTI_EXPORT_API void xptiFinalize(const char *stream);

/* True when a dispatcher is loaded, tracing is not disabled and at
 * least one valid subscriber is loaded (or tracing was forced on).
 * Off: false. */
XPTI_EXPORT_API bool xptiTraceEnabled(void);
/* True when tracing is enabled and a callback is registered for
 * (stream, trace_type); trace_type 0 asks for any callback on stream.
 * Off: false. */
XPTI_EXPORT_API bool xptiCheckTraceEnabled(uint8_t stream, uint16_t trace_type);
/* Override the environment: force tracing on or off (tests, tools). */
XPTI_EXPORT_API void xptiForceSetTraceEnabled(bool enabled);
/* Proxy: load the dispatcher now if the first attempt did not (the
 * environment is read again).  Dispatcher: same as xptiTraceEnabled. */
XPTI_EXPORT_API bool xptiTraceTryToEnable(void);

/* ---- streams ---------------------------------------------------------- */

/* Id of the stream with this name, registering it on first use.  Up to
 * 255 streams.  Returns XPTI_INVALID_STREAM_ID for NULL/empty names or a
 * full table.  Off: XPTI_INVALID_STREAM_ID. */
XPTI_EXPORT_API uint8_t xptiRegisterStream(const char *name);
/* Drop every callback of a stream and call each subscriber's
 * xptiTraceFinish for it (as Intel's does).  Returns SUCCESS, NOTFOUND
 * for an unknown name or a stream without active callbacks, INVALIDARG
 * for NULL.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiUnregisterStream(const char *name);
/* Name of a registered stream, NULL if unknown.  Off: NULL. */
XPTI_EXPORT_API const char *xptiLookupStreamName(uint8_t stream);
/* Stream used when a producer has none of its own.  Off: invalid id /
 * FAIL.  Set returns INVALIDARG for an unregistered id. */
XPTI_EXPORT_API uint8_t xptiGetDefaultStreamID(void);
XPTI_EXPORT_API xpti_result_t xptiSetDefaultStreamID(uint8_t stream);

/* ---- callbacks and notification ------------------------------------- */

/* Register cb for (stream, trace_type); callbacks run in registration
 * order.  Returns SUCCESS, DUPLICATE if already registered, UNDELETE if
 * it had been unregistered (it is active again), INVALIDARG for a NULL
 * cb, trace type 0 or an unregistered stream.  May be called from
 * xptiTraceInit and from inside callbacks.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiRegisterCallback(uint8_t stream, uint16_t trace_type,
                                                   xpti_tracepoint_callback_api_t cb);
/* Returns SUCCESS, NOTFOUND if cb is not registered for the pair,
 * DUPLICATE if it is already unregistered, INVALIDARG for NULL.  A
 * notification already in flight may still call cb once.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiUnregisterCallback(uint8_t stream, uint16_t trace_type,
                                                     xpti_tracepoint_callback_api_t cb);
/* Register cb for every trace type of a stream, present and future
 * (user-defined ones included); it also receives the stream id.  Called
 * after the per-type callbacks of each notification.  Same results as
 * xptiRegisterCallback.  An xptrace extension.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiRegisterStreamCallback(uint8_t stream,
                                                         xpti_stream_callback_api_t cb);
XPTI_EXPORT_API xpti_result_t xptiUnregisterStreamCallback(uint8_t stream,
                                                           xpti_stream_callback_api_t cb);
/* Call every callback registered for (stream, trace_type).  Returns
 * SUCCESS, FALSE when tracing is off, INVALIDARG for a NULL event
 * (allowed, with user data, for function*, function_with_args*,
 * mem_alloc*, mem_release* and diagnostics).  Lock-free.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiNotifySubscribers(uint8_t stream, uint16_t trace_type,
                                                    xpti_trace_event_data_t *parent,
                                                    xpti_trace_event_data_t *event,
                                                    uint64_t instance, const void *user_data);

/* ---- strings and objects -------------------------------------------- */

/* Intern a string (copied); the same content always gets the same id.
 * *table_string (if table_string is not NULL) receives the table's copy.
 * Returns XPTI_INVALID_STRING_ID for NULL.  Off: invalid id. */
XPTI_EXPORT_API uint32_t xptiRegisterString(const char *string, char **table_string);
/* The string for an id, NULL if unknown.  Lock-free.  Off: NULL. */
XPTI_EXPORT_API const char *xptiLookupString(uint32_t id);
/* Store a copy of size bytes (a metadata value; type from
 * xpti_metadata_type_t).  Equal content and type give the same id.
 * Returns XPTI_INVALID_OBJECT_ID for NULL data.  Off: invalid id. */
XPTI_EXPORT_API int32_t xptiRegisterObject(const char *data, size_t size, uint8_t type);
/* The object for an id; {0, NULL, 0} if unknown.  Off: the same. */
XPTI_EXPORT_API xpti_object_data_t xptiLookupObject(int32_t id);

/* ---- payloads and events -------------------------------------------- */

/* Register a payload and return its universal ID (stored in
 * payload->internal and payload->uid, flags gain REGISTERED).  The key is
 * the content of (source file, name, line, column), or the code pointer
 * when neither name nor file is given.  Returns XPTI_INVALID_UID for
 * NULL or an empty payload.  Off: XPTI_INVALID_UID. */
XPTI_EXPORT_API uint64_t xptiRegisterPayload(xpti_payload_t *payload);
/* The event of a trace point: created on first use, the same event (and
 * universal ID) for the same key afterwards.  Every call counts a visit:
 * *instance_no (if not NULL) receives this visit's number, 1-based.
 * name, if not NULL, names the payload when it has none.  Returns NULL
 * for a NULL or empty payload.  Off: NULL. */
XPTI_EXPORT_API xpti_trace_event_data_t *xptiMakeEvent(const char *name, xpti_payload_t *payload,
                                                       uint16_t event_type,
                                                       xpti_trace_activity_type_t activity,
                                                       uint64_t *instance_no);
/* The event with this universal ID, NULL if unknown.  Lock-free. */
XPTI_EXPORT_API const xpti_trace_event_data_t *xptiFindEvent(uint64_t universal_id);
/* The framework's copy of an event's payload, NULL for NULL/unknown. */
XPTI_EXPORT_API const xpti_payload_t *xptiQueryPayload(xpti_trace_event_data_t *event);
XPTI_EXPORT_API const xpti_payload_t *xptiQueryPayloadByUID(uint64_t universal_id);
/* Events live as long as the process (their IDs are stable); releasing
 * one only resets its instance count.  NULL is ignored. */
XPTI_EXPORT_API void xptiReleaseEvent(xpti_trace_event_data_t *event);

/* ---- metadata ----------------------------------------------------- */

/* Attach key -> object to an event.  Returns SUCCESS, DUPLICATE if the
 * key is already present, INVALIDARG for NULL event/key or an unknown
 * object id.  Off: FAIL. */
XPTI_EXPORT_API xpti_result_t xptiAddMetadata(xpti_trace_event_data_t *event, const char *key,
                                              int32_t value_object_id);
/* Object id stored under key.  Returns SUCCESS, NOTFOUND, INVALIDARG.
 * (Named xptiQueryMetadata before Intel's name was needed below.) */
XPTI_EXPORT_API xpti_result_t xptiLookupMetadata(const xpti_trace_event_data_t *event,
                                                 const char *key, int32_t *value_object_id);
/* Intel's form: the event's metadata as a std::unordered_map<int32_t,
 * int32_t> (libstdc++), kept equal to the C view (xptiAddMetadata adds
 * to both); NULL for NULL or an unknown event.  Read it only while no
 * thread adds metadata to that event.  Off: NULL. */
XPTI_EXPORT_API xpti_metadata_map_t *xptiQueryMetadata(xpti_trace_event_data_t *event);
/* Iterate metadata in insertion order: index 0 .. count-1.  MetadataAt
 * returns SUCCESS, NOTFOUND past the end, INVALIDARG for NULL. */
XPTI_EXPORT_API uint32_t xptiMetadataCount(const xpti_trace_event_data_t *event);
XPTI_EXPORT_API xpti_result_t xptiMetadataAt(const xpti_trace_event_data_t *event, uint32_t index,
                                             uint32_t *key_string_id, int32_t *value_object_id);

/* ---- user-defined types --------------------------------------------- */

/* (tool_id << 8) | 0x80 | (n & 0x7f) for tool_name, tool ids 1..255
 * given in order of first registration.  The begin/end bit of n is kept.
 * Returns 0 for a NULL name, n > 127 or more than 255 tools.  Off: 0. */
XPTI_EXPORT_API uint16_t xptiRegisterUserDefinedTracePoint(const char *tool_name,
                                                           uint8_t user_defined_tp);
XPTI_EXPORT_API uint16_t xptiRegisterUserDefinedEventType(const char *tool_name,
                                                          uint8_t user_defined_event);
/* Name of a tool id (XPTI_TOOL_ID of a user-defined type), NULL if none. */
XPTI_EXPORT_API const char *xptiLookupToolName(uint8_t tool_id);

/* ---- identifiers and thread-local state ----------------------------- */

/* A process-unique, never-zero 64-bit number (a correlation id). */
XPTI_EXPORT_API uint64_t xptiGetUniqueId(void);
/* Thread-local universal ID carried between layers of one thread. */
XPTI_EXPORT_API uint64_t xptiGetUniversalId(void);
XPTI_EXPORT_API void xptiSetUniversalId(uint64_t universal_id);
/* Thread-local (key, value) stash, one deep.  Stash replaces a tuple
 * already stashed (as Intel's does), returns INVALIDARG for a NULL key;
 * Get returns NOTFOUND when nothing is stashed.  The key is copied. */
XPTI_EXPORT_API xpti_result_t xptiStashTuple(const char *key, uint64_t value);
XPTI_EXPORT_API xpti_result_t xptiGetStashedTuple(char **key, uint64_t *value);
XPTI_EXPORT_API void xptiUnstashTuple(void);

/* ---- Intel's defaults and tracepoint objects ------------------------- */

/* Stream "xpti.framework" (id 1) is registered at start and is the
 * default stream; id 0 is never a stream.  It is initialised (version
 * 1.0) just before the first stream xptiInitialize announces, and
 * finished just after the first xptiFinalize. */
#define XPTI_DEFAULT_STREAM_NAME "xpti.framework"

/* Defaults for Intel's scoped helpers: event type algorithm, trace type
 * function_begin.  Set returns INVALIDARG for 0.  Off: algorithm /
 * function_begin, FAIL. */
XPTI_EXPORT_API xpti_event_type_t xptiGetDefaultEventType(void);
XPTI_EXPORT_API xpti_result_t xptiSetDefaultEventType(xpti_event_type_t event_type);
XPTI_EXPORT_API xpti_trace_type_t xptiGetDefaultTraceType(void);
XPTI_EXPORT_API xpti_result_t xptiSetDefaultTraceType(xpti_trace_type_t trace_type);

/* The tracepoint object of (function, file, line, column): Intel's
 * xpti_tracepoint_t interface.  One object per trace point, living as
 * long as its event; each call counts a visit, like xptiMakeEvent, and
 * the object's instance() gives this thread's latest visit.  Off: NULL. */
XPTI_EXPORT_API xpti_tracepoint_t *xptiCreateTracepoint(const char *func_name,
                                                        const char *file_name, uint32_t line_no,
                                                        uint32_t column_no);
/* Objects live with their trace point: SUCCESS, INVALIDARG for NULL. */
XPTI_EXPORT_API xpti_result_t xptiDeleteTracepoint(xpti_tracepoint_t *tp);
/* Intel's interface views of a universal ID's payload and event; NULL if
 * unknown.  Off: NULL. */
XPTI_EXPORT_API const xpti_payload_iface_t *xptiLookupPayload(uint64_t universal_id);
XPTI_EXPORT_API const xpti_trace_event_t *xptiLookupEvent(uint64_t universal_id);
/* Thread-local current tracepoint scope.  Set also sets the universal
 * ID; INVALIDARG for NULL.  Register = Create + Set.  Off: NULL / FAIL. */
XPTI_EXPORT_API const xpti_tracepoint_t *xptiRegisterTracepointScope(const char *func_name,
                                                                     const char *file_name,
                                                                     uint32_t line_no,
                                                                     uint32_t column_no);
XPTI_EXPORT_API const xpti_tracepoint_t *xptiGetTracepointScopeData(void);
XPTI_EXPORT_API xpti_result_t xptiSetTracepointScopeData(xpti_tracepoint_t *tp);
XPTI_EXPORT_API void xptiUnsetTracepointScopeData(void);
/* Whether tracepoint scopes notify their begin and end (process-wide,
 * on by default).  Off: false. */
XPTI_EXPORT_API void xptiEnableTracepointScopeNotification(bool enable);
XPTI_EXPORT_API bool xptiCheckTracepointScopeNotification(void);

/* Dispatcher only, for tests: forget all streams, callbacks, strings,
 * events and user-defined types (memory from before stays valid). */
XPTI_EXPORT_API void xptiReset(void);

/* ---- scoped notification (C) ------------------------------------------ */

typedef struct xpti_scoped_notify_t {
  xpti_trace_event_data_t *parent;
  xpti_trace_event_data_t *event;
  uint64_t instance;
  const void *user_data;
  uint16_t end_type;
  uint8_t stream;
  bool active;
} xpti_scoped_notify_t;

static inline xpti_scoped_notify_t xpti_scoped_notify_begin(uint8_t stream, uint16_t begin_type,
                                                            xpti_trace_event_data_t *parent,
                                                            xpti_trace_event_data_t *event,
                                                            uint64_t instance,
                                                            const void *user_data) {
  xpti_scoped_notify_t s;
  s.parent = parent;
  s.event = event;
  s.instance = instance;
  s.user_data = user_data;
  s.end_type = (uint16_t)(begin_type | 1);
  s.stream = stream;
  s.active = xptiCheckTraceEnabled(stream, 0) &&
             xptiNotifySubscribers(stream, begin_type, parent, event, instance, user_data) ==
                 XPTI_RESULT_SUCCESS;
  return s;
}

static inline void xpti_scoped_notify_end(xpti_scoped_notify_t *s) {
  if (s->active)
    (void)xptiNotifySubscribers(s->stream, s->end_type, s->parent, s->event, s->instance,
                                s->user_data);
}

#define XPTI_CONCAT_INNER_(a, b) a##b
#define XPTI_CONCAT_(a, b) XPTI_CONCAT_INNER_(a, b)
/* Notify begin_type now and begin_type|1 when the enclosing scope ends.
 * The end is sent exactly when the begin was delivered. */
#define XPTI_SCOPED_NOTIFY(stream_id, begin_type, parent, event, instance, user_data)        \
  __attribute__((cleanup(xpti_scoped_notify_end), unused)) xpti_scoped_notify_t XPTI_CONCAT_( \
      xpti_scope_, __LINE__) =                                                                \
      xpti_scoped_notify_begin((stream_id), (uint16_t)(begin_type), (parent), (event),        \
                               (instance), (user_data))

#ifdef __cplusplus
}
#endif
#endif /* XPTI_TRACE_FRAMEWORK_H */
