#include "engine/gguf/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "engine/gguf/gguf_format.h"
#include "pagoda/error.h"

namespace pagoda {

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
  if (!gguf_type_known(uint32_t(a->type))) {
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
  const auto alignment_kv = kv_index_.find(kGgufAlignmentKey);
  const uint64_t alignment =
      gguf_alignment(alignment_kv == kv_index_.end() ? nullptr : &kv_[alignment_kv->second].second, path);

  std::string head(kGgufMagic);
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
    offset += t.data.size() + gguf_padding(t.data.size(), alignment);
  }
  head.append(gguf_padding(head.size(), alignment), '\0');

  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw io_error(path, "cannot create");
  out.write(head.data(), std::streamsize(head.size()));
  const std::string zeros(alignment, '\0');
  for (const Tensor& t : tensors_) {
    out.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size()));
    out.write(zeros.data(), std::streamsize(gguf_padding(t.data.size(), alignment)));
  }
  out.close();
  if (!out) throw io_error(path, "cannot write");
}

}  // namespace pagoda
