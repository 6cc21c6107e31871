#pragma once
// WordPiece (GGUF tokenizer.ggml.model = "bert"), as llama.cpp's llm_tokenizer_wpm: BERT's
// uncased tokenizer for BGE, E5, all-MiniLM, nomic-embed-text and jina-embeddings-v2.
//
// Preprocessing turns the text into words: each code point is replaced by the first code point
// of its canonical decomposition ("é" → "e", see wpm_decompose_first) and lower-cased;
// whitespace ends a word; control characters, NUL and ill-formed bytes are dropped;
// punctuation, ASCII symbols ($ + < = > ^ ` | ~) and CJK ideographs are words of their own.
//
// Matching: llama.cpp's converter spells a word-initial piece with "▁" (U+2581) in front and a
// continuation without the "##" Hugging Face writes ([CLS]-style tokens stay as they are). So
// each word gets a "▁" in front, and from its start the longest piece that is in the vocabulary
// is taken, again and again; if at some point no piece matches, the whole word is [UNK].

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/piece_map.h"

namespace pagoda {

class WpmTokenizer {
 public:
  // `tokens`: the vocabulary's pieces (for the longest piece's length); `unk_id`: the id of a
  // word that does not match.
  WpmTokenizer(const std::vector<std::string>& tokens, int32_t unk_id);

  // The words of `text` (any bytes), lower-cased, in order, none empty.
  static std::vector<std::string> words(std::string_view text);

  // Appends the ids of `text` to `out`.
  void encode(std::string_view text, const PieceMap& pieces, std::vector<int32_t>& out) const;

 private:
  void encode_word(const std::string& word, const PieceMap& pieces, std::vector<int32_t>& out) const;

  int32_t unk_id_;
  size_t max_piece_ = 0;  // bytes
};

}  // namespace pagoda
