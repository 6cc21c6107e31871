#include "engine/tokenizer/byte_unicode.h"

#include <array>

namespace pagoda {

namespace {

std::string utf8_of(uint32_t cpt) {
  std::string s;
  if (cpt < 0x80) {
    s += char(cpt);
  } else {  // the alphabet stays below U+0800
    s += char(0xC0 | (cpt >> 6));
    s += char(0x80 | (cpt & 0x3F));
  }
  return s;
}

bool stands_for_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Alphabet {
  std::array<std::string, 256> spelling;  // byte → UTF-8 of its character
  std::array<int16_t, 0x200> byte_of;     // character (< U+0200) → byte, or -1
  Alphabet() {
    byte_of.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = stands_for_itself(b) ? uint32_t(b) : next++;
      spelling[size_t(b)] = utf8_of(cpt);
      byte_of[cpt] = int16_t(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string_view byte_to_unicode(uint8_t b) { return alphabet().spelling[b]; }

void append_byte_level(std::string_view bytes, std::string& out) {
  const Alphabet& a = alphabet();
  for (char c : bytes) out += a.spelling[static_cast<unsigned char>(c)];
}

std::string decode_byte_level(std::string_view text) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char b0 = static_cast<unsigned char>(text[i]);
    uint32_t cpt = 0x200;  // outside the alphabet unless decoded below
    size_t len = 1;
    if (b0 < 0x80) {
      cpt = b0;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      cpt = (uint32_t(b0 & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      len = 2;
    } else {
      while (i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80) ++len;
    }
    if (cpt < a.byte_of.size() && a.byte_of[cpt] >= 0) {
      out += char(a.byte_of[cpt]);
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace pagoda
