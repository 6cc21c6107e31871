#include "engine/gguf/gguf_value.h"

namespace pagoda {

const char* gguf_type_name(GgufType type) {
  static constexpr const char* kNames[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                           "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  const auto id = static_cast<uint32_t>(type);
  return gguf_type_known(id) ? kNames[id] : "unknown";
}

// Defined out of line because GgufValue, which items holds, is incomplete in the header here.
bool GgufArray::operator==(const GgufArray& other) const { return type == other.type && items == other.items; }

}  // namespace pagoda
