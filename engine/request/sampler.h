#pragma once
// Turns one row of logits into a token. Each request owns a Sampler, so its random stream is
// its own and the same seed gives the same tokens whatever else shares the batch.

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "pagoda/sampling.h"

namespace pagoda {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // validates the params

  // Picks the next token. `history` is every token of the sequence so far (prompt and output),
  // which the repetition penalty looks at. `logits` is not modified.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  struct Candidate {
    int32_t id;
    float value;  // a logit, then a probability
  };

  float uniform();  // in [0, 1), the same sequence on every platform for a given seed
  // Puts the n most likely candidates first, in order.
  template <typename Less>
  void order_prefix(size_t n, const Less& less);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;
};

// Index of the largest value; the lowest index on ties.
int32_t argmax(std::span<const float> values);

}  // namespace pagoda
