#pragma once
// Writes GGUF v3 files: metadata in the order it was set, then tensors in the order they were
// added, each tensor's data aligned to general.alignment (32 unless set as a UINT32). What it
// writes GgufFile reads back unchanged; the tests and the synthetic-model tool rely on that.
// A file too big to hold in memory (a random 8B model) is written as a stream: its tensors are
// declared up front, the header written, and each tensor's data written once it exists.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace pagoda {

class GgufTensorStream;

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

  // A tensor whose data a GgufTensorStream writes later.
  void declare_tensor(std::string name, std::vector<uint64_t> shape, GgmlType type);

  // Throws pagoda::Error naming `path` on an I/O failure, a bad general.alignment, or a
  // declared tensor (those need open_stream).
  void write(const std::string& path) const;

  // Creates `path` at its full size with the header and the added tensors' data written, and
  // returns the stream that writes each declared tensor's data. Throws as write() does.
  GgufTensorStream open_stream(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> shape;
    GgmlType type;
    uint64_t n_bytes;
    bool declared;  // its data comes through a GgufTensorStream
    std::vector<std::byte> data;
  };

  uint64_t alignment(const std::string& path) const;
  // The header padded to the alignment, and each tensor's offset in the file.
  std::string header(uint64_t alignment, std::vector<uint64_t>& offsets) const;
  void add_entry(Tensor t);

  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// The declared tensors of a file being written, each written once, in any order, at its place.
class GgufTensorStream {
 public:
  GgufTensorStream(GgufTensorStream&&) noexcept;
  GgufTensorStream& operator=(GgufTensorStream&&) noexcept;
  ~GgufTensorStream();  // closes the file; a stream not finished leaves it incomplete

  // Throws pagoda::Error for a name not declared, one already written, the wrong byte count,
  // or an I/O failure.
  void write(std::string_view name, std::span<const std::byte> data);
  // Closes the file. Throws pagoda::Error naming the first declared tensor not written, or on
  // an I/O failure.
  void finish();

 private:
  friend class GgufWriter;
  struct Slot {
    uint64_t offset;
    uint64_t n_bytes;
    bool written = false;
  };
  GgufTensorStream(std::string path, int fd, std::map<std::string, Slot, std::less<>> slots);

  std::string path_;
  int fd_ = -1;
  std::map<std::string, Slot, std::less<>> slots_;
};

}  // namespace pagoda
