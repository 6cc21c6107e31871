#include "engine/sampling/next_token.h"

#include "engine/sampling/logprobs.h"

namespace pagoda {

int32_t sample_next(SequenceSampling& s, std::span<const float> row, SampledTokens& out) {
  TokenConstraint* c = s.constraint;
  if (c) c->set_budget(s.max_new_tokens - (int32_t(s.tokens.size()) - int32_t(s.prompt_len)));
  TokenFilter* filter = c && c->active() ? c : nullptr;
  const int32_t token = s.sampler.sample(row, s.tokens, s.prompt_len, s.ending_ids, filter);
  s.tokens.push_back(token);
  ++out.sampled;
  if (token < 0) return token;
  if (c) c->accept(token);
  if (s.logprobs >= 0) out.logprobs.push_back(token_logprobs(row, token, s.logprobs));
  return token;
}

}  // namespace pagoda
