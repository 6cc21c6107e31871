#pragma once
// A whole file mapped read-only into memory, so model weights are read in place and paged in
// by the OS on demand instead of being copied. Move-only; unmaps on destruction.
//
// The mapping assumes nobody truncates the file while it is open (that would turn reads past
// the new end into SIGBUS, as for any mmap reader).

#include <cstddef>
#include <span>
#include <string>
#include <utility>

namespace pagoda {

class MappedFile {
 public:
  // Maps the regular file at `path`. Throws pagoda::Error naming the path when it is
  // missing, unreadable, a directory or otherwise not a regular file. An empty file gives an
  // empty span.
  static MappedFile open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const std::byte* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void unmap() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pagoda
