// UTF-8 decoding and the few Unicode character properties Python's str methods need.
#include "engine/jinja/utf8.h"

#include "engine/util/utf8.h"

namespace pagoda::jinja::utf8 {

namespace {

// Length of the sequence starting with `lead`, or 0 when `lead` cannot start one.
int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

bool valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const int n = sequence_length(lead);
    if (n == 0 || i + n > s.size()) return false;
    char32_t c = n == 1 ? lead : lead & (0xFF >> (n + 1));
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      c = (c << 6) | (b & 0x3F);
    }
    if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    int n = sequence_length(lead);
    if (n == 0 || i + n > s.size()) n = 1;  // not reached for valid text; keeps going on bad bytes
    char32_t c = n == 1 ? lead : lead & (0xFF >> (n + 1));
    for (int k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += n;
  }
  return out;
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(c, out);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c == 0xB5) return 0x39C;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    // Pairs are (upper, lower); in these two runs the lower case letter has the even code point.
    const bool lower_is_even = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (lower_is_even ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    return c;
  }
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x3B1 && c <= 0x3C9) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    // Pairs are (upper, lower); in these two runs the lower case letter has the even code point.
    const bool lower_is_even = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (lower_is_even ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c; }

std::string upper(std::string_view s) {
  std::u32string cs = decode(s);
  for (char32_t& c : cs) c = to_upper(c);
  return encode(cs);
}

std::string lower(std::string_view s) {
  std::u32string cs = decode(s);
  for (char32_t& c : cs) c = to_lower(c);
  return encode(cs);
}

}  // namespace pagoda::jinja::utf8
