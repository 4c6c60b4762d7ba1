/* xptrace — XPTI public data types (C11, usable from C++).
 *
 * Enum values, struct layouts and field names follow the XPTI
 * specification and the reference implementation, so that code built
 * against the reference headers reads the same fields.  Structures that
 * cross the library boundary only ever grow at the end. */
#ifndef XPTI_DATA_TYPES_H
#define XPTI_DATA_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Default visibility for the API and for subscriber entry points.  The
 * proxy is compiled with XPTI_PROXY_BUILD so that its stubs stay hidden
 * inside whatever shared object links libxpti.a. */
#if defined(XPTI_PROXY_BUILD)
#define XPTI_EXPORT_API __attribute__((visibility("hidden")))
#else
#define XPTI_EXPORT_API __attribute__((visibility("default")))
#endif
#define XPTI_CALLBACK_API __attribute__((visibility("default")))

/* Version of the API this header describes. */
#define XPTI_VERSION_MAJOR 1
#define XPTI_VERSION_MINOR 0
#define XPTI_VERSION_STRING "1.0.0"

/* ---- result codes ---------------------------------------------------- */
typedef enum xpti_result_t {
  XPTI_RESULT_SUCCESS = 0,
  XPTI_RESULT_FALSE = 1,
  XPTI_RESULT_FAIL = (int32_t)0x80004001,
  XPTI_RESULT_NOTIMPL = (int32_t)0x80004002,
  XPTI_RESULT_DUPLICATE = (int32_t)0x80004003,
  XPTI_RESULT_NOTFOUND = (int32_t)0x80004004,
  XPTI_RESULT_UNDELETE = (int32_t)0x80004005,
  XPTI_RESULT_INVALIDARG = (int32_t)0x80004006
} xpti_result_t;

/* ---- invalid identifiers ------------------------------------------------ */
#define XPTI_INVALID_STREAM_ID ((uint8_t)0xff)
#define XPTI_INVALID_STRING_ID ((uint32_t)0xffffffffu)
#define XPTI_INVALID_OBJECT_ID ((int32_t)-1)
#define XPTI_INVALID_UID ((uint64_t)0)
#define XPTI_INVALID_LINE ((uint32_t)0xffffffffu)
#define XPTI_INVALID_TRACE_TYPE ((uint16_t)0)

/* ---- trace point types ---------------------------------------------- */
#define XPTI_TRACE_POINT_BEGIN(n) ((uint16_t)((n) << 1))
#define XPTI_TRACE_POINT_END(n) ((uint16_t)(((n) << 1) | 1))
#define XPTI_EVENT(n) ((uint16_t)(n))
/* User-defined values: (tool_id << 8) | 0x80 | n. */
#define XPTI_TOOL_ID(v) ((uint8_t)(((v) >> 8) & 0xff))
#define XPTI_EXTRACT_USER_DEFINED_ID(v) ((uint8_t)((v) & 0x7f))
#define XPTI_PACK_TOOL_ID(tool) ((uint16_t)((tool) << 8))
#define XPTI_USER_DEFINED(v) ((uint16_t)(0x80 | (v)))
/* True for a trace point type that opens a scope (even, non-zero). */
#define XPTI_TRACE_IS_BEGIN(t) ((((t) & 1) == 0) && ((t) != 0))

typedef enum xpti_trace_point_type_t {
  XPTI_TRACE_UNKNOWN_TYPE = 0,
  XPTI_TRACE_GRAPH_CREATE = XPTI_TRACE_POINT_BEGIN(1),
  XPTI_TRACE_NODE_CREATE = XPTI_TRACE_POINT_BEGIN(2),
  XPTI_TRACE_EDGE_CREATE = XPTI_TRACE_POINT_BEGIN(3),
  XPTI_TRACE_REGION_BEGIN = XPTI_TRACE_POINT_BEGIN(4),
  XPTI_TRACE_REGION_END = XPTI_TRACE_POINT_END(4),
  XPTI_TRACE_TASK_BEGIN = XPTI_TRACE_POINT_BEGIN(5),
  XPTI_TRACE_TASK_END = XPTI_TRACE_POINT_END(5),
  XPTI_TRACE_BARRIER_BEGIN = XPTI_TRACE_POINT_BEGIN(6),
  XPTI_TRACE_BARRIER_END = XPTI_TRACE_POINT_END(6),
  XPTI_TRACE_LOCK_BEGIN = XPTI_TRACE_POINT_BEGIN(7),
  XPTI_TRACE_LOCK_END = XPTI_TRACE_POINT_END(7),
  XPTI_TRACE_SIGNAL = XPTI_TRACE_POINT_BEGIN(8),
  XPTI_TRACE_TRANSFER_BEGIN = XPTI_TRACE_POINT_BEGIN(9),
  XPTI_TRACE_TRANSFER_END = XPTI_TRACE_POINT_END(9),
  XPTI_TRACE_THREAD_BEGIN = XPTI_TRACE_POINT_BEGIN(10),
  XPTI_TRACE_THREAD_END = XPTI_TRACE_POINT_END(10),
  XPTI_TRACE_WAIT_BEGIN = XPTI_TRACE_POINT_BEGIN(11),
  XPTI_TRACE_WAIT_END = XPTI_TRACE_POINT_END(11),
  XPTI_TRACE_FUNCTION_BEGIN = XPTI_TRACE_POINT_BEGIN(12),
  XPTI_TRACE_FUNCTION_END = XPTI_TRACE_POINT_END(12),
  XPTI_TRACE_METADATA = XPTI_TRACE_POINT_BEGIN(13),
  XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN = XPTI_TRACE_POINT_BEGIN(14),
  XPTI_TRACE_FUNCTION_WITH_ARGS_END = XPTI_TRACE_POINT_END(14),
  XPTI_TRACE_MEM_ALLOC_BEGIN = XPTI_TRACE_POINT_BEGIN(16),
  XPTI_TRACE_MEM_ALLOC_END = XPTI_TRACE_POINT_END(16),
  XPTI_TRACE_MEM_RELEASE_BEGIN = XPTI_TRACE_POINT_BEGIN(17),
  XPTI_TRACE_MEM_RELEASE_END = XPTI_TRACE_POINT_END(17),
  XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT = XPTI_TRACE_POINT_BEGIN(18),
  XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT = XPTI_TRACE_POINT_END(18),
  XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE = XPTI_TRACE_POINT_BEGIN(19),
  XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE = XPTI_TRACE_POINT_END(19),
  XPTI_TRACE_OFFLOAD_ALLOC_ACCESSOR = XPTI_TRACE_POINT_BEGIN(20),
  XPTI_TRACE_QUEUE_CREATE = XPTI_TRACE_POINT_BEGIN(21),
  XPTI_TRACE_QUEUE_DESTROY = XPTI_TRACE_POINT_END(21),
  XPTI_TRACE_DIAGNOSTICS = XPTI_TRACE_POINT_BEGIN(63),
  XPTI_TRACE_USER_DEFINED = 1 << 7
} xpti_trace_point_type_t;

/* ---- event types ------------------------------------------------------ */
typedef enum xpti_trace_event_type_t {
  XPTI_EVENT_UNKNOWN = 0,
  XPTI_EVENT_GRAPH = XPTI_EVENT(1),
  XPTI_EVENT_ALGORITHM = XPTI_EVENT(2),
  XPTI_EVENT_BARRIER = XPTI_EVENT(3),
  XPTI_EVENT_SCHEDULER = XPTI_EVENT(4),
  XPTI_EVENT_ASYNC = XPTI_EVENT(5),
  XPTI_EVENT_LOCK = XPTI_EVENT(6),
  XPTI_EVENT_OFFLOAD_READ = XPTI_EVENT(7),
  XPTI_EVENT_OFFLOAD_WRITE = XPTI_EVENT(8),
  XPTI_EVENT_OFFLOAD_MEMORY_OBJECT = XPTI_EVENT(9),
  XPTI_EVENT_OFFLOAD_ACCESSOR = XPTI_EVENT(10),
  XPTI_EVENT_USER_DEFINED = 1 << 7
} xpti_trace_event_type_t;

/* ---- activity types -------------------------------------------------- */
typedef enum xpti_trace_activity_type_t {
  XPTI_ACTIVITY_UNKNOWN = 0,
  XPTI_ACTIVITY_ACTIVE = 1,
  XPTI_ACTIVITY_OVERHEAD = 1 << 1,
  XPTI_ACTIVITY_BACKGROUND = 1 << 2,
  XPTI_ACTIVITY_SLEEP = 1 << 3
} xpti_trace_activity_type_t;

/* ---- payload flags ------------------------------------------------------- */
enum {
  XPTI_PAYLOAD_NAME_AVAILABLE = 1,
  XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE = 1 << 1,
  XPTI_PAYLOAD_CODE_PTR_AVAILABLE = 1 << 2,
  XPTI_PAYLOAD_LINE_INFO_AVAILABLE = 1 << 3,
  XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE = 1 << 4,
  XPTI_PAYLOAD_STACK_TRACE_AVAILABLE = 1 << 5,
  XPTI_PAYLOAD_REGISTERED = 1 << 15,
  XPTI_PAYLOAD_HASH_AVAILABLE = 1 << 17
};

/* ---- event flags ----------------------------------------------------- */
enum {
  XPTI_EVENT_UID_AVAILABLE = 1,
  XPTI_EVENT_SOURCE_UID_AVAILABLE = 1 << 1,
  XPTI_EVENT_TARGET_UID_AVAILABLE = 1 << 2,
  XPTI_EVENT_TYPE_AVAILABLE = 1 << 3,
  XPTI_EVENT_ACTIVITY_TYPE_AVAILABLE = 1 << 4,
  XPTI_EVENT_PAYLOAD_AVAILABLE = 1 << 5
};

/* ---- metadata value types (xptiRegisterObject) ---------------------- */
typedef enum xpti_metadata_type_t {
  XPTI_METADATA_BINARY = 0,
  XPTI_METADATA_STRING = 1,
  XPTI_METADATA_SIGNED_INTEGER = 2,
  XPTI_METADATA_UNSIGNED_INTEGER = 3,
  XPTI_METADATA_FLOAT = 4,
  XPTI_METADATA_BOOLEAN = 5
} xpti_metadata_type_t;

/* 128-bit key plus a spare word, as in the reference layout. */
/* C++14 and later: zeroed when default-constructed, as Intel's uid_t is
 * (still an aggregate, so braced initialisation keeps working). */
#if defined(__cplusplus) && __cplusplus >= 201402L
#define XPTI_ZERO_ = 0
#else
#define XPTI_ZERO_
#endif
typedef struct xpti_uid_t {
  uint64_t p1 XPTI_ZERO_; /* source file string id << 32 | function string id */
  uint64_t p2 XPTI_ZERO_; /* line << 32 | column */
  uint64_t p3 XPTI_ZERO_; /* code pointer when the payload has no name or file */
#ifdef __cplusplus
  /* Intel's helpers; members add nothing to the layout. */
  uint64_t hash() const {
    uint64_t h = p1 * 0x9e3779b97f4a7c15ull ^ p2;
    h ^= h >> 31;
    return (h * 0xbf58476d1ce4e5b9ull) ^ p3;
  }
  bool operator==(const xpti_uid_t &o) const { return p1 == o.p1 && p2 == o.p2 && p3 == o.p3; }
  bool operator!=(const xpti_uid_t &o) const { return !(*this == o); }
  bool operator<(const xpti_uid_t &o) const {
    return p1 != o.p1 ? p1 < o.p1 : p2 != o.p2 ? p2 < o.p2 : p3 < o.p3;
  }
#endif
} xpti_uid_t;
#undef XPTI_ZERO_

/* A trace point's description: 80 bytes on LP64. */
typedef struct xpti_payload_t {
  const char *name;
  const char *stack_trace;
  const char *source_file;
  uint32_t line_no;
  uint32_t column_no;
  const void *code_ptr_va;
  uint64_t internal; /* the universal ID once registered */
  uint64_t flags;
  xpti_uid_t uid;
#ifdef __cplusplus
  /* Intel's xpti::payload_t constructors (xpti_trace_framework.hpp names
   * the type); defined in the struct so that pointers the C API returns
   * convert without casts.  Flags as xpti_payload_make sets them. */
  xpti_payload_t()
      : name(nullptr), stack_trace(nullptr), source_file(nullptr), line_no(XPTI_INVALID_LINE),
        column_no(XPTI_INVALID_LINE), code_ptr_va(nullptr), internal(0), flags(0), uid() {}
  explicit xpti_payload_t(const void *code_ptr) : xpti_payload_t() { set(nullptr, code_ptr); }
  explicit xpti_payload_t(const char *func_name) : xpti_payload_t() { set(func_name, nullptr); }
  xpti_payload_t(const char *func_name, const void *code_ptr) : xpti_payload_t() {
    set(func_name, code_ptr);
  }
  xpti_payload_t(const char *func_name, const char *file, int line, int column,
                 const void *code_ptr = nullptr)
      : xpti_payload_t() {
    set(func_name, code_ptr);
    if (file) {
      source_file = file;
      line_no = (uint32_t)line;
      column_no = (uint32_t)column;
      flags |= XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE;
      if (line_no != XPTI_INVALID_LINE)
        flags |= XPTI_PAYLOAD_LINE_INFO_AVAILABLE;
      if (column_no != XPTI_INVALID_LINE)
        flags |= XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE;
    }
  }
  xpti_payload_t(const char *func_name, const char *stack, const void *code_ptr)
      : xpti_payload_t(func_name, code_ptr) {
    stack_trace = stack;
    if (stack)
      flags |= XPTI_PAYLOAD_STACK_TRACE_AVAILABLE;
  }
  bool isValid() const { return flags != 0; }
  /* String ids of the name and file once registered (uid.p1 holds both),
   * else -1. */
  int32_t name_sid() const {
    return (flags & XPTI_PAYLOAD_REGISTERED) ? (int32_t)(uint32_t)uid.p1 : -1;
  }
  int32_t source_file_sid() const {
    return (flags & XPTI_PAYLOAD_REGISTERED) ? (int32_t)(uint32_t)(uid.p1 >> 32) : -1;
  }

private:
  void set(const char *func_name, const void *code_ptr) {
    name = func_name;
    code_ptr_va = code_ptr;
    if (func_name)
      flags |= XPTI_PAYLOAD_NAME_AVAILABLE;
    if (code_ptr)
      flags |= XPTI_PAYLOAD_CODE_PTR_AVAILABLE;
  }

public:
#endif
} xpti_payload_t;

/* A trace point event: 128 bytes on LP64.  Fields after reserved.payload
 * up to global_user_data are private to the framework. */
typedef struct xpti_trace_event_data_t {
  uint64_t unique_id;
  uint64_t data_id;
  uint64_t instance_id;
  uint16_t event_type;
  uint16_t activity_type;
  uint32_t unused;
  uint64_t source_id;
  uint64_t target_id;
  struct {
    const xpti_payload_t *payload;
    void *framework_private[7];
  } reserved;
  void *global_user_data;
  uint64_t flags;
} xpti_trace_event_data_t;

/* An object registered with xptiRegisterObject (metadata values). */
typedef struct xpti_object_data_t {
  size_t size;
  const char *data;
  uint8_t type;
} xpti_object_data_t;

#if defined(__LP64__) && !defined(__cplusplus)
_Static_assert(sizeof(xpti_payload_t) == 80, "payload layout");
_Static_assert(offsetof(xpti_payload_t, internal) == 40, "payload layout");
_Static_assert(offsetof(xpti_payload_t, uid) == 56, "payload layout");
_Static_assert(sizeof(xpti_trace_event_data_t) == 128, "event layout");
_Static_assert(offsetof(xpti_trace_event_data_t, source_id) == 32, "event layout");
_Static_assert(offsetof(xpti_trace_event_data_t, reserved.payload) == 48, "event layout");
_Static_assert(offsetof(xpti_trace_event_data_t, global_user_data) == 112, "event layout");
_Static_assert(offsetof(xpti_trace_event_data_t, flags) == 120, "event layout");
#endif

/* User data of function_with_args_begin/_end (the reference layout):
 * which function, its arguments and, at the end, its return value. */
typedef struct xpti_function_with_args_t {
  uint32_t function_id;
  const char *function_name;
  void *args_data;
  void *ret_data;
  void *user_data;
} xpti_function_with_args_t;

/* User data of mem_alloc_* and mem_release_* (the reference layout,
 * 40 bytes on LP64). */
typedef struct xpti_mem_alloc_data_t {
  uint64_t mem_object_handle;
  uint64_t alloc_pointer;
  uint64_t alloc_size;
  uint64_t guard_zone;
  void *reserved; /* the reference's "reserved for future needs" */
} xpti_mem_alloc_data_t;
#if defined(__LP64__) && !defined(__cplusplus)
_Static_assert(sizeof(xpti_mem_alloc_data_t) == 40, "mem_alloc_data_t layout");
#endif

/* The name a notification's user data carries when it has no event, by
 * the protocol of the predefined types: function_begin/_end and
 * diagnostics pass a C string, function_with_args_* an
 * xpti_function_with_args_t.  NULL for every other type. */
static inline const char *xpti_user_data_name(uint16_t trace_type, const void *user_data) {
  if (!user_data)
    return NULL;
  switch (trace_type) {
  case XPTI_TRACE_FUNCTION_BEGIN:
  case XPTI_TRACE_FUNCTION_END:
  case XPTI_TRACE_DIAGNOSTICS:
    return (const char *)user_data;
  case XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN:
  case XPTI_TRACE_FUNCTION_WITH_ARGS_END:
    return ((const xpti_function_with_args_t *)user_data)->function_name;
  default:
    return NULL;
  }
}

#ifndef __cplusplus
/* The value xptiLookupObject returns for an unknown id. */
#define XPTI_OBJECT_DATA_NONE ((xpti_object_data_t){0, NULL, 0})
#endif

/* Callback signature for xptiRegisterCallback. */
typedef void (*xpti_tracepoint_callback_api_t)(uint16_t trace_type,
                                               xpti_trace_event_data_t *parent,
                                               xpti_trace_event_data_t *event,
                                               uint64_t instance,
                                               const void *user_data);

/* Callback for xptiRegisterStreamCallback: every trace type of a stream,
 * with the stream id (an extension of the reference API). */
typedef void (*xpti_stream_callback_api_t)(uint8_t stream, uint16_t trace_type,
                                           xpti_trace_event_data_t *parent,
                                           xpti_trace_event_data_t *event, uint64_t instance,
                                           const void *user_data);

/* Subscriber entry points. */
typedef void (*xpti_trace_init_fn_t)(unsigned int major, unsigned int minor,
                                     const char *version, const char *stream);
typedef void (*xpti_trace_finish_fn_t)(const char *stream);

/* Build a payload as the reference constructors do: each field given
 * sets its *_AVAILABLE flag.  NULL strings, XPTI_INVALID_LINE and a NULL
 * code pointer mean "not available". */
static inline xpti_payload_t xpti_payload_make(const char *name, const char *file,
                                               uint32_t line, uint32_t column,
                                               const void *code_ptr) {
  xpti_payload_t p;
  p.name = name;
  p.stack_trace = NULL;
  p.source_file = file;
  p.line_no = line;
  p.column_no = column;
  p.code_ptr_va = code_ptr;
  p.internal = 0;
  p.flags = 0;
  p.uid.p1 = p.uid.p2 = p.uid.p3 = 0;
  if (name)
    p.flags |= XPTI_PAYLOAD_NAME_AVAILABLE;
  if (file) {
    p.flags |= XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE;
    if (line != XPTI_INVALID_LINE)
      p.flags |= XPTI_PAYLOAD_LINE_INFO_AVAILABLE;
    if (column != XPTI_INVALID_LINE)
      p.flags |= XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE;
  }
  if (code_ptr)
    p.flags |= XPTI_PAYLOAD_CODE_PTR_AVAILABLE;
  return p;
}

/* A payload for the current source location (function, file, line). */
#define XPTI_PAYLOAD_HERE() xpti_payload_make(__func__, __FILE__, __LINE__, 0, NULL)

#ifdef __cplusplus
}
#endif
#endif /* XPTI_DATA_TYPES_H */
