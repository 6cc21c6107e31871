#pragma once
// GGUF metadata values: scalars, strings and (possibly nested) arrays, typed as in the file.

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace pagoda {

// Metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
const char* gguf_type_name(GgufType type);  // "UINT8", ..., "unknown" for ids past FLOAT64
constexpr bool gguf_type_known(uint32_t id) { return id <= uint32_t(GgufType::FLOAT64); }

// Arrays may hold arrays; deeper nesting is refused when reading and writing, so a hostile
// file cannot recurse the parser's stack away.
inline constexpr int kGgufMaxArrayDepth = 8;

struct GgufValue;

struct GgufArray {
  GgufType type = GgufType::UINT8;  // the element type, kept so that empty arrays round-trip
  std::vector<GgufValue> items;     // each of `type` (inner arrays may differ in their types)
  bool operator==(const GgufArray&) const;
};

// One metadata value: a scalar, a string or an array.
struct GgufValue {
  // The alternatives are in GgufType order, so data.index() is the type id.
  using Data = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string, GgufArray,
                            uint64_t, int64_t, double>;

  // From any value that names one alternative unambiguously: GgufValue(uint32_t(3)),
  // GgufValue(std::string("llama")), GgufValue(GgufArray{...}).
  template <class T>
  requires(!std::is_same_v<std::remove_cvref_t<T>, GgufValue> &&
           std::is_constructible_v<Data, T>) explicit GgufValue(T&& value)
      : data(std::forward<T>(value)) {}

  GgufType type() const { return static_cast<GgufType>(data.index()); }
  template <class T>
  const T* get_if() const {
    return std::get_if<T>(&data);
  }
  bool operator==(const GgufValue&) const = default;

  Data data;
};

}  // namespace pagoda
