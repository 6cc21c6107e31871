#pragma once
// GGUF model files (llama.cpp's format; spec: ggml/docs/gguf.md), versions 2 and 3,
// little-endian: typed metadata and tensors read in place from a memory-mapped file.
//
// GgufFile::open validates the whole file before returning, so a GgufFile that exists never
// reads out of bounds: every count, length, shape, offset and type is checked against the
// file, and every problem is a pagoda::Error "<path>: <what is wrong>".

#include <bit>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "engine/mapped_file.h"

namespace pagoda {

// Metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_type_name(GgufType type);  // "UINT8", ..., "unknown" for ids past FLOAT64

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
  using Data = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                            std::string, GgufArray, uint64_t, int64_t, double>;

  // From any value that names one alternative unambiguously: GgufValue(uint32_t(3)),
  // GgufValue(std::string("llama")), GgufValue(GgufArray{...}).
  template <class T>
    requires(!std::is_same_v<std::remove_cvref_t<T>, GgufValue> && std::is_constructible_v<Data, T>)
  explicit GgufValue(T&& value) : data(std::forward<T>(value)) {}

  GgufType type() const { return static_cast<GgufType>(data.index()); }
  template <class T>
  const T* get_if() const { return std::get_if<T>(&data); }
  bool operator==(const GgufValue&) const = default;

  Data data;
};

// Tensor element types pagoda reads, numbered as ggml's; a file with any other type is refused.
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q8_0 = 8, BF16 = 30 };
const char* ggml_type_name(GgmlType type);  // "F32", "F16", "Q8_0", "BF16"

// Q8_0 packs 32 values as an f16 scale d and 32 int8 q: value = d * q.
inline constexpr uint64_t kQ8_0BlockElements = 32;
inline constexpr uint64_t kQ8_0BlockBytes = 2 + 32;

// Bytes that `n_elements` values of `type` take. Throws pagoda::Error when n_elements is not
// a whole number of blocks or the size overflows.
uint64_t ggml_type_bytes(GgmlType type, uint64_t n_elements);

struct GgmlTensorSize {
  uint64_t n_elements;
  uint64_t n_bytes;
};
// Validates a tensor shape as GGUF stores it (1 to 4 dimensions, none 0, no overflow, rows of
// whole Q8_0 blocks) and returns its sizes. Throws pagoda::Error "<context>: <problem>".
GgmlTensorSize ggml_tensor_size(std::span<const uint64_t> shape, GgmlType type, const std::string& context);

// Half-precision to float, exact for every input (subnormals, infinities, NaN included).
float f16_to_f32(uint16_t h);
// bfloat16 is the upper half of a float.
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// Decodes `dst.size()` values of `type` from `src`, which must hold exactly that many.
void dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> shape;  // GGUF order: shape[0] is the innermost (contiguous) dimension
  GgmlType type;
  uint64_t offset;  // from the start of the data section; a multiple of the alignment
  uint64_t n_elements;
  uint64_t n_bytes;
};

class GgufFile {
 public:
  // Maps, parses and validates `path`. Throws pagoda::Error "<path>: <what is wrong>".
  static GgufFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }      // 2 or 3
  uint64_t alignment() const { return alignment_; }  // general.alignment, or 32
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts

  // The value of `key`, or nullptr when the file has no such key.
  const GgufValue* find(std::string_view key) const;
  std::vector<std::string> keys() const;  // in file order

  // Typed getters. A missing key (for the non-_opt forms), a value of the wrong type or one
  // out of the result's range throws pagoda::Error naming the file and the key.
  uint64_t get_uint(std::string_view key) const;  // any integer type, >= 0
  std::optional<uint64_t> get_uint_opt(std::string_view key) const;
  float get_float(std::string_view key) const;  // FLOAT32, FLOAT64 or any integer type
  std::optional<float> get_float_opt(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::optional<std::string> get_string_opt(std::string_view key) const;
  std::optional<bool> get_bool_opt(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;      // numeric elements
  std::vector<int32_t> get_int32_array(std::string_view key) const;    // integer elements

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
  const GgufTensorInfo* find_tensor(std::string_view name) const;           // nullptr if absent
  // The tensor's bytes inside the mapping, valid as long as this GgufFile.
  std::span<const std::byte> tensor_bytes(const GgufTensorInfo& t) const;
  // The tensor's values dequantized to f32.
  std::vector<float> read_f32(const GgufTensorInfo& t) const;

 private:
  explicit GgufFile(MappedFile file) : file_(std::move(file)) {}
  friend class GgufParser;
  const GgufValue& require(std::string_view key) const;

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace pagoda
