// GgufFile's accessors and typed getters over a file that GgufFile::open (gguf_parser.cpp)
// has already validated.
#include "engine/gguf/gguf.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "pagoda/error.h"

namespace pagoda {

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

void GgufFile::check_intact() const {
  if (file_.lost()) {
    throw Error(path() + ": the file changed while it was mapped (truncated?); what was read from it is lost");
  }
}

uint64_t GgufFile::data_size() const {
  return file_.bytes().size() - std::min<uint64_t>(data_offset_, file_.bytes().size());
}

bool GgufFile::holds(const GgufTensorInfo& t) const {
  return t.offset <= data_size() && t.n_bytes <= data_size() - t.offset;
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  // open() checked this file's tensors; this guards against an info from another file.
  if (!holds(t)) throw Error(path() + ": tensor '" + t.name + "' is not in this file");
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
