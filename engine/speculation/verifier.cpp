#include "engine/speculation/verifier.h"

namespace pagoda::speculation {

void verify(SequenceSampling& s, std::span<const int32_t> guesses, std::span<const float> logits, size_t vocab,
            SampledTokens& out) {
  for (size_t j = 0; j <= guesses.size(); ++j) {
    const int32_t token = sample_next(s, logits.subspan(j * vocab, vocab), out);
    if (token < 0 || j == guesses.size() || token != guesses[j]) return;
    ++out.accepted;
  }
}

}  // namespace pagoda::speculation
