#include "engine/speculation/verifier.h"

#include "engine/sampling/logprobs.h"

namespace pagoda::speculation {

void verify(Sequence& seq, std::span<const float> logits, size_t vocab) {
  SpeculationState& spec = seq.spec;
  const std::span<const int32_t> guesses = spec.guesses();
  spec.sampled = 0;
  spec.accepted = 0;
  spec.sampled_logprobs.clear();
  for (size_t j = 0; j <= guesses.size(); ++j) {
    const std::span<const float> row = logits.subspan(j * vocab, vocab);
    if (seq.grammar) seq.grammar->set_budget(seq.max_new_tokens - seq.generated());
    grammar::GrammarConstraint* constraint = seq.grammar && seq.grammar->active() ? seq.grammar.get() : nullptr;
    const int32_t token = seq.sampler.sample(row, seq.tokens, size_t(seq.prompt_len), seq.ending_ids, constraint);
    seq.tokens.push_back(token);
    ++spec.sampled;
    if (token < 0) return;  // the grammar allows nothing more
    if (seq.grammar) seq.grammar->accept(token);
    if (seq.logprobs >= 0) spec.sampled_logprobs.push_back(token_logprobs(row, token, seq.logprobs));
    if (j == guesses.size() || token != guesses[j]) return;
    ++spec.accepted;
  }
}

}  // namespace pagoda::speculation
