#include "engine/speculation/proposer.h"

#include <algorithm>

#include "engine/speculation/ngram_proposer.h"

namespace pagoda::speculation {

int32_t propose(SpeculationState& spec, std::span<const int32_t> tokens, int32_t limit, int32_t tokens_left) {
  spec.rows.clear();
  spec.draft_wanted = 0;
  if (!spec.enabled() || limit <= 0) return 0;
  // The last sampled token is fed either way, and the bonus token after an accepted run
  // counts against max_new_tokens like the guesses.
  const int32_t k = std::min({spec.length.next(), limit, tokens_left - 1});
  if (k <= 0) return 0;
  spec.rows.push_back(tokens.back());
  switch (spec.params.mode) {
    case SpeculativeMode::Ngram:
      propose_ngram(tokens, spec.params.ngram_max, spec.params.ngram_min, k, spec.rows);
      break;
    case SpeculativeMode::Draft: spec.draft_wanted = k; return k;
    case SpeculativeMode::None: break;
  }
  drop_short_guess(spec);
  return int32_t(spec.guesses().size());
}

void drop_short_guess(SpeculationState& spec) {
  if (int32_t(spec.guesses().size()) < std::max(spec.params.draft_min, 1)) spec.rows.clear();
}

}  // namespace pagoda::speculation
