#include "engine/gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <utility>

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
  const GgmlTensorSize size = ggml_tensor_size(shape, type, context);
  if (raw.size() != size.n_bytes) {
    throw Error(context + ": " + std::to_string(raw.size()) + " bytes of data, but " + ggml_type_name(type) +
                " values of this shape take " + std::to_string(size.n_bytes));
  }
  add_entry({std::move(name), std::move(shape), type, size.n_bytes, false, {raw.begin(), raw.end()}});
}

void GgufWriter::declare_tensor(std::string name, std::vector<uint64_t> shape, GgmlType type) {
  const GgmlTensorSize size = ggml_tensor_size(shape, type, "GGUF tensor '" + name + "'");
  add_entry({std::move(name), std::move(shape), type, size.n_bytes, true, {}});
}

void GgufWriter::add_entry(Tensor t) {
  if (tensor_index_.contains(t.name)) throw Error("GGUF tensor '" + t.name + "': duplicate tensor name");
  tensor_index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
}

uint64_t GgufWriter::alignment(const std::string& path) const {
  const auto it = kv_index_.find(kGgufAlignmentKey);
  return gguf_alignment(it == kv_index_.end() ? nullptr : &kv_[it->second].second, path);
}

std::string GgufWriter::header(uint64_t alignment, std::vector<uint64_t>& offsets) const {
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
  offsets.clear();
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, uint32_t(t.shape.size()));
    for (uint64_t d : t.shape) put<uint64_t>(head, d);
    put<uint32_t>(head, uint32_t(t.type));
    put<uint64_t>(head, offset);
    offsets.push_back(offset);
    offset += t.n_bytes + gguf_padding(t.n_bytes, alignment);
  }
  head.append(gguf_padding(head.size(), alignment), '\0');
  for (uint64_t& o : offsets) o += head.size();
  return head;
}

void GgufWriter::write(const std::string& path) const {
  for (const Tensor& t : tensors_) {
    if (t.declared) throw Error(path + ": tensor '" + t.name + "' is declared: write it with open_stream");
  }
  const uint64_t align = alignment(path);
  std::vector<uint64_t> offsets;
  const std::string head = header(align, offsets);

  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw io_error(path, "cannot create");
  out.write(head.data(), std::streamsize(head.size()));
  const std::string zeros(align, '\0');
  for (const Tensor& t : tensors_) {
    out.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size()));
    out.write(zeros.data(), std::streamsize(gguf_padding(t.data.size(), align)));
  }
  out.close();
  if (!out) throw io_error(path, "cannot write");
}

namespace {

void pwrite_all(int fd, const std::string& path, const std::byte* data, uint64_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t done = ::pwrite(fd, data, std::min<uint64_t>(n, uint64_t(1) << 30), off_t(offset));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) throw io_error(path, "cannot write");
    data += done, n -= uint64_t(done), offset += uint64_t(done);
  }
}

}  // namespace

GgufTensorStream GgufWriter::open_stream(const std::string& path) const {
  const uint64_t align = alignment(path);
  std::vector<uint64_t> offsets;
  const std::string head = header(align, offsets);
  uint64_t end = head.size();
  for (size_t i = 0; i < tensors_.size(); ++i) end = offsets[i] + tensors_[i].n_bytes;

  errno = 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error(path, "cannot create");
  std::map<std::string, GgufTensorStream::Slot, std::less<>> slots;
  GgufTensorStream stream(path, fd, {});
  // Sized up front: the padding between tensors reads as the zeros it must be.
  if (::ftruncate(fd, off_t(end)) != 0) throw io_error(path, "cannot size");
  pwrite_all(fd, path, reinterpret_cast<const std::byte*>(head.data()), head.size(), 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.declared) {
      slots.emplace(t.name, GgufTensorStream::Slot{offsets[i], t.n_bytes});
    } else {
      pwrite_all(fd, path, t.data.data(), t.data.size(), offsets[i]);
    }
  }
  stream.slots_ = std::move(slots);
  return stream;
}

GgufTensorStream::GgufTensorStream(std::string path, int fd, std::map<std::string, Slot, std::less<>> slots)
    : path_(std::move(path)), fd_(fd), slots_(std::move(slots)) {}

GgufTensorStream::GgufTensorStream(GgufTensorStream&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), slots_(std::move(o.slots_)) {}

GgufTensorStream& GgufTensorStream::operator=(GgufTensorStream&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    slots_ = std::move(o.slots_);
  }
  return *this;
}

GgufTensorStream::~GgufTensorStream() {
  if (fd_ >= 0) ::close(fd_);
}

void GgufTensorStream::write(std::string_view name, std::span<const std::byte> data) {
  const std::string context = path_ + ": tensor '" + std::string(name) + "'";
  if (fd_ < 0) throw Error(context + ": the stream is finished");
  const auto it = slots_.find(name);
  if (it == slots_.end()) throw Error(context + ": not declared");
  Slot& slot = it->second;
  if (slot.written) throw Error(context + ": written twice");
  if (data.size() != slot.n_bytes) {
    throw Error(context + ": " + std::to_string(data.size()) + " bytes of data, declared " +
                std::to_string(slot.n_bytes));
  }
  pwrite_all(fd_, path_, data.data(), data.size(), slot.offset);
  slot.written = true;
}

void GgufTensorStream::finish() {
  for (const auto& [name, slot] : slots_) {
    if (!slot.written) throw Error(path_ + ": tensor '" + name + "' was declared but never written");
  }
  errno = 0;
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0) throw io_error(path_, "cannot write");
}

}  // namespace pagoda
