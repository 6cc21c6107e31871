#include "support/vocab_support.h"

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

}  // namespace pagoda::test
