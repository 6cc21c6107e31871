#pragma once
// Speculative decoding: cheap guesses of the next few tokens, checked in one forward pass that
// reads the weights once. A speculating sequence feeds its last token and the k guesses as
// one entry of the step, with logits for every row; each row's token is then sampled exactly
// as plain decoding would sample it (same history, same random stream), and the guesses are
// kept while they equal what was sampled. So speculation never changes an output: the tokens,
// logprobs and finish reason are those of plain decoding, bit for bit, greedy or seeded.
// See docs/architecture.md, "Speculative decoding".

#include <cstdint>

namespace pagoda {

enum class SpeculativeMode {
  None,   // plain decoding
  Ngram,  // prompt lookup: the tokens that followed the latest match of the output's tail
  Draft,  // a smaller model with the same vocabulary (EngineConfig::draft_model_path) guesses greedily
};

struct SpeculativeParams {
  SpeculativeMode mode = SpeculativeMode::None;
  // Guesses per step: at most draft_max; a proposal shorter than draft_min is not verified
  // (llama-server's --draft-max, --draft-min). The length adapts between them to the
  // acceptance measured on this request.
  int32_t draft_max = 8;
  int32_t draft_min = 1;
  // The longest and shortest tail of the text (in tokens) the n-gram proposer looks up; the
  // longest that matches earlier in the prompt or output wins, its latest occurrence.
  int32_t ngram_max = 3;
  int32_t ngram_min = 1;
  // The draft model stops guessing at a token whose probability (its softmax's largest) is
  // below this (llama-server's --draft-p-min; llama.cpp's default is 0.75). 0: it guesses
  // up to the draft length. The n-gram proposer has no probabilities and ignores it.
  float draft_p_min = 0.0f;
  // Until 3 of a draft model's guesses for the request were accepted, it reads
  // only the context's first token (the BOS a model expects at position 0) and its last
  // draft_probe tokens, then guesses from those: a draft that guesses nothing has cost a short
  // read, not a prefill of the whole prompt. Once trusted it reads the whole context and
  // guesses from it. 0: it reads the whole context from the start.
  int32_t draft_probe = 16;

  // Throws pagoda::Error naming the first value out of range.
  void validate() const;
};

const char* speculative_mode_name(SpeculativeMode mode);

}  // namespace pagoda
