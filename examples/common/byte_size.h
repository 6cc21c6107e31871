#pragma once
// A flag's byte count: plain bytes or a number with a binary suffix, K, M, G or T (1G = 2^30),
// as du and llama.cpp's size flags write them.

#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

#include "pagoda/error.h"

namespace pagoda::cli {

inline uint64_t parse_byte_size(const std::string& flag, const std::string& text) {
  const auto fail = [&]() -> uint64_t {
    throw Error(flag + " needs a byte count such as 1073741824, 512M or 16G (K, M, G, T: powers of 1024), got '" +
                text + "'");
  };
  uint64_t count = 0;
  const char* const end = text.data() + text.size();
  const auto [rest, ec] = std::from_chars(text.data(), end, count);
  if (ec != std::errc() || rest == text.data()) return fail();
  if (rest == end) return count;
  if (rest + 1 != end) return fail();
  int shift = 0;
  switch (std::toupper(static_cast<unsigned char>(*rest))) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: return fail();
  }
  if (count > std::numeric_limits<uint64_t>::max() >> shift) return fail();
  return count << shift;
}

}  // namespace pagoda::cli
