// xptrace — Intel's C++ spellings of the XPTI API, header-only, over the
// C API of xpti_trace_framework.h.  Code written against Intel's headers
// (xpti::payload_t, xpti::trace_point_type_t::task_begin,
// xpti::framework::scoped_notify, ...) compiles unchanged; see
// docs/interop.md for what differs.  C++17.
#ifndef XPTI_TRACE_FRAMEWORK_HPP
#define XPTI_TRACE_FRAMEWORK_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "xpti_trace_framework.h"

// ---- Intel's interface objects (the vtable order is the ABI) -----------

// Intel's header calls this one xpti_payload_t.
struct xpti_payload_iface_t {
  virtual ~xpti_payload_iface_t() {}
  virtual const char *name() const = 0;
  virtual const char *source_file() const = 0;
  virtual uint32_t line_no() const = 0;
  virtual uint32_t column_no() const = 0;
  virtual uint64_t payload_flags() const = 0;
  virtual int32_t name_string_id() const = 0;
  virtual int32_t file_string_id() const = 0;
  virtual uint64_t uid64() const = 0;
  virtual bool is_valid() const = 0;
  virtual xpti_payload_t *payload_ref() = 0;
};

struct xpti_metadata_t {
  virtual ~xpti_metadata_t() {}
  // FALSE when empty / at the end.
  virtual xpti_result_t first_item(char **key, int32_t &value) = 0;
  virtual xpti_result_t next_item(char **key, int32_t &value) = 0;
  virtual xpti_result_t add_item(const char *key, int32_t value) = 0;
  virtual size_t count() = 0;
};

namespace xpti {
enum class trace_activity_type_t {
  unknown_activity = XPTI_ACTIVITY_UNKNOWN,
  active = XPTI_ACTIVITY_ACTIVE,
  overhead = XPTI_ACTIVITY_OVERHEAD,
  background = XPTI_ACTIVITY_BACKGROUND,
  sleep_activity = XPTI_ACTIVITY_SLEEP
};
} // namespace xpti

struct xpti_trace_event_t {
  virtual ~xpti_trace_event_t() {}
  virtual xpti_payload_iface_t *payload() = 0;
  virtual xpti_metadata_t *metadata() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual uint16_t event_type() const = 0;
  virtual uint16_t activity_type() const = 0;
  virtual uint64_t source_uid64() const = 0;
  virtual uint64_t target_uid64() const = 0;
  virtual uint64_t event_flags() const = 0;
  virtual void set_activity_type(xpti::trace_activity_type_t type) = 0;
  virtual void set_event_type(uint16_t type) = 0;
  virtual xpti_payload_t *payload_ref() = 0;
  virtual xpti_trace_event_data_t *event_ref() = 0;
};

struct xpti_tracepoint_t {
  virtual ~xpti_tracepoint_t() {}
  virtual xpti_payload_iface_t *payload() = 0;
  virtual xpti_metadata_t *metadata() = 0;
  virtual xpti_trace_event_t *event() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual xpti_trace_event_data_t *event_ref() = 0;
  virtual xpti_payload_t *payload_ref() = 0;
};

namespace xpti {
constexpr int invalid_id = -1;
constexpr uint64_t invalid_uid = 0;
constexpr uint8_t default_vendor = 0;

using string_id_t = int32_t;
using object_id_t = int32_t;
using trace_point_t = uint16_t;
using event_type_t = uint16_t;
// Plain C types: pointers the C API returns need no cast.
using result_t = ::xpti_result_t;
using uid_t = ::xpti_uid_t;
using payload_t = ::xpti_payload_t;
using trace_event_data_t = ::xpti_trace_event_data_t;
using object_data_t = ::xpti_object_data_t;
using function_with_args_t = ::xpti_function_with_args_t;
using mem_alloc_data_t = ::xpti_mem_alloc_data_t;
using tracepoint_callback_api_t = ::xpti_tracepoint_callback_api_t;
using plugin_init_t = ::xpti_trace_init_fn_t;
using plugin_fini_t = ::xpti_trace_finish_fn_t;

// Completes the opaque declarations of xpti_trace_framework.h.
enum class trace_point_type_t : uint16_t {
  unknown_type = XPTI_TRACE_UNKNOWN_TYPE,
  graph_create = XPTI_TRACE_GRAPH_CREATE,
  node_create = XPTI_TRACE_NODE_CREATE,
  edge_create = XPTI_TRACE_EDGE_CREATE,
  region_begin = XPTI_TRACE_REGION_BEGIN,
  region_end = XPTI_TRACE_REGION_END,
  task_begin = XPTI_TRACE_TASK_BEGIN,
  task_end = XPTI_TRACE_TASK_END,
  barrier_begin = XPTI_TRACE_BARRIER_BEGIN,
  barrier_end = XPTI_TRACE_BARRIER_END,
  lock_begin = XPTI_TRACE_LOCK_BEGIN,
  lock_end = XPTI_TRACE_LOCK_END,
  signal = XPTI_TRACE_SIGNAL,
  transfer_begin = XPTI_TRACE_TRANSFER_BEGIN,
  transfer_end = XPTI_TRACE_TRANSFER_END,
  thread_begin = XPTI_TRACE_THREAD_BEGIN,
  thread_end = XPTI_TRACE_THREAD_END,
  wait_begin = XPTI_TRACE_WAIT_BEGIN,
  wait_end = XPTI_TRACE_WAIT_END,
  function_begin = XPTI_TRACE_FUNCTION_BEGIN,
  function_end = XPTI_TRACE_FUNCTION_END,
  metadata = XPTI_TRACE_METADATA,
  function_with_args_begin = XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN,
  function_with_args_end = XPTI_TRACE_FUNCTION_WITH_ARGS_END,
  mem_alloc_begin = XPTI_TRACE_MEM_ALLOC_BEGIN,
  mem_alloc_end = XPTI_TRACE_MEM_ALLOC_END,
  mem_release_begin = XPTI_TRACE_MEM_RELEASE_BEGIN,
  mem_release_end = XPTI_TRACE_MEM_RELEASE_END,
  offload_alloc_memory_object_construct = XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT,
  offload_alloc_memory_object_destruct = XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT,
  offload_alloc_memory_object_associate = XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE,
  offload_alloc_memory_object_release = XPTI_TRACE_OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE,
  offload_alloc_accessor = XPTI_TRACE_OFFLOAD_ALLOC_ACCESSOR,
  queue_create = XPTI_TRACE_QUEUE_CREATE,
  queue_destroy = XPTI_TRACE_QUEUE_DESTROY,
  diagnostics = XPTI_TRACE_DIAGNOSTICS,
  user_defined = XPTI_TRACE_USER_DEFINED
};

enum class trace_event_type_t : uint16_t {
  unknown_event = XPTI_EVENT_UNKNOWN,
  graph = XPTI_EVENT_GRAPH,
  algorithm = XPTI_EVENT_ALGORITHM,
  barrier = XPTI_EVENT_BARRIER,
  scheduler = XPTI_EVENT_SCHEDULER,
  async = XPTI_EVENT_ASYNC,
  lock = XPTI_EVENT_LOCK,
  offload_read = XPTI_EVENT_OFFLOAD_READ,
  offload_write = XPTI_EVENT_OFFLOAD_WRITE,
  offload_memory_object = XPTI_EVENT_OFFLOAD_MEMORY_OBJECT,
  offload_accessor = XPTI_EVENT_OFFLOAD_ACCESSOR,
  user_defined = XPTI_EVENT_USER_DEFINED
};

enum class metadata_type_t {
  binary = XPTI_METADATA_BINARY,
  string = XPTI_METADATA_STRING,
  signed_integer = XPTI_METADATA_SIGNED_INTEGER,
  unsigned_integer = XPTI_METADATA_UNSIGNED_INTEGER,
  floating = XPTI_METADATA_FLOAT,
  boolean = XPTI_METADATA_BOOLEAN
};

enum class payload_flag_t {
  NameAvailable = XPTI_PAYLOAD_NAME_AVAILABLE,
  SourceFileAvailable = XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE,
  CodePointerAvailable = XPTI_PAYLOAD_CODE_PTR_AVAILABLE,
  LineInfoAvailable = XPTI_PAYLOAD_LINE_INFO_AVAILABLE,
  ColumnInfoAvailable = XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE,
  StackTraceAvailable = XPTI_PAYLOAD_STACK_TRACE_AVAILABLE,
  PayloadRegistered = XPTI_PAYLOAD_REGISTERED,
  HashAvailable = XPTI_PAYLOAD_HASH_AVAILABLE
};

#define XPTI_TRACE_CONSTANT_(name) constexpr uint16_t trace_##name = (uint16_t)trace_point_type_t::name;
XPTI_TRACE_CONSTANT_(graph_create)
XPTI_TRACE_CONSTANT_(node_create)
XPTI_TRACE_CONSTANT_(edge_create)
XPTI_TRACE_CONSTANT_(region_begin)
XPTI_TRACE_CONSTANT_(region_end)
XPTI_TRACE_CONSTANT_(task_begin)
XPTI_TRACE_CONSTANT_(task_end)
XPTI_TRACE_CONSTANT_(barrier_begin)
XPTI_TRACE_CONSTANT_(barrier_end)
XPTI_TRACE_CONSTANT_(wait_begin)
XPTI_TRACE_CONSTANT_(wait_end)
XPTI_TRACE_CONSTANT_(signal)
XPTI_TRACE_CONSTANT_(function_begin)
XPTI_TRACE_CONSTANT_(function_end)
XPTI_TRACE_CONSTANT_(function_with_args_begin)
XPTI_TRACE_CONSTANT_(function_with_args_end)
XPTI_TRACE_CONSTANT_(mem_alloc_begin)
XPTI_TRACE_CONSTANT_(mem_alloc_end)
XPTI_TRACE_CONSTANT_(mem_release_begin)
XPTI_TRACE_CONSTANT_(mem_release_end)
XPTI_TRACE_CONSTANT_(offload_alloc_memory_object_construct)
XPTI_TRACE_CONSTANT_(offload_alloc_memory_object_destruct)
XPTI_TRACE_CONSTANT_(offload_alloc_memory_object_associate)
XPTI_TRACE_CONSTANT_(offload_alloc_memory_object_release)
XPTI_TRACE_CONSTANT_(offload_alloc_accessor)
XPTI_TRACE_CONSTANT_(queue_create)
XPTI_TRACE_CONSTANT_(queue_destroy)
XPTI_TRACE_CONSTANT_(diagnostics)
#undef XPTI_TRACE_CONSTANT_
constexpr uint16_t trace_graph_event = (uint16_t)trace_event_type_t::graph;
constexpr uint16_t trace_algorithm_event = (uint16_t)trace_event_type_t::algorithm;
constexpr uint16_t trace_offload_memory_object_event =
    (uint16_t)trace_event_type_t::offload_memory_object;
constexpr uint16_t trace_offload_accessor_event = (uint16_t)trace_event_type_t::offload_accessor;

// ---- Intel's identifiers, flags and offload descriptions ----------------

// Intel's 128-bit key of a trace point visit: file and function string ids
// (p1), column and line (p2), the visit (instance) and its 64-bit id.
using uid64_t = uint64_t;
struct uid128_t {
  uint64_t p1 = 0;
  uint64_t p2 = 0;
  uint64_t instance = 0;
  uint64_t uid64 = 0;
  bool operator==(const uid128_t &o) const {
    return p1 == o.p1 && p2 == o.p2 && instance == o.instance;
  }
  bool operator!=(const uid128_t &o) const { return !(*this == o); }
  bool operator<(const uid128_t &o) const {
    return p1 != o.p1 ? p1 < o.p1 : p2 != o.p2 ? p2 < o.p2 : instance < o.instance;
  }
};

inline bool is_valid_uid(const uid128_t &u) { return (u.p1 || u.p2) && u.instance; }

// A payload that names its trace point somehow: a name, a file or code.
inline bool is_valid_payload(const payload_t *p) {
  if (!p || !p->flags)
    return false;
  return ((p->flags & XPTI_PAYLOAD_NAME_AVAILABLE) && p->name) ||
         ((p->flags & XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE) && p->source_file) ||
         ((p->flags & XPTI_PAYLOAD_CODE_PTR_AVAILABLE) && p->code_ptr_va);
}

enum class trace_event_flag_t : uint64_t {
  UIDAvailable = XPTI_EVENT_UID_AVAILABLE,
  SourceUIDAvailable = XPTI_EVENT_SOURCE_UID_AVAILABLE,
  TargetUIDAvailable = XPTI_EVENT_TARGET_UID_AVAILABLE,
  EventTypeAvailable = XPTI_EVENT_TYPE_AVAILABLE,
  ActivityTypeAvailable = XPTI_EVENT_ACTIVITY_TYPE_AVAILABLE,
  PayloadAvailable = XPTI_EVENT_PAYLOAD_AVAILABLE
};

inline bool is_valid_event(const trace_event_data_t *e) {
  return e && e->unique_id != invalid_uid && (e->flags & XPTI_EVENT_UID_AVAILABLE);
}

// Intel's helper that packs (file, function, line, column) ids into 64
// bits, each field as wide as its value needs: a lookup key, not a
// unique id (it may overflow).
struct hash_t {
  static int bit_count(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 1; }
  static uint64_t shift_in(uint64_t acc, uint64_t v) {
    int n = bit_count(v);
    return (n >= 64 ? 0 : acc << n) | v;
  }
  uint64_t compact(uint64_t file_id, uint64_t func_id, int line, int col) {
    return shift_in(compact_short(file_id, func_id, line), (uint64_t)(uint32_t)col);
  }
  uint64_t compact_short(uint64_t file_id, uint64_t func_id, int line) {
    return shift_in(shift_in(file_id, func_id), (uint64_t)(uint32_t)line);
  }
  // Ours: p1 = file id << 32 | function id, p2 = line << 32 | column.
  uint64_t combine(const uid_t &u) {
    return compact(u.p1 >> 32, u.p1 & 0xffffffffu, (int)(u.p2 >> 32), (int)(u.p2 & 0xffffffffu));
  }
  uint64_t combine_short(const uid_t &u) {
    return compact_short(u.p1 >> 32, u.p1 & 0xffffffffu, (int)(u.p2 >> 32));
  }
  // Intel's uid128_t: p2 = column << 32 | line.
  uint64_t combine(const uid128_t &u) {
    return compact(u.p1 >> 32, u.p1 & 0xffffffffu, (int)(u.p2 & 0xffffffffu), (int)(u.p2 >> 32));
  }
  uint64_t combine_short(const uid128_t &u) {
    return compact_short(u.p1 >> 32, u.p1 & 0xffffffffu, (int)(u.p2 & 0xffffffffu));
  }
};

#ifndef XPTI_PACK08_RET16
#define XPTI_PACK08_RET16(value1, value2) (((value1) << 8) | (value2))
#endif
#ifndef XPTI_PACK16_RET32
#define XPTI_PACK16_RET32(value1, value2) (((value1) << 16) | (value2))
#endif
#ifndef XPTI_PACK32_RET64
#define XPTI_PACK32_RET64(value1, value2) (((uint64_t)(value1) << 32) | (value2))
#endif

// What the SYCL runtime passes as user data of the offload_* trace types.
struct offload_buffer_data_t {
  uintptr_t user_object_handle = 0;
  uintptr_t host_object_handle = 0;
  const char *element_type = nullptr;
  uint32_t element_size = 0;
  uint32_t dim = 0;
  size_t range[3] = {0, 0, 0};
};
struct offload_image_data_t {
  uintptr_t user_object_handle = 0;
  uintptr_t host_object_handle = 0;
  uint32_t dim = 0;
  size_t range[3] = {0, 0, 0};
  uint32_t format = 0;
  std::optional<uint32_t> addressing = std::nullopt;
  std::optional<uint32_t> coordinate_normalization = std::nullopt;
  std::optional<uint32_t> filtering = std::nullopt;
};
struct offload_accessor_data_t {
  uintptr_t buffer_handle = 0;
  uintptr_t accessor_handle = 0;
  uint32_t target = 0;
  uint32_t mode = 0;
};
struct offload_image_accessor_data_t {
  uintptr_t image_handle = 0;
  uintptr_t accessor_handle = 0;
  std::optional<uint32_t> target = std::nullopt;
  std::optional<uint32_t> mode = std::nullopt;
  const char *element_type = nullptr;
  uint32_t element_size = 0;
};
struct offload_association_data_t {
  uintptr_t user_object_handle = 0;
  uintptr_t mem_object_handle = 0;
};
struct offload_kernel_enqueue_data_t {
  size_t global_size[3] = {0, 0, 0};
  size_t local_size[3] = {0, 0, 0};
  size_t offset[3] = {0, 0, 0};
  size_t args_num = 0;
};
struct offload_kernel_arg_data_t {
  int type = -1;
  void *pointer = nullptr;
  int size = 0;
  int index = 0;
};

// ---- metadata ---------------------------------------------------------

namespace detail {
template <typename T> constexpr uint8_t metadata_type_of() {
  if constexpr (std::is_same_v<T, bool>)
    return (uint8_t)metadata_type_t::boolean;
  else if constexpr (std::is_floating_point_v<T>)
    return (uint8_t)metadata_type_t::floating;
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return (uint8_t)metadata_type_t::signed_integer;
  else if constexpr (std::is_integral_v<T>)
    return (uint8_t)metadata_type_t::unsigned_integer;
  else
    return (uint8_t)metadata_type_t::binary;
}
} // namespace detail

// Registers Data's bytes as an object and attaches it under Key.
template <typename T>
inline result_t addMetadata(trace_event_data_t *E, const std::string &Key, const T &Data) {
  static_assert(std::is_trivially_copyable_v<T>, "metadata values are copied bytewise");
  object_id_t Value = xptiRegisterObject(reinterpret_cast<const char *>(&Data), sizeof(Data),
                                         detail::metadata_type_of<T>());
  return xptiAddMetadata(E, Key.c_str(), Value);
}
template <>
inline result_t addMetadata<std::string>(trace_event_data_t *E, const std::string &Key,
                                         const std::string &Data) {
  object_id_t Value =
      xptiRegisterObject(Data.c_str(), Data.size(), (uint8_t)metadata_type_t::string);
  return xptiAddMetadata(E, Key.c_str(), Value);
}
inline result_t addMetadata(trace_event_data_t *E, const std::string &Key, const char *Data) {
  return addMetadata(E, Key, std::string(Data ? Data : ""));
}

// One (key id, object id) item of metadata_t, typed.
template <typename T>
inline std::pair<std::string_view, T> getMetadata(const metadata_t::value_type &MD) {
  static_assert(std::is_trivially_copyable_v<T>, "metadata values are copied bytewise");
  object_data_t Raw = xptiLookupObject(MD.second);
  T Value{};
  if (Raw.data)
    std::memcpy(&Value, Raw.data, Raw.size < sizeof(T) ? Raw.size : sizeof(T));
  const char *Key = xptiLookupString((uint32_t)MD.first);
  return {std::string_view(Key ? Key : ""), Value};
}
template <>
inline std::pair<std::string_view, std::string_view>
getMetadata<std::string_view>(const metadata_t::value_type &MD) {
  object_data_t Raw = xptiLookupObject(MD.second);
  const char *Key = xptiLookupString((uint32_t)MD.first);
  return {std::string_view(Key ? Key : ""), std::string_view(Raw.data ? Raw.data : "", Raw.size)};
}

// A metadata value as text, by its registered type.
inline std::string readMetadata(const metadata_t::value_type &MD) {
  object_data_t Raw = xptiLookupObject(MD.second);
  if (!Raw.data)
    return std::string();
  auto as = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, Raw.data, sizeof v);
    return v;
  };
  switch ((metadata_type_t)Raw.type) {
  case metadata_type_t::string:
    return std::string(Raw.data, Raw.size);
  case metadata_type_t::boolean:
    return Raw.size && Raw.data[0] ? "true" : "false";
  case metadata_type_t::signed_integer:
    switch (Raw.size) {
    case 1: return std::to_string(as(int8_t()));
    case 2: return std::to_string(as(int16_t()));
    case 4: return std::to_string(as(int32_t()));
    case 8: return std::to_string(as(int64_t()));
    }
    break;
  case metadata_type_t::unsigned_integer:
    switch (Raw.size) {
    case 1: return std::to_string(as(uint8_t()));
    case 2: return std::to_string(as(uint16_t()));
    case 4: return std::to_string(as(uint32_t()));
    case 8: return std::to_string(as(uint64_t()));
    }
    break;
  case metadata_type_t::floating:
    if (Raw.size == 4)
      return std::to_string(as(float()));
    if (Raw.size == 8)
      return std::to_string(as(double()));
    break;
  case metadata_type_t::binary:
    return "Binary data, size: " + std::to_string(Raw.size);
  }
  return "Unknown metadata type, size " + std::to_string(Raw.size);
}

namespace framework {

// Stashes (key, value) for the scope.
class stash_tuple {
public:
  stash_tuple(const char *key, uint64_t value)
      : m_stashed(xptiStashTuple(key, value) == XPTI_RESULT_SUCCESS) {}
  ~stash_tuple() {
    if (m_stashed)
      xptiUnstashTuple();
  }
  stash_tuple(const stash_tuple &) = delete;
  stash_tuple &operator=(const stash_tuple &) = delete;

private:
  bool m_stashed;
};

// The end type of a begin type that has one, else 0.
constexpr uint16_t scope_end_of(uint16_t begin) {
  switch ((trace_point_type_t)begin) {
  case trace_point_type_t::region_begin:
  case trace_point_type_t::task_begin:
  case trace_point_type_t::barrier_begin:
  case trace_point_type_t::lock_begin:
  case trace_point_type_t::transfer_begin:
  case trace_point_type_t::thread_begin:
  case trace_point_type_t::wait_begin:
  case trace_point_type_t::function_begin:
  case trace_point_type_t::function_with_args_begin:
  case trace_point_type_t::mem_alloc_begin:
  case trace_point_type_t::mem_release_begin:
    return (uint16_t)(begin | 1);
  default:
    return (begin & 0x80) && !(begin & 1) ? (uint16_t)(begin | 1) : 0; // user-defined pairs
  }
}

// Notifies trace_type now and its end type when the scope exits.
class scoped_notify {
public:
  scoped_notify(const char *stream, uint16_t trace_type, trace_event_data_t *parent,
                trace_event_data_t *object, uint64_t instance, const void *user_data = nullptr)
      : m_object(object), m_parent(parent), m_user_data(user_data), m_instance(instance),
        m_trace_type(trace_type) {
    if (xptiTraceEnabled()) {
      m_stream_id = xptiRegisterStream(stream);
      m_sent = xptiNotifySubscribers(m_stream_id, m_trace_type, m_parent, m_object, m_instance,
                                     m_user_data) == XPTI_RESULT_SUCCESS;
    }
  }
  ~scoped_notify() {
    uint16_t end = scope_end_of(m_trace_type);
    if (m_sent && end)
      xptiNotifySubscribers(m_stream_id, end, m_parent, m_object, m_instance, m_user_data);
  }
  scoped_notify(const scoped_notify &) = delete;
  scoped_notify &operator=(const scoped_notify &) = delete;

private:
  trace_event_data_t *m_object, *m_parent;
  const void *m_user_data;
  uint64_t m_instance;
  uint16_t m_trace_type;
  uint8_t m_stream_id = XPTI_INVALID_STREAM_ID;
  bool m_sent = false;
};

// A trace point that sets the thread's universal ID for nested layers, or
// inherits it from an outer one (Intel's tracepoint_t).
class tracepoint_t {
public:
  explicit tracepoint_t(payload_t *p) {
    if (!xptiTraceEnabled())
      return;
    m_stream = xptiGetDefaultStreamID();
    m_trace_type = (uint16_t)xptiGetDefaultTraceType();
    m_uid = xptiGetUniversalId();
    if (m_uid != invalid_uid) { // inside an outer trace point: reuse it
      m_event = const_cast<trace_event_data_t *>(xptiFindEvent(m_uid));
      m_instance = m_event ? m_event->instance_id : 0;
    } else if (p) {
      m_event = xptiMakeEvent(p->name, p, (uint16_t)xptiGetDefaultEventType(),
                              XPTI_ACTIVITY_ACTIVE, &m_instance);
      if (m_event) {
        m_uid = m_event->unique_id;
        xptiSetUniversalId(m_uid);
        m_top = true;
      }
    }
    m_payload = m_event ? xptiQueryPayload(m_event) : nullptr;
  }
  ~tracepoint_t() {
    if (m_top)
      xptiSetUniversalId(invalid_uid);
  }
  tracepoint_t(const tracepoint_t &) = delete;
  tracepoint_t &operator=(const tracepoint_t &) = delete;

  tracepoint_t &stream(const char *name) {
    if (xptiTraceEnabled())
      m_stream = xptiRegisterStream(name);
    return *this;
  }
  tracepoint_t &trace_type(trace_point_type_t type) {
    m_trace_type = (uint16_t)type;
    return *this;
  }
  tracepoint_t &event_type(trace_event_type_t type) {
    if (m_event)
      m_event->event_type = (uint16_t)type;
    return *this;
  }
  tracepoint_t &activity_type(trace_activity_type_t type) {
    if (m_event)
      m_event->activity_type = (uint16_t)type;
    return *this;
  }
  tracepoint_t &parent_event(trace_event_data_t *parent) {
    m_parent = parent;
    return *this;
  }
  tracepoint_t &notify(const void *user_data = nullptr) {
    if (m_event && xptiCheckTraceEnabled(m_stream, m_trace_type))
      xptiNotifySubscribers(m_stream, m_trace_type, m_parent, m_event, m_instance, user_data);
    return *this;
  }
  const payload_t *payload() const { return m_payload; }
  trace_event_data_t *trace_event() const { return m_event; }
  uint64_t universal_id() const { return m_uid; }
  uint64_t instance() const { return m_instance; }
  uint8_t stream_id() const { return m_stream; }

private:
  const payload_t *m_payload = nullptr;
  trace_event_data_t *m_event = nullptr, *m_parent = nullptr;
  uint64_t m_uid = invalid_uid, m_instance = 0;
  uint16_t m_trace_type = 0;
  uint8_t m_stream = XPTI_INVALID_STREAM_ID;
  bool m_top = false;
};

// A code-location scope kept in the thread's tracepoint scope data, so
// nested scopes (and layers below) share the outermost trace point
// (Intel's tracepoint_scope_t over xptiRegisterTracepointScope).
class tracepoint_scope_t {
public:
  tracepoint_scope_t(const char *fileName, const char *funcName, int line, int column,
                     bool selfNotify = false, const char *callerFuncName = __builtin_FUNCTION())
      : m_self_notify(selfNotify), m_caller(callerFuncName) {
    if (!xptiTraceEnabled())
      return;
    m_data = xptiGetTracepointScopeData();
    if (!m_data) {
      m_data = funcName || fileName
                   ? xptiRegisterTracepointScope(funcName, fileName, (uint32_t)line,
                                                 (uint32_t)column)
                   : xptiRegisterTracepointScope(callerFuncName, nullptr, 0, 0);
      m_top = m_data != nullptr;
    }
    start();
  }
  explicit tracepoint_scope_t(bool selfNotify = false,
                              const char *callerFuncName = __builtin_FUNCTION())
      : m_self_notify(selfNotify), m_caller(callerFuncName) {
    if (!xptiTraceEnabled())
      return;
    m_data = xptiGetTracepointScopeData(); // none: no event, no notification
    start();
  }
  ~tracepoint_scope_t() {
    if (m_scoped_type && m_event)
      if (uint16_t end = scope_end_of(m_scoped_type))
        if (xptiCheckTraceEnabled(m_stream, end))
          xptiNotifySubscribers(m_stream, end, m_parent, m_event, m_correlation, m_user_data);
    if (m_self_sent)
      xptiNotifySubscribers(m_stream, (uint16_t)(m_self_type | 1), m_parent, m_event,
                            m_instance, m_caller);
    if (m_top)
      xptiUnsetTracepointScopeData();
  }
  tracepoint_scope_t(const tracepoint_scope_t &) = delete;
  tracepoint_scope_t &operator=(const tracepoint_scope_t &) = delete;

  uint64_t uid64() const { return m_data ? m_data->uid64() : invalid_uid; }
  payload_t *payload() { return m_data ? mutable_data()->payload_ref() : nullptr; }
  trace_event_data_t *traceEvent() { return m_event; }
  uint8_t streamId() const { return m_stream; }
  uint64_t instance() const { return m_instance; }

  tracepoint_scope_t &stream(const char *streamName) {
    if (xptiTraceEnabled())
      m_stream = xptiRegisterStream(streamName);
    return *this;
  }
  tracepoint_scope_t &traceType(trace_point_type_t type) {
    m_scoped_type = (uint16_t)type;
    return *this;
  }
  tracepoint_scope_t &eventType(trace_event_type_t type) {
    if (m_event)
      m_event->event_type = (uint16_t)type;
    return *this;
  }
  tracepoint_scope_t &activityType(trace_activity_type_t type) {
    if (m_event)
      m_event->activity_type = (uint16_t)type;
    return *this;
  }
  tracepoint_scope_t &parentEvent(trace_event_data_t *parent) {
    m_parent = parent;
    return *this;
  }
  // Notifies trace_type now and its end type when the scope exits.
  tracepoint_scope_t &scopedNotify(uint16_t traceType, const void *userData = nullptr,
                                   uint64_t correlationId = 0) {
    m_scoped_type = traceType;
    m_user_data = userData;
    m_correlation = correlationId ? correlationId : m_instance;
    if (m_event && xptiCheckTraceEnabled(m_stream, traceType))
      xptiNotifySubscribers(m_stream, traceType, m_parent, m_event, m_correlation, userData);
    else
      m_scoped_type = 0;
    return *this;
  }
  template <typename F> tracepoint_scope_t &addMetadata(F &&f) {
    if (m_event)
      f(m_event);
    return *this;
  }

private:
  xpti_tracepoint_t *mutable_data() const { return const_cast<xpti_tracepoint_t *>(m_data); }
  void start() {
    m_stream = xptiGetDefaultStreamID();
    if (!m_data)
      return;
    m_event = mutable_data()->event_ref();
    m_instance = m_data->instance();
    m_self_type = (uint16_t)xptiGetDefaultTraceType();
    if (m_self_notify && xptiCheckTracepointScopeNotification() &&
        xptiCheckTraceEnabled(m_stream, m_self_type))
      m_self_sent = xptiNotifySubscribers(m_stream, m_self_type, m_parent, m_event, m_instance,
                                          m_caller) == XPTI_RESULT_SUCCESS;
  }

  const xpti_tracepoint_t *m_data = nullptr;
  trace_event_data_t *m_event = nullptr, *m_parent = nullptr;
  const void *m_user_data = nullptr;
  uint64_t m_instance = 0, m_correlation = 0;
  uint16_t m_scoped_type = 0, m_self_type = 0;
  uint8_t m_stream = XPTI_INVALID_STREAM_ID;
  bool m_self_notify, m_self_sent = false, m_top = false;
  const char *m_caller;
};

} // namespace framework
} // namespace xpti

// Keys of std::unordered_map, as with Intel's header.
template <> struct std::hash<xpti::uid_t> {
  size_t operator()(const xpti::uid_t &u) const { return (size_t)u.hash(); }
};
template <> struct std::hash<xpti::uid128_t> {
  size_t operator()(const xpti::uid128_t &u) const {
    return (size_t)(xpti::uid_t{u.p1, u.p2, u.instance}.hash());
  }
};

// ---- Intel's C++ parameter types on C entry points -------------------

// Intel passes xpti::trace_activity_type_t (an enum class).
inline xpti_trace_event_data_t *xptiMakeEvent(const char *name, xpti_payload_t *payload,
                                              uint16_t event, xpti::trace_activity_type_t activity,
                                              uint64_t *instance_no) {
  return ::xptiMakeEvent(name, payload, event, (xpti_trace_activity_type_t)activity,
                         instance_no);
}
// Intel's trace type defaults to 0 (any).
inline bool xptiCheckTraceEnabled(uint8_t stream) { return ::xptiCheckTraceEnabled(stream, 0); }

#endif // XPTI_TRACE_FRAMEWORK_HPP
