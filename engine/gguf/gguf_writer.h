#pragma once
// Writes GGUF v3 files: metadata in the order it was set, then tensors in the order they were
// added, each tensor's data aligned to general.alignment (32 unless set as a UINT32). What it
// writes GgufFile reads back unchanged; the tests and the synthetic-model tool rely on that.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace pagoda {

class GgufWriter {
 public:
  // Setting a key that is already set replaces its value in place.
  void set_u32(std::string key, uint32_t v) { set(std::move(key), GgufValue(v)); }
  void set_i32(std::string key, int32_t v) { set(std::move(key), GgufValue(v)); }
  void set_u64(std::string key, uint64_t v) { set(std::move(key), GgufValue(v)); }
  void set_f32(std::string key, float v) { set(std::move(key), GgufValue(v)); }
  void set_bool(std::string key, bool v) { set(std::move(key), GgufValue(v)); }
  void set_string(std::string key, std::string v) { set(std::move(key), GgufValue(std::move(v))); }
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_f32_array(std::string key, std::vector<float> v);
  void set_i32_array(std::string key, std::vector<int32_t> v);
  // Any value, nested arrays included. Throws pagoda::Error for an array whose items are not
  // all of its element type, or nested deeper than kGgufMaxArrayDepth.
  void set(std::string key, GgufValue v);

  // An F32 tensor; `shape` in GGUF order (shape[0] innermost).
  void add_tensor(std::string name, std::vector<uint64_t> shape, std::span<const float> data);
  // A tensor already encoded as `type` (see encode_tensor in ggml_types.h).
  void add_tensor(std::string name, std::vector<uint64_t> shape, GgmlType type, std::span<const std::byte> raw);

  // Throws pagoda::Error naming `path` on an I/O failure or a bad general.alignment.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> shape;
    GgmlType type;
    std::vector<std::byte> data;
  };

  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace pagoda
