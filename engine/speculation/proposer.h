#pragma once
// This step's guesses for one decoding sequence, from the proposer its request chose.

#include <cstdint>

#include "engine/request/sequence.h"

namespace pagoda::speculation {

// Fills seq.spec.rows with the entry a speculating decode feeds: its last token, then up to
// `limit` guesses (fewer as the draft length adapts). Leaves the rows empty, for a plain
// decode, when the sequence does not speculate, pauses after rejections, or the guess is
// shorter than draft_min. Returns the number of guesses. In Draft mode the guesses come later,
// from the draft model for every drafting sequence of the step at once (draft_proposer.h):
// the rows then hold the last token only, seq.spec.draft_wanted says how many guesses to ask
// for, and the return value is that number.
int32_t propose(Sequence& seq, int32_t limit);

// Drops the guesses (empties the rows) when there are fewer than draft_min of them.
void drop_short_guess(SpeculationState& spec);

}  // namespace pagoda::speculation
