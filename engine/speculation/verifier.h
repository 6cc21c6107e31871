#pragma once
// Verification of a speculating decode's guesses: its rows are sampled in order with
// sample_next (engine/sampling/next_token.h), exactly as plain decoding would sample them one
// step at a time: the same history (each sampled token joins it before the next row), the same
// random stream (one draw per sampled token), the same constraint (budget and accept token by
// token). Sampling goes on while the sampled token equals the guess that row fed; the first
// mismatch's sampled token is kept and the rest of the rows are dropped. Row j's logits are the
// bits plain decoding would compute at that position (batch invariance), so the tokens are
// those of plain decoding.

#include <cstddef>
#include <span>

#include "engine/sampling/next_token.h"

namespace pagoda::speculation {

// Samples the rows of `logits` (one row of `vocab` per guess plus one) against `guesses`,
// appending the sampled tokens to s.tokens provisionally (the scheduler takes them back and
// emits them one by one, applying the stop rules) and counting them, their logprobs and the
// guesses accepted in `out`. A constraint that allows nothing more ends the run with -1 appended.
void verify(SequenceSampling& s, std::span<const int32_t> guesses, std::span<const float> logits, size_t vocab,
            SampledTokens& out);

}  // namespace pagoda::speculation
