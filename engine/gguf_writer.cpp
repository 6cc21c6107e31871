#include "engine/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <system_error>

#include "pagoda/error.h"

namespace pagoda {

static_assert(std::endian::native == std::endian::little, "GGUF is written as native little-endian bytes");

namespace {

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_value(std::string& out, const GgufValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          put_string(out, x);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          put<uint32_t>(out, uint32_t(x.type));
          put<uint64_t>(out, x.items.size());
          for (const GgufValue& item : x.items) put_value(out, item);
        } else if constexpr (std::is_same_v<T, bool>) {
          put<uint8_t>(out, x ? 1 : 0);
        } else {
          put<T>(out, x);
        }
      },
      v.data);
}

// Refuses what the reader would refuse, so every file written reads back.
void check_value(const std::string& key, const GgufValue& v, int depth) {
  const GgufArray* a = v.get_if<GgufArray>();
  if (!a) return;
  if (depth + 1 > kGgufMaxArrayDepth) {
    throw Error("GGUF key '" + key + "': arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth) + " levels");
  }
  if (uint32_t(a->type) > uint32_t(GgufType::FLOAT64)) {
    throw Error("GGUF key '" + key + "': unknown array element type " + std::to_string(uint32_t(a->type)));
  }
  for (size_t i = 0; i < a->items.size(); ++i) {
    if (a->items[i].type() != a->type) {
      throw Error("GGUF key '" + key + "': element " + std::to_string(i) + " has type " +
                  gguf_type_name(a->items[i].type()) + " in an array of " + gguf_type_name(a->type));
    }
    check_value(key, a->items[i], depth + 1);
  }
}

template <class T>
GgufArray array_of(GgufType type, std::vector<T> values) {
  GgufArray a{type, {}};
  a.items.reserve(values.size());
  for (T& v : values) a.items.emplace_back(std::move(v));
  return a;
}

uint64_t padding(uint64_t size, uint64_t alignment) { return (alignment - size % alignment) % alignment; }

// iostreams do not promise errno, so name it only when there is one.
Error io_error(const std::string& path, const char* what) {
  const int err = errno;
  return Error(path + ": " + what + (err ? ": " + std::generic_category().message(err) : std::string()));
}

}  // namespace

void GgufWriter::set_string_array(std::string key, std::vector<std::string> v) {
  set(std::move(key), GgufValue(array_of(GgufType::STRING, std::move(v))));
}

void GgufWriter::set_f32_array(std::string key, std::vector<float> v) {
  set(std::move(key), GgufValue(array_of(GgufType::FLOAT32, std::move(v))));
}

void GgufWriter::set_i32_array(std::string key, std::vector<int32_t> v) {
  set(std::move(key), GgufValue(array_of(GgufType::INT32, std::move(v))));
}

void GgufWriter::set(std::string key, GgufValue v) {
  check_value(key, v, 0);
  if (const auto it = kv_index_.find(key); it != kv_index_.end()) {
    kv_[it->second].second = std::move(v);
    return;
  }
  kv_index_.emplace(key, kv_.size());
  kv_.emplace_back(std::move(key), std::move(v));
}

void GgufWriter::add_tensor(std::string name, std::vector<uint64_t> shape, std::span<const float> data) {
  add_tensor(std::move(name), std::move(shape), GgmlType::F32, std::as_bytes(data));
}

void GgufWriter::add_tensor(std::string name, std::vector<uint64_t> shape, GgmlType type,
                            std::span<const std::byte> raw) {
  const std::string context = "GGUF tensor '" + name + "'";
  if (tensor_index_.contains(name)) throw Error(context + ": duplicate tensor name");
  const GgmlTensorSize size = ggml_tensor_size(shape, type, context);
  if (raw.size() != size.n_bytes) {
    throw Error(context + ": " + std::to_string(raw.size()) + " bytes of data, but " + ggml_type_name(type) +
                " values of this shape take " + std::to_string(size.n_bytes));
  }
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back({std::move(name), std::move(shape), type, {raw.begin(), raw.end()}});
}

void GgufWriter::write(const std::string& path) const {
  uint64_t alignment = 32;
  if (const auto it = kv_index_.find("general.alignment"); it != kv_index_.end()) {
    const uint32_t* a = kv_[it->second].second.get_if<uint32_t>();
    if (!a || !std::has_single_bit(*a)) throw Error(path + ": general.alignment must be a UINT32 power of two");
    alignment = *a;
  }

  std::string head;
  head += "GGUF";
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv_.size());
  for (const auto& [key, value] : kv_) {
    put_string(head, key);
    put<uint32_t>(head, uint32_t(value.type()));
    put_value(head, value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, uint32_t(t.shape.size()));
    for (uint64_t d : t.shape) put<uint64_t>(head, d);
    put<uint32_t>(head, uint32_t(t.type));
    put<uint64_t>(head, offset);
    offset += t.data.size() + padding(t.data.size(), alignment);
  }
  head.append(padding(head.size(), alignment), '\0');

  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw io_error(path, "cannot create");
  out.write(head.data(), std::streamsize(head.size()));
  const std::string zeros(alignment, '\0');
  for (const Tensor& t : tensors_) {
    out.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size()));
    out.write(zeros.data(), std::streamsize(padding(t.data.size(), alignment)));
  }
  out.close();
  if (!out) throw io_error(path, "cannot write");
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t magnitude = x & 0x7fffffff;
  if (magnitude > 0x7f800000) return sign | 0x7e00;   // NaN stays a (quiet) NaN
  if (magnitude >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds to infinity
  if (magnitude >= 0x38800000) {                      // >= 2^-14: a normal half
    // Rebias the exponent (127 -> 15), then round the 13 dropped bits to nearest even; a
    // carry out of the mantissa correctly bumps the exponent.
    const uint32_t rebiased = magnitude - ((127u - 15u) << 23);
    return sign | uint16_t((rebiased + 0xfff + ((rebiased >> 13) & 1)) >> 13);
  }
  // A subnormal half counts units of 2^-24; anything below 2^-25 rounds to zero.
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return sign;
  const uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
  const uint32_t shift = 126 - exponent;  // mantissa * 2^(exponent - 150) in units of 2^-24
  uint32_t h = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1))) ++h;
  return sign | uint16_t(h);
}

uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // keep NaN a quiet NaN
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

std::vector<std::byte> encode_tensor(GgmlType type, std::span<const float> values) {
  std::vector<std::byte> out(ggml_type_bytes(type, values.size()));
  auto put16 = [&](size_t at, uint16_t v) { std::memcpy(out.data() + at, &v, 2); };
  switch (type) {
    case GgmlType::F32:
      if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
      break;
    case GgmlType::F16:
      for (size_t i = 0; i < values.size(); ++i) put16(2 * i, f32_to_f16(values[i]));
      break;
    case GgmlType::BF16:
      for (size_t i = 0; i < values.size(); ++i) put16(2 * i, f32_to_bf16(values[i]));
      break;
    case GgmlType::Q8_0:
      for (size_t b = 0; b < values.size() / kQ8_0BlockElements; ++b) {
        const std::span<const float> block = values.subspan(b * kQ8_0BlockElements, kQ8_0BlockElements);
        float amax = 0.0f;
        for (float x : block) {
          if (!std::isfinite(x)) throw Error("Q8_0 cannot encode the non-finite value " + std::to_string(x));
          amax = std::max(amax, std::abs(x));
        }
        // Like ggml: quantize with the exact scale, store it rounded to f16.
        const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
        const size_t at = b * kQ8_0BlockBytes;
        put16(at, f32_to_f16(d));
        for (size_t j = 0; j < kQ8_0BlockElements; ++j) {
          out[at + 2 + j] = std::byte(static_cast<uint8_t>(static_cast<int8_t>(std::round(block[j] * inverse))));
        }
      }
      break;
  }
  return out;
}

}  // namespace pagoda
