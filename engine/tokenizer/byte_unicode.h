#pragma once
// GPT-2's byte-level alphabet: every byte stands for one printable Unicode character, so byte-
// level BPE vocabularies spell arbitrary bytes as text. Printable Latin-1 bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 take U+0100, U+0101, ... in byte order
// (so ' ' is "Ġ" U+0120 and '\n' is "Ċ" U+010A).

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda {

// The UTF-8 of the character byte `b` stands for.
std::string_view byte_to_unicode(uint8_t b);

// Appends the byte-level spelling of `bytes` to `out`.
void append_byte_level(std::string_view bytes, std::string& out);

// The bytes a byte-level spelled text stands for. A character outside the alphabet (a token
// added by hand, say) is kept as its own UTF-8.
std::string decode_byte_level(std::string_view text);

}  // namespace pagoda
