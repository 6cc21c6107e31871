#pragma once
// Helpers shared by the fuzz harnesses: the loaders under test read files by path, so each
// input becomes an anonymous in-memory file (memfd) reachable as /proc/self/fd/N.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "pagoda/error.h"

namespace pagoda::fuzz {

class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : fd_(memfd_create("pagoda-fuzz", 0)) {
    if (fd_ < 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += size_t(n);
    }
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// Runs `body`, accepting pagoda::Error (a clear refusal is the right answer to bad bytes);
// anything else escapes and the fuzzer reports it.
template <typename F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const pagoda::Error&) {
  }
}

// Data shipped beside the checkout (../shared), or "" when it is absent.
inline std::string shared_file(const char* relative) {
  const std::string path = std::string(PAGODA_SHARED_DIR) + "/" + relative;
  return access(path.c_str(), R_OK) == 0 ? path : "";
}

}  // namespace pagoda::fuzz
