#include "support/vocab_support.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <utility>

namespace pagoda::test {

int32_t add_token(TokenizerVocab& v, std::string text, TokenType type, float score) {
  v.tokens.push_back(std::move(text));
  v.scores.push_back(score);
  v.types.push_back(type);
  return int32_t(v.tokens.size() - 1);
}

std::string byte_token_text(unsigned char b) {
  char text[8];
  std::snprintf(text, sizeof text, "<0x%02X>", b);
  return text;
}

TokenizerVocab spm_vocab_base(bool bytes) {
  TokenizerVocab v;
  add_token(v, "<unk>", TokenType::Unknown);
  add_token(v, "<s>", TokenType::Control);
  add_token(v, "</s>", TokenType::Control);
  if (bytes) {
    for (int b = 0; b < 256; ++b) add_token(v, byte_token_text(static_cast<unsigned char>(b)), TokenType::Byte);
  }
  return v;
}

TokenizerVocab make_vocab(const std::vector<std::pair<std::string, float>>& pieces, bool escaped, bool bytes) {
  TokenizerVocab v = spm_vocab_base(bytes);
  for (const auto& [text, score] : pieces) {
    std::string t;
    for (char c : text) t += (c == ' ' && escaped) ? kEscapedSpace : std::string(1, c);
    add_token(v, std::move(t), TokenType::Normal, score);
  }
  v.space_marker = escaped ? SpaceMarker::Escaped : SpaceMarker::Space;
  return v;
}

int32_t id_of(const Tokenizer& tok, const std::string& piece) {
  const std::string space = tok.vocab().space_marker == SpaceMarker::Escaped ? kEscapedSpace : " ";
  std::string text;
  for (char c : piece) text += c == ' ' ? space : std::string(1, c);
  const int32_t id = tok.find_piece(text);
  EXPECT_GE(id, 0) << "no piece \"" << piece << "\"";
  return id;
}

}  // namespace pagoda::test
