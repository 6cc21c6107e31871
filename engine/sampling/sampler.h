#pragma once
// Turns one row of logits into a token. Each request owns a Sampler, so its random stream is
// its own and the same seed gives the same tokens whatever else shares the batch.

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "pagoda/sampling.h"

namespace pagoda {

// The tokens a constraint (a request's grammar) allows at this step. The sampler asks only what
// it needs: greedy decoding tests its argmax alone and builds the whole mask only when the
// argmax is refused.
class TokenFilter {
 public:
  virtual ~TokenFilter() = default;
  virtual bool allows(int32_t token) = 0;
  // Bit i set: token i is allowed. Valid until the filter's state changes.
  virtual std::span<const uint64_t> mask() = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // validates the params

  // Picks the next token. `history` is every token of the sequence so far, the prompt's first
  // `prompt_len` then the output: the repetition penalty looks at its tail, the presence and
  // frequency penalties and min_tokens at the output. `ending_ids` are the tokens that would
  // end the output (banned while it is shorter than min_tokens). With a `filter`, only tokens
  // it allows are drawn (applied before the adjustments' top-k, top-p and min-p, so they choose
  // among allowed tokens); -1 when it allows none. `logits` is not modified.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, size_t prompt_len = 0,
                 std::span<const int32_t> ending_ids = {}, TokenFilter* filter = nullptr);

 private:
  struct Candidate {
    int32_t id;
    float value;  // a logit, then a probability
  };

  float uniform();  // in [0, 1), the same sequence on every platform for a given seed
  // Applies logit_bias, the min_tokens ban and the penalties to candidates_.
  void adjust(std::span<const int32_t> history, size_t prompt_len, std::span<const int32_t> ending_ids);
  // Puts the n most likely candidates first, in order.
  template <typename Less>
  void order_prefix(size_t n, const Less& less);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;
  std::vector<int32_t> output_ids_;  // scratch: the output, sorted, for counting
};

// Index of the largest value; the lowest index on ties.
int32_t argmax(std::span<const float> values);

}  // namespace pagoda
