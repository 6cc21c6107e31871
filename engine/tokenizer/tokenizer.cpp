#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>

#include "engine/tokenizer/byte_unicode.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // "▁" U+2581
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";   // U+FFFD

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte a "<0xXX>" piece stands for, or -1.
int byte_piece_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Length of the UTF-8 character that starts with `b`, by its lead byte alone, as llama.cpp's
// unicode_len_utf8 (a stray continuation or invalid byte is a character of its own).
size_t utf8_len(unsigned char b) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[b >> 4];
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

std::string describe_piece(const std::string& t) {
  std::string out = "\"";
  for (unsigned char c : t) {
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out + "\"";
}

}  // namespace

Tokenizer::Tokenizer(TokenizerVocab vocab) : vocab_(std::move(vocab)) {
  const size_t n = vocab_.tokens.size();
  if (n == 0) throw Error("tokenizer: the vocabulary is empty");
  if (n > size_t(std::numeric_limits<int32_t>::max())) throw Error("tokenizer: the vocabulary is too large");
  if (vocab_.scores.size() != n || vocab_.types.size() != n) {
    throw Error("tokenizer: " + std::to_string(n) + " tokens but " + std::to_string(vocab_.scores.size()) +
                " scores and " + std::to_string(vocab_.types.size()) + " token types");
  }
  auto check_id = [&](int32_t id, const char* what) {
    if (id < 0 || size_t(id) >= n) {
      throw Error(std::string("tokenizer: ") + what + " " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(n) + " tokens");
    }
  };
  check_id(vocab_.bos_id, "BOS id");
  check_id(vocab_.eos_id, "EOS id");
  if (vocab_.model != TokenizerModel::Spm && vocab_.model != TokenizerModel::Bpe &&
      vocab_.model != TokenizerModel::Wpm) {
    throw Error("tokenizer: unknown tokenizer model " + std::to_string(int32_t(vocab_.model)));
  }
  const bool bpe = vocab_.model == TokenizerModel::Bpe;
  const bool wpm = vocab_.model == TokenizerModel::Wpm;
  if (!(bpe && vocab_.unk_id == -1)) check_id(vocab_.unk_id, "unknown-token id");
  if (wpm) check_id(vocab_.sep_id, "separator id");
  for (auto [id, what] : {std::pair{vocab_.eot_id, "EOT id"},
                          {vocab_.eom_id, "EOM id"},
                          {vocab_.fim_pad_id, "FIM pad id"},
                          {vocab_.fim_rep_id, "FIM repository id"},
                          {vocab_.fim_sep_id, "FIM separator id"}}) {
    if (id != -1) check_id(id, what);
  }
  for (size_t i = 0; i < n; ++i) {
    if (vocab_.types[i] < TokenType::Normal || vocab_.types[i] > TokenType::Byte) {
      throw Error("tokenizer: token " + std::to_string(i) + " has unknown token type " +
                  std::to_string(int32_t(vocab_.types[i])));
    }
  }
  apply_special_token_overrides(vocab_);
  special_ = SpecialTokenSplitter(vocab_);
  eog_ids_ = end_of_generation_ids(vocab_);

  if (vocab_.space_marker == SpaceMarker::Auto) {
    size_t escaped = 0, plain = 0;
    for (const std::string& t : vocab_.tokens) {
      escaped += t.find(kEscapedSpace) != std::string::npos;
      plain += t.find(' ') != std::string::npos;
    }
    vocab_.space_marker = escaped > plain ? SpaceMarker::Escaped : SpaceMarker::Space;
  } else if (vocab_.space_marker != SpaceMarker::Space && vocab_.space_marker != SpaceMarker::Escaped) {
    throw Error("tokenizer: unknown space marker " + std::to_string(int32_t(vocab_.space_marker)));
  }
  space_ = vocab_.space_marker == SpaceMarker::Escaped ? std::string(kEscapedSpace) : std::string(" ");

  piece_to_id_.reserve(n);
  output_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = vocab_.tokens[i];
    if (std::isnan(vocab_.scores[i])) throw Error("tokenizer: token " + std::to_string(i) + " has a NaN score");
    piece_to_id_[t] = int32_t(i);  // a duplicate spelling maps to its last id, as in llama.cpp
    switch (vocab_.types[i]) {
      case TokenType::Normal: {
        std::string out = bpe ? decode_byte_level(t) : t;
        if (!bpe && vocab_.space_marker == SpaceMarker::Escaped) replace_all(out, kEscapedSpace, " ");
        output_[i] = std::move(out);
        break;
      }
      case TokenType::UserDefined:
        output_[i] = t;  // verbatim, as llama.cpp
        break;
      case TokenType::Unknown:
      case TokenType::Control:
      case TokenType::Unused: break;  // decode to nothing
      case TokenType::Byte: {
        const int b = byte_piece_value(t);
        if (b < 0) {
          throw Error("tokenizer: token " + std::to_string(i) + " has type Byte but is spelled " + describe_piece(t) +
                      ", not <0xXX>");
        }
        output_[i] = std::string(1, char(b));
        break;
      }
    }
  }

  // Byte fallback: "<0xXX>", else a piece that is the byte itself, else <unk> (llama.cpp's
  // byte_to_token, which throws where we fall back to <unk>).
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    int32_t id = find_piece(name);
    if (id < 0) id = find_piece(std::string(1, char(b)));
    byte_ids_[size_t(b)] = id < 0 ? vocab_.unk_id : id;
  }
  if (bpe) bpe_ = std::make_shared<const BpeTokenizer>(vocab_.pre, vocab_.merges, piece_to_id_);
  if (wpm) wpm_ = std::make_shared<const WpmTokenizer>(vocab_.tokens, vocab_.unk_id);
}

int32_t Tokenizer::find_piece(std::string_view piece) const {
  auto it = piece_to_id_.find(piece);
  return it == piece_to_id_.end() ? -1 : it->second;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  return encode_fragments(special_.split(text, parse_special), add_bos);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, std::span<const TextSpan> data) const {
  return encode_fragments(special_.split(text, true, data), add_bos);
}

std::vector<int32_t> Tokenizer::encode_fragments(const std::vector<Fragment>& fragments, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos) out.push_back(vocab_.bos_id);
  bool after_special = true;  // the text start counts as following a special token
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      if (bpe_) {
        bpe_->encode(f.text, piece_to_id_, out);
      } else if (wpm_) {
        wpm_->encode(f.text, piece_to_id_, out);
      } else {
        encode_spm(f.text, after_special && vocab_.add_space_prefix, out);
      }
      after_special = false;
    }
  }
  if (add_bos && wpm_) out.push_back(vocab_.sep_id);  // llama.cpp's add_special brackets WPM text
  return out;
}

// SentencePiece BPE of one text fragment (non-empty), appended to `out`.
void Tokenizer::encode_spm(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const {
  // The text in the vocabulary's spelling, with the dummy prefix.
  std::string s;
  if (vocab_.space_marker == SpaceMarker::Escaped) {
    s.reserve(text.size() + text.size() / 4 + 3);
    if (space_prefix) s += kEscapedSpace;
    for (char c : text) {
      if (c == ' ') {
        s += kEscapedSpace;
      } else {
        s += c;
      }
    }
  } else {
    s.reserve(text.size() + 1);
    if (space_prefix) s += ' ';
    s += text;
  }
  if (s.size() >= size_t(std::numeric_limits<int32_t>::max())) throw Error("tokenizer: text too long to encode");

  // Symbols: a doubly linked list of spans of `s`, one UTF-8 character each to begin with.
  struct Symbol {
    int32_t prev, next;
    size_t off, n;  // n == 0: merged into its left neighbour
  };
  std::vector<Symbol> sym;
  sym.reserve(s.size());
  for (size_t off = 0; off < s.size();) {
    const size_t len = std::min(s.size() - off, utf8_len(static_cast<unsigned char>(s[off])));
    const int32_t i = int32_t(sym.size());
    sym.push_back({i - 1, i + 1, off, len});
    off += len;
  }
  sym.back().next = -1;

  // Candidate merges, best first: highest score, then leftmost. Entries go stale when either
  // side changes; they are recognised (a side is gone or has grown) and skipped when popped.
  struct Bigram {
    float score;
    int32_t left, right;
    size_t size;
  };
  struct Worse {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };
  std::vector<Bigram> storage;
  storage.reserve(sym.size());
  std::priority_queue<Bigram, std::vector<Bigram>, Worse> queue(Worse{}, std::move(storage));
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view piece(s.data() + sym[size_t(left)].off, sym[size_t(left)].n + sym[size_t(right)].n);
    auto it = piece_to_id_.find(piece);
    if (it == piece_to_id_.end()) return;
    queue.push({vocab_.scores[size_t(it->second)], left, right, piece.size()});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(int32_t(i - 1), int32_t(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = sym[size_t(b.left)];
    Symbol& right = sym[size_t(b.right)];
    if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;  // stale
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) sym[size_t(right.next)].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  // Each surviving span is a piece, or (a character outside the vocabulary) its bytes.
  for (int32_t i = 0; i >= 0; i = sym[size_t(i)].next) {
    const std::string_view piece(s.data() + sym[size_t(i)].off, sym[size_t(i)].n);
    auto it = piece_to_id_.find(piece);
    if (it != piece_to_id_.end()) {
      out.push_back(it->second);
    } else {
      for (char c : piece) out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    }
  }
}

std::string Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary of " +
                std::to_string(vocab_size()) + " tokens");
  }
  return output_[size_t(id)];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const { return decode(ids, vocab_.add_space_prefix); }

std::string Tokenizer::decode(std::span<const int32_t> ids, bool strip_leading_space) const {
  StreamDecoder d(*this, strip_leading_space);
  std::string out;
  for (int32_t id : ids) out += d.feed(id);
  out += d.flush();
  return out;
}

StreamDecoder::StreamDecoder(const Tokenizer& tok) : StreamDecoder(tok, tok.add_space_prefix()) {}

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool strip_leading_space)
    : tok_(&tok), strip_(strip_leading_space), strip_pending_(strip_leading_space) {}

std::string StreamDecoder::feed(int32_t id) {
  if (id < 0 || id >= tok_->vocab_size()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary of " +
                std::to_string(tok_->vocab_size()) + " tokens");
  }
  std::string_view piece = tok_->output_[size_t(id)];
  if (strip_pending_ && !piece.empty()) {
    if (piece.front() == ' ') piece.remove_prefix(1);
    strip_pending_ = false;
  }
  if (strip_ && id == tok_->bos_id()) strip_pending_ = true;
  pending_.append(piece);
  return drain(false);
}

std::string StreamDecoder::flush() { return drain(true); }

// Moves the decidable prefix of pending_ out as well-formed UTF-8. Each maximal ill-formed
// subpart becomes one U+FFFD (the Unicode "best practice"). A well-formed but incomplete
// sequence at the end stays pending unless `final`.
std::string StreamDecoder::drain(bool final) {
  std::string out;
  const std::string& p = pending_;
  const size_t n = p.size();
  size_t i = 0;
  out.reserve(n);
  while (i < n) {
    const unsigned char b = static_cast<unsigned char>(p[i]);
    if (b < 0x80) {
      out += char(b);
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b == 0xE0) {
      len = 3, lo = 0xA0;  // no overlongs
    } else if (b >= 0xE1 && b <= 0xEC) {
      len = 3;
    } else if (b == 0xED) {
      len = 3, hi = 0x9F;  // no surrogates
    } else if (b >= 0xEE && b <= 0xEF) {
      len = 3;
    } else if (b == 0xF0) {
      len = 4, lo = 0x90;  // no overlongs
    } else if (b >= 0xF1 && b <= 0xF3) {
      len = 4;
    } else if (b == 0xF4) {
      len = 4, hi = 0x8F;  // nothing past U+10FFFF
    } else {
      out += kReplacement;  // a continuation byte out of place, C0, C1, F5..FF
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      const unsigned char c = static_cast<unsigned char>(p[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) break;
    }
    if (k == len) {
      out.append(p, i, len);
      i += len;
    } else if (i + k == n) {  // a good start that the bytes so far do not finish
      if (!final) break;
      out += kReplacement;
      i = n;
    } else {
      out += kReplacement;
      i += k;
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace pagoda
