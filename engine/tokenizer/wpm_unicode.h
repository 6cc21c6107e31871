#pragma once
// The Unicode facts WordPiece (WPM) preprocessing needs, as llama.cpp's tables give them
// (UnicodeData.txt 15.0; scripts/gen_wpm_unicode.py writes the data, wpm_unicode_data.inc).

#include <cstdint>

namespace pagoda {

// How llama.cpp's WPM preprocessing treats a code point (before the CJK and ASCII-symbol rules).
enum class WpmCharClass : uint8_t {
  Other,        // part of a word
  Whitespace,   // ends a word: U+0009-000D, U+0020, U+0085, U+00A0, U+1680, U+2000-200A, ...
  Control,      // dropped: general category Cc, Cf, Co or Cs
  Punctuation,  // a word of its own: general category P*
};

WpmCharClass wpm_char_class(char32_t c);

// The first code point of `c`'s canonical decomposition, decomposed again until it has none;
// `c` itself when it has none. llama.cpp keeps only this code point of the NFD form, which
// is how "é" becomes "e" (a separate combining mark in the text is kept).
char32_t wpm_decompose_first(char32_t c);

// The simple lowercase mapping of `c` (UnicodeData.txt field 13), or `c`.
char32_t wpm_lower(char32_t c);

// A CJK ideograph (llama.cpp's and Hugging Face's BERT ranges), which is a word of its own.
bool wpm_is_cjk(char32_t c);

}  // namespace pagoda
