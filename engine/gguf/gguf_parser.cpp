// GgufFile::open: the bounds-checked parse and validation of a whole file.
#include "engine/gguf/gguf.h"

#include <algorithm>
#include <cstring>

#include "engine/gguf/gguf_format.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// The fewest bytes one encoded value of `type` can take, to bound counts by the bytes left
// before allocating anything for them.
uint64_t min_encoded_size(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL: return 1;
    case GgufType::UINT16:
    case GgufType::INT16: return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32: return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64: return 8;
    case GgufType::STRING: return 8;     // the length
    case GgufType::ARRAY: return 4 + 8;  // element type and count
  }
  return 1;
}

// A metadata entry is at least a key length, a value type and a one-byte value; a tensor info
// at least a name length, n_dims, one dimension, the type and the offset.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// Each metadata entry, array element and tensor costs tens of bytes in memory however few it
// takes in the file (a UINT8 element: 1 byte on disk, 40 as a GgufValue), so a hostile file
// could exhaust memory within the bounds above. Real models have well under a million.
constexpr uint64_t kMaxEntries = uint64_t(1) << 24;

}  // namespace

// Reads the file front to back through a bounds-checked cursor and fills a GgufFile.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& f) : f_(f), bytes_(f.file_.bytes()) {}

  void parse() {
    read_header();
    f_.kv_.reserve(n_kv_);
    for (uint64_t i = 0; i < n_kv_; ++i) read_kv(i);
    read_alignment();
    f_.tensors_.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) read_tensor_info(i);
    context_.clear();
    f_.data_offset_ = pos_ + gguf_padding(pos_, f_.alignment_);
    check_tensor_placement();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(f_.path() + ": " + (context_.empty() ? "" : context_ + ": ") + what);
  }

  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <class T>
  T read(const char* what) {
    if (sizeof(T) > remaining()) {
      fail("file is truncated: " + std::string(what) + " at offset " + std::to_string(pos_) + " needs " +
           std::to_string(sizeof(T)) + " bytes, " + std::to_string(remaining()) + " left");
    }
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const char* what) {
    const uint64_t at = pos_;
    const uint64_t length = read<uint64_t>(what);
    if (length > remaining()) {
      fail(std::string(what) + " at offset " + std::to_string(at) + " has string length " + std::to_string(length) +
           ", past the end of the file (" + std::to_string(remaining()) + " bytes left)");
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return s;
  }

  void spend_entries(uint64_t n) {
    if (n > entries_left_) {
      fail("more than " + std::to_string(kMaxEntries) + " metadata values and tensors in all (pagoda's limit)");
    }
    entries_left_ -= n;
  }

  GgufType read_type(const char* what) {
    const uint32_t id = read<uint32_t>(what);
    if (!gguf_type_known(id)) fail("unknown value type " + std::to_string(id));
    return static_cast<GgufType>(id);
  }

  void read_header() {
    if (bytes_.size() < kGgufMagic.size() || std::memcmp(bytes_.data(), kGgufMagic.data(), kGgufMagic.size()) != 0) {
      fail("not a GGUF file (it does not start with \"GGUF\")");
    }
    pos_ = kGgufMagic.size();
    const uint32_t version = read<uint32_t>("version");
    if (version == 1) {
      fail("GGUF version 1 is not supported (only versions 2 and 3); re-convert the model with a current llama.cpp");
    }
    // A big-endian file's small version number reads as a multiple of 2^16 here.
    if (version > 0xffff && (version & 0xffff) == 0) {
      fail("looks like a big-endian GGUF file (version field reads " + std::to_string(version) +
           "); only little-endian files are supported");
    }
    if (version != 2 && version != 3) fail("unsupported GGUF version " + std::to_string(version) + " (only 2 and 3)");
    f_.version_ = version;
    n_tensors_ = read<uint64_t>("tensor count");
    n_kv_ = read<uint64_t>("metadata count");
    if (n_kv_ > remaining() / kMinKvBytes) {
      fail("metadata key-value count " + std::to_string(n_kv_) + " cannot fit in the " + std::to_string(remaining()) +
           " bytes left (truncated or corrupt file)");
    }
    if (n_tensors_ > remaining() / kMinTensorInfoBytes) {
      fail("tensor count " + std::to_string(n_tensors_) + " cannot fit in the " + std::to_string(remaining()) +
           " bytes left (truncated or corrupt file)");
    }
    spend_entries(n_kv_ + n_tensors_);
  }

  void read_kv(uint64_t index) {
    context_ = "metadata entry " + std::to_string(index);
    std::string key = read_string("key");
    context_ = key.empty() ? context_ + " (empty key)" : "key '" + key + "'";
    if (f_.kv_index_.contains(key)) fail("duplicate key");
    const GgufType type = read_type("value type");
    GgufValue value = read_value(type, 0);
    f_.kv_index_.emplace(key, f_.kv_.size());
    f_.kv_.emplace_back(std::move(key), std::move(value));
  }

  GgufValue read_value(GgufType type, int depth) {
    switch (type) {
      case GgufType::UINT8: return GgufValue(read<uint8_t>("UINT8 value"));
      case GgufType::INT8: return GgufValue(read<int8_t>("INT8 value"));
      case GgufType::UINT16: return GgufValue(read<uint16_t>("UINT16 value"));
      case GgufType::INT16: return GgufValue(read<int16_t>("INT16 value"));
      case GgufType::UINT32: return GgufValue(read<uint32_t>("UINT32 value"));
      case GgufType::INT32: return GgufValue(read<int32_t>("INT32 value"));
      case GgufType::FLOAT32: return GgufValue(read<float>("FLOAT32 value"));
      case GgufType::UINT64: return GgufValue(read<uint64_t>("UINT64 value"));
      case GgufType::INT64: return GgufValue(read<int64_t>("INT64 value"));
      case GgufType::FLOAT64: return GgufValue(read<double>("FLOAT64 value"));
      case GgufType::STRING: return GgufValue(read_string("string value"));
      case GgufType::BOOL: {
        const uint8_t b = read<uint8_t>("BOOL value");
        if (b > 1) fail("bool value is " + std::to_string(b) + " (must be 0 or 1)");
        return GgufValue(b == 1);
      }
      case GgufType::ARRAY: return GgufValue(read_array(depth + 1));
    }
    fail("unknown value type " + std::to_string(uint32_t(type)));
  }

  GgufArray read_array(int depth) {
    if (depth > kGgufMaxArrayDepth) fail("arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth) + " levels");
    GgufArray array{read_type("array element type"), {}};
    const uint64_t at = pos_;
    const uint64_t count = read<uint64_t>("array length");
    if (count > remaining() / min_encoded_size(array.type)) {
      fail("array of " + std::to_string(count) + " " + gguf_type_name(array.type) + " at offset " + std::to_string(at) +
           " cannot fit in the " + std::to_string(remaining()) + " bytes left (truncated or corrupt file)");
    }
    spend_entries(count);
    array.items.reserve(count);
    for (uint64_t i = 0; i < count; ++i) array.items.push_back(read_value(array.type, depth));
    return array;
  }

  void read_alignment() { f_.alignment_ = gguf_alignment(f_.find(kGgufAlignmentKey), f_.path()); }

  void read_tensor_info(uint64_t index) {
    context_ = "tensor info " + std::to_string(index);
    GgufTensorInfo t;
    t.name = read_string("tensor name");
    context_ = t.name.empty() ? context_ + " (empty name)" : "tensor '" + t.name + "'";
    if (f_.tensor_index_.contains(t.name)) fail("duplicate tensor name");
    const uint32_t n_dims = read<uint32_t>("dimension count");
    ggml_check_n_dims(n_dims, f_.path() + ": " + context_);  // before sizing the shape by it
    t.shape.resize(n_dims);
    for (uint64_t& d : t.shape) d = read<uint64_t>("dimension");
    const uint32_t type = read<uint32_t>("tensor type");
    if (!ggml_type_supported(type)) {
      fail("unsupported tensor type " + ggml_type_id_string(type) +
           " (pagoda reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K)");
    }
    t.type = static_cast<GgmlType>(type);
    t.offset = read<uint64_t>("tensor offset");
    const auto [n_elements, n_bytes] = ggml_tensor_size(t.shape, t.type, f_.path() + ": " + context_);
    t.n_elements = n_elements;
    t.n_bytes = n_bytes;
    if (t.offset % f_.alignment_ != 0) {
      fail("offset " + std::to_string(t.offset) + " is misaligned (not a multiple of the alignment " +
           std::to_string(f_.alignment_) + ")");
    }
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
  }

  void check_tensor_placement() {
    for (const GgufTensorInfo& t : f_.tensors_) {
      if (!f_.holds(t)) {
        fail("tensor '" + t.name + "': data at offset " + std::to_string(t.offset) + " (" + std::to_string(t.n_bytes) +
             " bytes) runs past the end of the file (the data section holds " + std::to_string(f_.data_size()) +
             " bytes)");
      }
    }
    std::vector<const GgufTensorInfo*> by_offset;
    by_offset.reserve(f_.tensors_.size());
    for (const GgufTensorInfo& t : f_.tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensorInfo& a = *by_offset[i - 1];
      const GgufTensorInfo& b = *by_offset[i];
      if (a.offset + a.n_bytes > b.offset) fail("tensors '" + a.name + "' and '" + b.name + "' overlap");
    }
  }

  GgufFile& f_;
  std::span<const std::byte> bytes_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0, n_kv_ = 0;
  uint64_t entries_left_ = kMaxEntries;
  std::string context_;  // which entry is being read, for error messages
};

GgufFile GgufFile::open(const std::string& path, MappedFile::Load load) {
  GgufFile f(MappedFile::open(path, load));
  GgufParser(f).parse();
  f.check_intact();
  return f;
}
}  // namespace pagoda
