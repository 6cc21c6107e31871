#pragma once
// GGUF model files (llama.cpp's format; spec: ggml/docs/gguf.md), versions 2 and 3,
// little-endian: typed metadata and tensors read in place from a memory-mapped file (or, with
// MappedFile::Load::Copy, from a private copy of it).
//
// GgufFile::open validates the whole file before returning, so a GgufFile that exists never
// reads out of bounds: every count, length, shape, offset and type is checked against the
// file, and every problem is a pagoda::Error "<path>: <what is wrong>".

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "engine/gguf/gguf_value.h"
#include "engine/gguf/mapped_file.h"

namespace pagoda {

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
  // Maps (or reads), parses and validates `path`. Throws pagoda::Error "<path>: <what is
  // wrong>", also when the file was truncated while it was being parsed.
  static GgufFile open(const std::string& path, MappedFile::Load load = MappedFile::Load::Map);

  const std::string& path() const { return file_.path(); }
  const MappedFile& file() const { return file_; }
  // Throws pagoda::Error when the file was truncated under the mapping (MappedFile::lost):
  // what was read from it since it was opened may be zeros. Readers call it when done.
  void check_intact() const;
  uint32_t version() const { return version_; }          // 2 or 3
  uint64_t alignment() const { return alignment_; }      // general.alignment, or 32
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
  std::vector<float> get_float_array(std::string_view key) const;    // numeric elements
  std::vector<int32_t> get_int32_array(std::string_view key) const;  // integer elements

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
  const GgufTensorInfo* find_tensor(std::string_view name) const;          // nullptr if absent
  // The tensor's bytes inside the mapping, valid as long as this GgufFile.
  std::span<const std::byte> tensor_bytes(const GgufTensorInfo& t) const;
  // The tensor's values dequantized to f32.
  std::vector<float> read_f32(const GgufTensorInfo& t) const;

 private:
  explicit GgufFile(MappedFile file) : file_(std::move(file)) {}
  friend class GgufParser;
  const GgufValue& require(std::string_view key) const;
  // Bytes from the start of the data section to the end of the file (0 if it starts past it).
  uint64_t data_size() const;
  bool holds(const GgufTensorInfo& t) const;  // whether t's bytes lie inside the data section

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 0;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace pagoda
