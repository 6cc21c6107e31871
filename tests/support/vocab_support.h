#pragma once
// Small SentencePiece-style vocabularies built by hand for the tokenizer tests.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda::test {

// Appends a token to `v`; returns its id.
int32_t add_token(TokenizerVocab& v, std::string text, TokenType type, float score = 0.0f);

// "<0xXX>": the text of byte `b`'s token.
std::string byte_token_text(unsigned char b);

// <unk>, <s> and </s> (ids 0, 1 and 2, the vocabulary's defaults), then, when `bytes`, the
// 256 byte tokens (ids 3 to 258).
TokenizerVocab spm_vocab_base(bool bytes = true);

// SentencePiece's escaped space, "▁".
inline const std::string kEscapedSpace = "\xE2\x96\x81";

// <unk> <s> </s>, the 256 byte tokens (when `bytes`), then `pieces` (spaces written as ' ',
// stored as "▁" when `escaped`).
TokenizerVocab make_vocab(const std::vector<std::pair<std::string, float>>& pieces, bool escaped = true,
                          bool bytes = true);

// Merges in BPE order (best score first): " hello" = " " + (he + (ll + o)), " world" =
// ((" " + w) + (o + r)) + (l + d).
inline const std::vector<std::pair<std::string, float>> kWords = {
    {" ", 0},   {"h", 0},   {"e", 0},     {"l", 0},    {"o", 0},        {"w", 0},      {"r", 0},
    {"d", 0},   {"!", 0},   {"ll", -1},   {"llo", -2}, {"he", -3},      {"hello", -4}, {" hello", -5},
    {"or", -6}, {" w", -7}, {" wor", -8}, {"ld", -9},  {" world", -10}, {" h", -11},
};

// The id of `piece` written with plain spaces ("▁" where the vocabulary escapes them); a test
// failure when the vocabulary has no such piece.
int32_t id_of(const Tokenizer& tok, const std::string& piece);

}  // namespace pagoda::test
