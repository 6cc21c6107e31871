#include "engine/tokenizer/wpm_tokenizer.h"

#include <algorithm>

#include "engine/tokenizer/wpm_unicode.h"
#include "engine/util/utf8.h"

namespace pagoda {

namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // "▁" U+2581
constexpr char32_t kDropped = 0xFFFD;

// The code point at text[i], advancing i, decoded as leniently as llama.cpp's
// unicode_cpt_from_utf8 (overlong forms and surrogates decode; their category decides). A byte
// that starts no complete sequence is skipped alone and gives U+FFFD, which is dropped; so is
// anything past U+10FFFF, on which llama.cpp throws.
char32_t next_code_point(std::string_view text, size_t& i) {
  const auto b = static_cast<unsigned char>(text[i]);
  size_t len;
  char32_t c;
  if (b < 0x80) {
    ++i;
    return b;
  } else if ((b & 0xE0) == 0xC0) {
    len = 2, c = b & 0x1F;
  } else if ((b & 0xF0) == 0xE0) {
    len = 3, c = b & 0x0F;
  } else if ((b & 0xF8) == 0xF0) {
    len = 4, c = b & 0x07;
  } else {
    ++i;  // a continuation byte out of place, or F8..FF
    return kDropped;
  }
  if (text.size() - i < len) {
    ++i;
    return kDropped;
  }
  for (size_t k = 1; k < len; ++k) {
    const auto cb = static_cast<unsigned char>(text[i + k]);
    if ((cb & 0xC0) != 0x80) {
      ++i;
      return kDropped;
    }
    c = (c << 6) | (cb & 0x3F);
  }
  i += len;
  return c > 0x10FFFF ? kDropped : c;
}

// Calls word(std::string&&) for each word of `text`, in order.
template <typename F>
void for_each_word(std::string_view text, F&& word) {
  std::string current;
  auto finish = [&] {
    if (!current.empty()) word(std::move(current));
    current.clear();
  };
  for (size_t i = 0; i < text.size();) {
    const char32_t c = wpm_decompose_first(next_code_point(text, i));
    const WpmCharClass cls = wpm_char_class(c);
    if (cls == WpmCharClass::Whitespace) {
      finish();
      continue;
    }
    if (c == 0 || c == kDropped || cls == WpmCharClass::Control) continue;
    const char32_t lower = wpm_lower(c);
    // Surrogates are Control, so what is left is a scalar value append_utf8 accepts.
    const bool alone = cls == WpmCharClass::Punctuation ||
                       (c < 0x7F && (c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '`' ||
                                     c == '|' || c == '~')) ||
                       wpm_is_cjk(c);
    if (alone) {
      finish();
      append_utf8(lower, current);
      finish();
    } else {
      append_utf8(lower, current);
    }
  }
  finish();
}

}  // namespace

WpmTokenizer::WpmTokenizer(const std::vector<std::string>& tokens, int32_t unk_id) : unk_id_(unk_id) {
  for (const std::string& t : tokens) max_piece_ = std::max(max_piece_, t.size());
}

std::vector<std::string> WpmTokenizer::words(std::string_view text) {
  std::vector<std::string> out;
  for_each_word(text, [&](std::string&& w) { out.push_back(std::move(w)); });
  return out;
}

void WpmTokenizer::encode(std::string_view text, const PieceMap& pieces, std::vector<int32_t>& out) const {
  std::string word;
  for_each_word(text, [&](std::string&& w) {
    word.assign(kWordStart);
    word += w;
    encode_word(word, pieces, out);
  });
}

// Greedy longest match from the word's start, byte by byte as llama.cpp does it: a piece may
// end anywhere, but only pieces that are whole UTF-8 text exist, so only whole characters match.
void WpmTokenizer::encode_word(const std::string& word, const PieceMap& pieces, std::vector<int32_t>& out) const {
  const size_t start = out.size();
  const std::string_view w(word);
  for (size_t i = 0; i < w.size();) {
    size_t j = std::min(w.size(), i + max_piece_);
    for (; j > i; --j) {
      auto it = pieces.find(w.substr(i, j - i));
      if (it != pieces.end()) {
        out.push_back(it->second);
        break;
      }
    }
    if (j == i) {  // nothing matches here: the word is unknown
      out.resize(start);
      out.push_back(unk_id_);
      return;
    }
    i = j;
  }
}

}  // namespace pagoda
