#pragma once
// Log-probabilities of a step's tokens from its raw logits (Request::logprobs): the chosen
// token's and the most likely few. A function of the row alone, computed in a fixed order, so a
// request's logprobs do not depend on the batch it ran in.

#include <cstdint>
#include <span>

#include "pagoda/request.h"

namespace pagoda {

// The largest Request::logprobs (OpenAI's top_logprobs bound).
inline constexpr int32_t kMaxTopLogprobs = 20;

// log Σ exp(logits), summed in id order in double: log softmax(logits)[i] = logits[i] − this.
double log_sum_exp(std::span<const float> logits);

// log softmax(logits)[token], and the `top` most likely tokens (most likely first, ties by id).
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top);

}  // namespace pagoda
