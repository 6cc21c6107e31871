#pragma once
// Byte-level BPE (GGUF tokenizer.ggml.model = "gpt2"), as llama.cpp's llm_tokenizer_bpe: the
// text is split by the vocabulary's pre-tokenizer, each piece is spelled in GPT-2's byte
// alphabet, and within each piece the adjacent pair with the lowest merge rank (ties: the
// leftmost) is merged again and again until no pair has a merge. A priority queue of candidate
// merges, invalidated lazily, keeps a piece of n bytes at O(n log n).
//
// Merges are kept by the ids of their halves; the loader checks that both halves and the
// result are tokens, so every symbol is always a token (or, for a lone byte whose character
// is no token, dropped as llama.cpp drops it).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/piece_map.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace pagoda {

class BpeTokenizer {
 public:
  // `pre`: tokenizer.ggml.pre; `merges`: tokenizer.ggml.merges ("left right", best first);
  // `pieces`: the vocabulary's spelling → id. Throws pagoda::Error naming the key (and the
  // merge) for an unknown pre-tokenizer or a merge that is malformed or names no token.
  BpeTokenizer(const std::string& pre, const std::vector<std::string>& merges, const PieceMap& pieces);

  // Appends the ids of `text` (any bytes; ill-formed UTF-8 is repaired as llama.cpp does,
  // see well_formed_utf8) to `out`.
  void encode(std::string_view text, const PieceMap& pieces, std::vector<int32_t>& out) const;

  const PreTokenizer& pre_tokenizer() const { return pre_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  void encode_piece(std::string_view piece, const PieceMap& pieces, std::vector<int32_t>& out) const;

  PreTokenizer pre_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) → rank and result
  std::array<int32_t, 256> byte_ids_{};         // each byte's one-character token, or -1
};

}  // namespace pagoda
