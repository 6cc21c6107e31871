#pragma once
// This step's guesses for one decoding sequence, from the proposer its request chose.

#include <cstdint>
#include <span>

#include "engine/speculation/speculation_state.h"

namespace pagoda::speculation {

// Fills spec.rows with the entry a speculating decode feeds: the last of `tokens` (the
// sequence's prompt and output), then up to `limit` guesses (fewer as the draft length adapts,
// and fewer than `tokens_left`, what max_new_tokens still allows, since the token sampled after
// an accepted run counts too). Leaves the rows empty, for a plain decode, when the sequence does
// not speculate, pauses after rejections, or the guess is shorter than draft_min. Returns the
// number of guesses. In Draft mode the guesses come later, from the draft model for every
// drafting sequence of the step at once (draft_proposer.h): the rows then hold the last token
// only, spec.draft_wanted says how many guesses to ask for, and the return value is that number.
int32_t propose(SpeculationState& spec, std::span<const int32_t> tokens, int32_t limit, int32_t tokens_left);

// Drops the guesses (empties the rows) when there are fewer than draft_min of them.
void drop_short_guess(SpeculationState& spec);

}  // namespace pagoda::speculation
