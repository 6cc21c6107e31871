#pragma once
// How the next token is chosen from the logits. Defaults follow vLLM: plain sampling at
// temperature 1 with every filter off.

#include <cstdint>

namespace pagoda {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax, lowest id on ties)
  int32_t top_k = 0;                // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;               // keep the smallest set whose probability reaches p; 1 = off
  float min_p = 0.0f;               // drop tokens below min_p × the top probability; 0 = off
  float repetition_penalty = 1.0f;  // CTRL-style penalty on tokens already seen; 1 = off
  int32_t repetition_window = 64;   // how many of the latest tokens the penalty looks at
  uint64_t seed = 0;                // each request's generator is seeded with this

  // Throws pagoda::Error naming the first parameter out of range.
  void validate() const;
};

}  // namespace pagoda
