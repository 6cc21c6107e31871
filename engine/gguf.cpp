#include "engine/gguf.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

#include "pagoda/error.h"

namespace pagoda {

// The file is little-endian and is read by memcpy into native integers.
static_assert(std::endian::native == std::endian::little, "pagoda reads GGUF on little-endian hosts only");

namespace {

constexpr uint32_t kMaxTypeId = 12;  // FLOAT64
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS

// The fewest bytes one encoded value of `type` can take, to bound counts by the bytes left
// before allocating anything for them.
uint64_t min_encoded_size(GgufType type) {
  switch (type) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: return 8;      // the length
    case GgufType::ARRAY: return 4 + 8;   // element type and count
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

bool is_supported(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::Q8_0: case GgmlType::BF16: return true;
  }
  return false;
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  static constexpr const char* kNames[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                           "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
  const auto id = static_cast<uint32_t>(type);
  return id <= kMaxTypeId ? kNames[id] : "unknown";
}

bool GgufArray::operator==(const GgufArray& other) const { return type == other.type && items == other.items; }

const char* ggml_type_name(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::Q8_0: return "Q8_0";
    case GgmlType::BF16: return "BF16";
  }
  return "unknown";
}

uint64_t ggml_type_bytes(GgmlType type, uint64_t n_elements) {
  uint64_t block_elements = 1, block_bytes = 0;
  switch (type) {
    case GgmlType::F32: block_bytes = 4; break;
    case GgmlType::F16: case GgmlType::BF16: block_bytes = 2; break;
    case GgmlType::Q8_0: block_elements = kQ8_0BlockElements, block_bytes = kQ8_0BlockBytes; break;
    default: throw Error("unsupported tensor type " + std::to_string(uint32_t(type)));
  }
  if (n_elements % block_elements != 0) {
    throw Error(std::string(ggml_type_name(type)) + " needs a multiple of " + std::to_string(block_elements) +
                " values, not " + std::to_string(n_elements));
  }
  const uint64_t blocks = n_elements / block_elements;
  if (blocks > UINT64_MAX / block_bytes) throw Error("tensor size overflows");
  return blocks * block_bytes;
}

GgmlTensorSize ggml_tensor_size(std::span<const uint64_t> shape, GgmlType type, const std::string& context) {
  auto error = [&](const std::string& what) { return Error(context + ": " + what); };
  if (shape.empty() || shape.size() > kMaxDims) {
    throw error("has " + std::to_string(shape.size()) + " dimensions (must be 1 to " + std::to_string(kMaxDims) + ")");
  }
  // ggml keeps element counts in int64_t.
  uint64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) throw error("dimension " + std::to_string(i) + " is 0");
    if (shape[i] > uint64_t(INT64_MAX) / n) throw error("element count overflows (too large a shape)");
    n *= shape[i];
  }
  // Quantized blocks never straddle rows.
  if (type == GgmlType::Q8_0 && shape[0] % kQ8_0BlockElements != 0) {
    throw error("Q8_0 rows must be a multiple of 32 elements, but shape[0] is " + std::to_string(shape[0]));
  }
  try {
    return {n, ggml_type_bytes(type, n)};
  } catch (const Error& e) {
    throw error(e.what());
  }
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = float(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

void dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  if (src.size() != ggml_type_bytes(type, dst.size())) {
    throw Error("dequantize: " + std::to_string(src.size()) + " bytes do not hold " + std::to_string(dst.size()) +
                " " + ggml_type_name(type) + " values");
  }
  auto u16_at = [&](size_t byte) {
    uint16_t v;
    std::memcpy(&v, src.data() + byte, 2);
    return v;
  };
  switch (type) {
    case GgmlType::F32:
      if (!dst.empty()) std::memcpy(dst.data(), src.data(), src.size());
      return;
    case GgmlType::F16:
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = f16_to_f32(u16_at(2 * i));
      return;
    case GgmlType::BF16:
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = bf16_to_f32(u16_at(2 * i));
      return;
    case GgmlType::Q8_0:
      for (size_t b = 0; b < dst.size() / kQ8_0BlockElements; ++b) {
        const size_t at = b * kQ8_0BlockBytes;
        const float d = f16_to_f32(u16_at(at));
        for (size_t j = 0; j < kQ8_0BlockElements; ++j) {
          dst[b * kQ8_0BlockElements + j] = d * float(static_cast<int8_t>(src[at + 2 + j]));
        }
      }
      return;
  }
}

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
    f_.data_offset_ = pos_ + (f_.alignment_ - pos_ % f_.alignment_) % f_.alignment_;
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
    if (id > kMaxTypeId) fail("unknown value type " + std::to_string(id));
    return static_cast<GgufType>(id);
  }

  void read_header() {
    if (bytes_.size() < 4 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
      fail("not a GGUF file (it does not start with \"GGUF\")");
    }
    pos_ = 4;
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
      fail("array of " + std::to_string(count) + " " + gguf_type_name(array.type) + " at offset " +
           std::to_string(at) + " cannot fit in the " + std::to_string(remaining()) +
           " bytes left (truncated or corrupt file)");
    }
    spend_entries(count);
    array.items.reserve(count);
    for (uint64_t i = 0; i < count; ++i) array.items.push_back(read_value(array.type, depth));
    return array;
  }

  void read_alignment() {
    const GgufValue* v = f_.find("general.alignment");
    if (!v) return;
    context_ = "key 'general.alignment'";
    const uint32_t* a = v->get_if<uint32_t>();
    if (!a) fail(std::string("has type ") + gguf_type_name(v->type()) + ", expected UINT32");
    if (!std::has_single_bit(*a)) fail(std::to_string(*a) + " is not a power of two");
    f_.alignment_ = *a;
  }

  void read_tensor_info(uint64_t index) {
    context_ = "tensor info " + std::to_string(index);
    GgufTensorInfo t;
    t.name = read_string("tensor name");
    context_ = t.name.empty() ? context_ + " (empty name)" : "tensor '" + t.name + "'";
    if (f_.tensor_index_.contains(t.name)) fail("duplicate tensor name");
    const uint32_t n_dims = read<uint32_t>("dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      fail("has " + std::to_string(n_dims) + " dimensions (must be 1 to " + std::to_string(kMaxDims) + ")");
    }
    t.shape.resize(n_dims);
    for (uint64_t& d : t.shape) d = read<uint64_t>("dimension");
    const uint32_t type = read<uint32_t>("tensor type");
    if (!is_supported(type)) {
      fail("unsupported tensor type " + std::to_string(type) + " (pagoda reads F32, F16, BF16 and Q8_0)");
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
    const uint64_t data_size = f_.data_offset_ <= bytes_.size() ? bytes_.size() - f_.data_offset_ : 0;
    for (const GgufTensorInfo& t : f_.tensors_) {
      if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
        fail("tensor '" + t.name + "': data at offset " + std::to_string(t.offset) + " (" + std::to_string(t.n_bytes) +
             " bytes) runs past the end of the file (the data section holds " + std::to_string(data_size) + " bytes)");
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

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f(MappedFile::open(path));
  GgufParser(f).parse();
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(kv_.size());
  for (const auto& kv : kv_) out.push_back(kv.first);
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  // open() checked this file's tensors; this guards against an info from another file.
  const uint64_t data_size = file_.bytes().size() - std::min<uint64_t>(data_offset_, file_.bytes().size());
  if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
    throw Error(path() + ": tensor '" + t.name + "' is not in this file");
  }
  return file_.bytes().subspan(data_offset_ + t.offset, t.n_bytes);
}

std::vector<float> GgufFile::read_f32(const GgufTensorInfo& t) const {
  const std::span<const std::byte> bytes = tensor_bytes(t);
  std::vector<float> out(t.n_elements);
  try {
    dequantize(t.type, bytes, out);
  } catch (const Error& e) {
    throw Error(path() + ": tensor '" + t.name + "': " + e.what());
  }
  return out;
}

namespace {

// Any GGUF integer, widened: `bits` is the value, two's complement when negative.
struct WideInt {
  bool negative;
  uint64_t bits;
  std::string str() const { return negative ? std::to_string(int64_t(bits)) : std::to_string(bits); }
};

std::optional<WideInt> as_integer(const GgufValue& v) {
  return std::visit(
      [](const auto& x) -> std::optional<WideInt> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool> || !std::is_integral_v<T>) {
          return std::nullopt;
        } else if constexpr (std::is_signed_v<T>) {
          return WideInt{x < 0, uint64_t(int64_t(x))};
        } else {
          return WideInt{false, uint64_t(x)};
        }
      },
      v.data);
}

std::string type_of(const GgufValue& v) {
  if (const GgufArray* a = v.get_if<GgufArray>()) return std::string("ARRAY of ") + gguf_type_name(a->type);
  return gguf_type_name(v.type());
}

// Converts values for the getters. `element` is the array index being converted, if any;
// it is spelled out only when an error needs it.
class Converter {
 public:
  using Element = std::optional<size_t>;

  Converter(const std::string& path, std::string_view key) : path_(path), key_(key) {}

  [[noreturn]] void fail(const std::string& what, Element element = {}) const {
    const std::string where = element ? " element " + std::to_string(*element) : "";
    throw Error(path_ + ": key '" + std::string(key_) + "'" + where + " " + what);
  }

  uint64_t to_uint(const GgufValue& v) const {
    const std::optional<WideInt> i = as_integer(v);
    if (!i) fail("has type " + type_of(v) + ", expected an unsigned integer");
    if (i->negative) fail("is " + i->str() + ", expected a non-negative integer");
    return i->bits;
  }

  float to_float(const GgufValue& v, Element element = {}) const {
    if (const float* f = v.get_if<float>()) return *f;
    if (const double* d = v.get_if<double>()) {
      if (std::isfinite(*d) && std::abs(*d) > double(FLT_MAX)) {
        fail("is " + std::to_string(*d) + ", out of range for float", element);
      }
      return float(*d);
    }
    if (const std::optional<WideInt> i = as_integer(v)) return i->negative ? float(int64_t(i->bits)) : float(i->bits);
    fail("has type " + type_of(v) + ", expected a number", element);
  }

  int32_t to_int32(const GgufValue& v, Element element) const {
    const std::optional<WideInt> i = as_integer(v);
    if (!i) fail("has type " + type_of(v) + ", expected an integer", element);
    const bool fits = i->negative ? int64_t(i->bits) >= INT32_MIN : i->bits <= uint64_t(INT32_MAX);
    if (!fits) fail("is " + i->str() + ", out of range for int32", element);
    return int32_t(int64_t(i->bits));
  }

  std::string to_string(const GgufValue& v, Element element = {}) const {
    const std::string* s = v.get_if<std::string>();
    if (!s) fail("has type " + type_of(v) + ", expected STRING", element);
    return *s;
  }

  bool to_bool(const GgufValue& v) const {
    const bool* b = v.get_if<bool>();
    if (!b) fail("has type " + type_of(v) + ", expected BOOL");
    return *b;
  }

  template <class T, class Convert>
  std::vector<T> map_array(const GgufValue& v, Convert convert) const {
    const GgufArray* a = v.get_if<GgufArray>();
    if (!a) fail("has type " + type_of(v) + ", expected an array");
    std::vector<T> out;
    out.reserve(a->items.size());
    for (size_t i = 0; i < a->items.size(); ++i) out.push_back(convert(a->items[i], i));
    return out;
  }

 private:
  const std::string& path_;
  std::string_view key_;
};

}  // namespace

const GgufValue& GgufFile::require(std::string_view key) const {
  if (const GgufValue* v = find(key)) return *v;
  throw Error(path() + ": key '" + std::string(key) + "' is missing");
}

uint64_t GgufFile::get_uint(std::string_view key) const { return Converter(path(), key).to_uint(require(key)); }

std::optional<uint64_t> GgufFile::get_uint_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? std::optional(Converter(path(), key).to_uint(*v)) : std::nullopt;
}

float GgufFile::get_float(std::string_view key) const { return Converter(path(), key).to_float(require(key)); }

std::optional<float> GgufFile::get_float_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? std::optional(Converter(path(), key).to_float(*v)) : std::nullopt;
}

std::string GgufFile::get_string(std::string_view key) const { return Converter(path(), key).to_string(require(key)); }

std::optional<std::string> GgufFile::get_string_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? std::optional(Converter(path(), key).to_string(*v)) : std::nullopt;
}

std::optional<bool> GgufFile::get_bool_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? std::optional(Converter(path(), key).to_bool(*v)) : std::nullopt;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const Converter c(path(), key);
  return c.map_array<std::string>(require(key), [&](const GgufValue& v, size_t i) { return c.to_string(v, i); });
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const Converter c(path(), key);
  return c.map_array<float>(require(key), [&](const GgufValue& v, size_t i) { return c.to_float(v, i); });
}

std::vector<int32_t> GgufFile::get_int32_array(std::string_view key) const {
  const Converter c(path(), key);
  return c.map_array<int32_t>(require(key), [&](const GgufValue& v, size_t i) { return c.to_int32(v, i); });
}

}  // namespace pagoda
