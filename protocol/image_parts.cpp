#include "protocol/image_parts.h"

#include <array>
#include <cctype>
#include <cstdint>
#include <random>

#include "pagoda/error.h"
#include "protocol/json_fields.h"

namespace pagoda::chat {

namespace {

using protocol::quoted;

// Each base64 character's 6 bits; -1 for anything else.
constexpr std::array<int8_t, 256> kBase64 = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int8_t i = 0; i < 64; ++i) t[uint8_t(alphabet[i])] = i;
  return t;
}();

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(uint8_t(s[i])) != prefix[i]) return false;
  }
  return true;
}

}  // namespace

std::string ChatImages::random_image_marker() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::mt19937_64 bits((uint64_t(device()) << 32) ^ device());
  uint64_t v = bits();
  std::string marker = "<__image_";
  for (int i = 0; i < 16; ++i, v >>= 4) marker += kHex[v & 15];
  return marker + "__>";
}

std::string decode_base64(std::string_view text, const std::string& path) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int8_t v = kBase64[uint8_t(c)];
    if (v < 0 || padding > 0) {
      throw Error(quoted(path) + " is not base64: " + (padding > 0 ? "data after the padding" : "a character") +
                  " at offset " + std::to_string(i));
    }
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  // Leftover bits past the last whole byte: 2 or 4 of them, and at most two '='.
  if (bits >= 6 || padding > 2) throw Error(quoted(path) + " is not base64: it ends in the middle of a byte");
  return out;
}

std::string image_url_bytes(std::string_view url, const std::string& path) {
  if (starts_with_ci(url, "http://") || starts_with_ci(url, "https://") || starts_with_ci(url, "file:") ||
      starts_with_ci(url, "ftp://")) {
    throw Error(quoted(path) +
                " is a remote URL: pagoda fetches no images over the network; send the image inline as a data "
                "URL (data:image/png;base64,...)");
  }
  if (!starts_with_ci(url, "data:")) {
    throw Error(quoted(path) + " must be a data URL (data:image/png;base64,...)");
  }
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) throw Error(quoted(path) + " is a data URL without data (no ',')");
  const std::string_view header = url.substr(5, comma - 5);  // media type and parameters
  if (header.size() < 7 || !starts_with_ci(header.substr(header.size() - 7), ";base64")) {
    throw Error(quoted(path) + " must be base64 (data:image/...;base64,...)");
  }
  const std::string_view media = header.substr(0, header.find(';'));
  if (!media.empty() && !starts_with_ci(media, "image/") && !starts_with_ci(media, "application/octet-stream")) {
    throw Error(quoted(path) + " has the media type " + std::string(media) + ", not an image");
  }
  return decode_base64(url.substr(comma + 1), path);
}

}  // namespace pagoda::chat
