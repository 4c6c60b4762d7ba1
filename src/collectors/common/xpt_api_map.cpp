// xptrace — Intel's metadata map read through its own (libstdc++) layout,
// for dispatchers without xptiMetadataCount/At (see xpt_api.h).  Only the
// map's inline traversal: nothing here needs libstdc++ at run time.
#include <cstdint>
#include <unordered_map>

namespace {
// Intel's xpti::metadata_t: string id of the key -> object id of the value.
using intel_map = std::unordered_map<uint32_t, uint32_t>;
} // namespace

extern "C" __attribute__((visibility("hidden"))) uint32_t xpt_api_map_count(const void *map) {
  return (uint32_t)static_cast<const intel_map *>(map)->size();
}

extern "C" __attribute__((visibility("hidden"))) bool xpt_api_map_at(const void *map,
                                                                       uint32_t index,
                                                                       uint32_t *key,
                                                                       int32_t *value) {
  const intel_map *m = static_cast<const intel_map *>(map);
  for (const auto &kv : *m) {
    if (index-- == 0) {
      *key = kv.first;
      *value = (int32_t)kv.second;
      return true;
    }
  }
  return false;
}
