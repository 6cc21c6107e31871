#pragma once
// Helpers shared by the fuzz harnesses: the loaders under test read files by path, so each
// input becomes an anonymous in-memory file (memfd) reachable as /proc/self/fd/N.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

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

// Fuzz bytes read one at a time as choices, for harnesses that build structured input (deep
// and wide, which byte flips of text rarely reach); 0 once the bytes run out.
class Choices {
 public:
  explicit Choices(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return at_ >= bytes_.size(); }
  uint8_t next() { return done() ? 0 : uint8_t(bytes_[at_++]); }
  // How many times to repeat something: mostly 1 to 8, sometimes up to 32,000 (past every
  // nesting limit).
  size_t count() {
    const uint8_t b = next();
    return b < 0xF0 ? b % 8 + 1 : size_t(b - 0xEF) * 2000;
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

// An input of two parts, the first up to its first NUL byte and the rest after it (empty when
// there is no NUL): a grammar or schema, then text to match against it.
struct TwoParts {
  std::string_view first;
  std::string_view second;
};
inline TwoParts split_at_first_nul(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = std::min(input.find('\0'), input.size());
  return {input.substr(0, split), split < input.size() ? input.substr(split + 1) : std::string_view()};
}

// For harnesses whose input is TwoParts: `check(first, second)` on the parts as written, then
// again with the first part replaced by what `generate` builds from the same bytes (a structure
// that byte flips of text rarely reach).
template <typename Check, typename Generate>
void check_written_and_generated(const uint8_t* data, size_t size, Check&& check, Generate&& generate) {
  const TwoParts parts = split_at_first_nul(data, size);
  check(parts.first, parts.second);
  check(generate(parts.first), parts.second);
}

// Data shipped beside the checkout (../shared), or "" when it is absent.
inline std::string shared_file(const char* relative) {
  const std::string path = std::string(PAGODA_SHARED_DIR) + "/" + relative;
  return access(path.c_str(), R_OK) == 0 ? path : "";
}

}  // namespace pagoda::fuzz
