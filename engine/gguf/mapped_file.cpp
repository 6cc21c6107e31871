#include "engine/gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "pagoda/error.h"

namespace pagoda {

namespace {

// std::generic_category's message is thread-safe, unlike strerror.
Error os_error(const std::string& path, const char* what, int err) {
  return Error(path + ": " + what + ": " + std::generic_category().message(err));
}

// Closes the descriptor on every path out of open() that does not hand it to the MappedFile.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

// Reads the whole file into fresh anonymous pages, then makes them read-only like a mapping.
const std::byte* read_copy(const std::string& path, int fd, size_t size) {
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) throw os_error(path, "cannot allocate memory for the file", errno);
  auto* bytes = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes + done, size - done, off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::munmap(data, size);
      if (err != 0) throw os_error(path, "cannot read", err);
      throw Error(path + ": the file shrank to " + std::to_string(done) + " bytes while it was being read");
    }
    done += size_t(n);
  }
  ::mprotect(data, size, PROT_READ);
  return static_cast<const std::byte*>(data);
}

}  // namespace

MappedFile MappedFile::open(const std::string& path, Load load) {
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) throw os_error(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw os_error(path, "cannot stat", errno);
  if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory, not a file");
  if (!S_ISREG(st.st_mode)) throw Error(path + ": is not a regular file");
  const auto size = static_cast<size_t>(st.st_size);
  // mmap refuses length 0, and an empty file has nothing to map anyway.
  if (size == 0) return MappedFile(path, nullptr, 0, -1, {});
  if (load == Load::Copy) return MappedFile(path, read_copy(path, fd.fd, size), size, -1, {});
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (data == MAP_FAILED) throw os_error(path, "cannot map", errno);
  MappingGuard guard = MappingGuard::watch(data, size);
  return MappedFile(path, static_cast<const std::byte*>(data), size, fd.release(), std::move(guard));
}

void MappedFile::read(std::size_t offset, std::span<std::byte> out) const {
  if (fd_ < 0) {
    std::memcpy(out.data(), data_ + offset, out.size());
    return;
  }
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // the file is shorter now, or unreadable: its bytes are not the ones loaded
      std::memset(out.data() + done, 0, out.size() - done);
      short_read_.store(true, std::memory_order_relaxed);
      return;
    }
    done += size_t(n);
  }
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      guard_(std::move(other.guard_)),
      short_read_(other.short_read_.exchange(false)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    guard_ = std::move(other.guard_);
    short_read_.store(other.short_read_.exchange(false));
  }
  return *this;
}

MappedFile::~MappedFile() { unmap(); }

void MappedFile::unmap() noexcept {
  guard_.forget();  // first: the addresses may be mapped again once they are free
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

}  // namespace pagoda
