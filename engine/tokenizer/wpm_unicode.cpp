#include "engine/tokenizer/wpm_unicode.h"

#include <algorithm>
#include <iterator>

namespace pagoda {

namespace {

struct ClassRun {
  uint32_t first;
  uint8_t cls;  // 0 other, 1 control, 2 punctuation; until the next run's first
};
struct DecompositionRange {
  uint32_t first, last, base;
};
struct LowercaseRange {
  uint32_t first, last;
  int32_t delta;
  uint32_t stride;
};

#include "engine/tokenizer/wpm_unicode_data.inc"

constexpr uint32_t kHangulFirst = 0xAC00, kHangulLast = 0xD7A3, kHangulPerLead = 21 * 28, kLeadFirst = 0x1100;

}  // namespace

WpmCharClass wpm_char_class(char32_t c) {
  // White_Space (PropList.txt), as llama.cpp lists it; every Z* code point is among them.
  static constexpr char32_t kSpaces[] = {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x2000 && c <= 0x200A) || std::ranges::find(kSpaces, c) != std::end(kSpaces)) {
    return WpmCharClass::Whitespace;
  }
  if (c > 0x10FFFF) return WpmCharClass::Other;
  const auto* run = std::upper_bound(std::begin(kClassRuns), std::end(kClassRuns), uint32_t(c),
                                     [](uint32_t v, const ClassRun& r) { return v < r.first; }) -
                    1;
  switch (run->cls) {
    case 1: return WpmCharClass::Control;
    case 2: return WpmCharClass::Punctuation;
    default: return WpmCharClass::Other;
  }
}

char32_t wpm_decompose_first(char32_t c) {
  // Hangul syllables decompose by formula (Unicode 3.12), to their leading consonant first.
  if (c >= kHangulFirst && c <= kHangulLast) return char32_t(kLeadFirst + (c - kHangulFirst) / kHangulPerLead);
  const auto* it = std::upper_bound(std::begin(kDecompositions), std::end(kDecompositions), uint32_t(c),
                                    [](uint32_t v, const DecompositionRange& r) { return v < r.first; });
  if (it == std::begin(kDecompositions)) return c;
  --it;
  return c <= it->last ? char32_t(it->base) : c;
}

char32_t wpm_lower(char32_t c) {
  const auto* it = std::upper_bound(std::begin(kLowercase), std::end(kLowercase), uint32_t(c),
                                    [](uint32_t v, const LowercaseRange& r) { return v < r.first; });
  if (it == std::begin(kLowercase)) return c;
  --it;
  if (c > it->last || (c - it->first) % it->stride != 0) return c;
  return char32_t(int64_t(c) + it->delta);
}

bool wpm_is_cjk(char32_t c) {
  // 0x2B920 rather than Unicode's 0x2B820 for the start of Extension E, as Hugging Face's
  // tokenizers (and so llama.cpp) have it.
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace pagoda
