#pragma once
// Small SentencePiece-style vocabularies built by hand for the tokenizer tests.

#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda::test {

// Appends a token to `v`; returns its id.
int32_t add_token(TokenizerVocab& v, std::string text, TokenType type, float score = 0.0f);

// "<0xXX>": the text of byte `b`'s token.
std::string byte_token_text(unsigned char b);

// <unk>, <s> and </s> (ids 0, 1 and 2, the vocabulary's defaults), then, when `bytes`, the
// 256 byte tokens (ids 3 to 258).
TokenizerVocab spm_vocab_base(bool bytes = true);

}  // namespace pagoda::test
