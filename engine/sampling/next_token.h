#pragma once
// One sequence's next token from one row of logits: how every decode samples, and how
// speculation's verifier samples each of its rows (engine/speculation/verifier.h). The
// constraint's budget is set, the token drawn with the sequence's own Sampler, appended to its
// history and told to the constraint, and its logprobs are kept when asked, in that order, so a
// sequence samples the same tokens however its rows are batched.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling/sampler.h"
#include "engine/sampling/token_constraint.h"
#include "pagoda/request.h"

namespace pagoda {

// What sampling reads and writes of one sequence.
struct SequenceSampling {
  Sampler& sampler;
  std::vector<int32_t>& tokens;  // the prompt, then the output: each drawn token is appended
  size_t prompt_len;
  std::span<const int32_t> ending_ids;  // banned before min_tokens (Sampler::sample)
  TokenConstraint* constraint;          // null when nothing constrains the output
  int32_t max_new_tokens;
  int32_t logprobs;  // Request::logprobs: -1 for none
};

// The tokens one step sampled for one sequence, appended to its tokens.
struct SampledTokens {
  int32_t sampled = 0;                  // how many were appended
  int32_t accepted = 0;                 // of the step's guesses, how many the sampled tokens matched
  std::vector<TokenLogprobs> logprobs;  // one per sampled token, when the sequence asks for them

  void clear() {
    sampled = 0;
    accepted = 0;
    logprobs.clear();
  }
};

// Draws the next token from `row`, appends it to s.tokens and counts it in `out`. Returns it, or
// -1 (appended too) when the constraint allows nothing: the output cannot go on.
int32_t sample_next(SequenceSampling& s, std::span<const float> row, SampledTokens& out);

}  // namespace pagoda
