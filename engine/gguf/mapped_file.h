#pragma once
// A whole file's bytes in memory, read-only. Move-only; unmaps on destruction.
//
// Two ways in (MappedFile::Load):
// - Map: the file is memory-mapped (MAP_PRIVATE), so model weights are read in place and
//   paged in by the OS on demand instead of being copied. Reading a page past the file's end
//   raises SIGBUS, so a file truncated while mapped would kill the process; the mapping is
//   therefore guarded (mapping_guard.h): such a fault turns the bytes into zeros and sets
//   lost(), and the owner must fail whatever it computed from them.
// - Copy: the file is read into anonymous memory this object owns (llama.cpp's --no-mmap), so
//   whatever happens to the file afterwards has no effect. Costs the file's size in RSS.

#include <atomic>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "engine/gguf/mapping_guard.h"

namespace pagoda {

class MappedFile {
 public:
  enum class Load { Map, Copy };

  // Maps (or reads) the regular file at `path`. Throws pagoda::Error naming the path when it
  // is missing, unreadable, a directory or otherwise not a regular file, or (Copy) when it
  // cannot be read whole. An empty file gives an empty span.
  static MappedFile open(const std::string& path, Load load = Load::Map);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  // Whether the file was truncated under the mapping and its bytes now read as zeros (or
  // read() found it shorter). Never true for a Copy.
  bool lost() const { return guard_.lost() || short_read_.load(std::memory_order_relaxed); }
  // Copies out.size() bytes of the file from `offset` (inside bytes()) into `out`. From a
  // mapping it reads the file (pread) rather than the mapped pages, so nothing is mapped into
  // the process: no page fault — costly on virtual machines — and no page left resident, for
  // small reads scattered over a large tensor that is read nowhere else (the token embedding's
  // rows). A file now shorter than that gives zeros and sets lost(). Thread-safe.
  void read(std::size_t offset, std::span<std::byte> out) const;
  // Whether the bytes are the file's own pages (Load::Map): the OS may drop them
  // (MADV_DONTNEED) and read them again from the file. A Copy's pages would come back as zeros.
  bool maps_file() const { return fd_ >= 0; }

 private:
  MappedFile(std::string path, const std::byte* data, size_t size, int fd, MappingGuard guard)
      : path_(std::move(path)), data_(data), size_(size), fd_(fd), guard_(std::move(guard)) {}
  void unmap() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // the mapped file, open for read(); -1 for a Copy
  MappingGuard guard_;
  mutable std::atomic<bool> short_read_{false};
};

}  // namespace pagoda
