#pragma once
// How the next token is chosen from the logits. Defaults follow vLLM: plain sampling at
// temperature 1 with every filter off. The logits are adjusted in this order: logit_bias,
// the min_tokens ban, repetition_penalty, presence and frequency penalties; then temperature
// (or argmax at 0), top-k, top-p and min-p choose the token.

#include <cstdint>
#include <utility>
#include <vector>

namespace pagoda {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax, lowest id on ties)
  int32_t top_k = 0;                // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;               // keep the smallest set whose probability reaches p; 1 = off
  float min_p = 0.0f;               // drop tokens below min_p × the top probability; 0 = off
  float repetition_penalty = 1.0f;  // CTRL-style penalty on tokens already seen; 1 = off
  int32_t repetition_window = 64;   // how many of the latest tokens the penalty looks at
  // OpenAI's penalties, over the tokens generated so far (not the prompt): a token's logit
  // loses frequency_penalty × its count and presence_penalty once if it occurs. In [-2, 2].
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // (token id, bias) added to that token's logit before anything else, greedy included:
  // -100 bans a token, 100 all but forces it. Biases in [-100, 100]; ids must be in the
  // vocabulary (checked when the request is submitted). A repeated id adds up.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // The end-of-generation tokens and the request's stop token ids cannot be drawn until this
  // many tokens have been generated (vLLM's min_tokens).
  int32_t min_tokens = 0;
  uint64_t seed = 0;  // each request's generator is seeded with this

  // Throws pagoda::Error naming the first parameter out of range.
  void validate() const;
};

}  // namespace pagoda
