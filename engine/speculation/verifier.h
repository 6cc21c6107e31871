#pragma once
// Verification of a step's guesses, which is also how every decode samples its token: the
// rows of a sequence's entry are sampled in order with its own Sampler, exactly as plain
// decoding would sample them one step at a time: the same history (each sampled token joins
// it before the next row), the same random stream (one draw per sampled token), the same
// grammar mask (set_budget and accept token by token). Sampling goes on while the sampled
// token equals the guess that row fed; the first mismatch's sampled token is kept and the
// rest of the rows are dropped. Row j's logits are the bits plain decoding would compute at
// that position (batch invariance), so the tokens are those of plain decoding.

#include <cstddef>
#include <span>

#include "engine/request/sequence.h"

namespace pagoda::speculation {

// Samples `seq`'s rows (`logits`, one row of `vocab` per guess plus one) against
// seq.spec.guesses(), appending the sampled tokens to seq.tokens provisionally (the
// scheduler takes them back and emits them one by one, applying the stop rules) and counting
// them in seq.spec.sampled, their logprobs in seq.spec.sampled_logprobs (with
// Sequence::logprobs), the guesses accepted in seq.spec.accepted. A grammar that allows
// nothing more ends the run with -1 appended.
void verify(Sequence& seq, std::span<const float> logits, size_t vocab);

}  // namespace pagoda::speculation
