#pragma once
// This step's guesses for one decoding sequence, from the proposer its request chose.

#include <cstdint>

#include "engine/request/sequence.h"

namespace pagoda::speculation {

// Fills seq.spec.rows with the entry a speculating decode feeds: its last token, then up to
// `limit` guesses (fewer as the draft length adapts). Leaves the rows empty, for a plain
// decode, when the sequence does not speculate, pauses after rejections, or the guess is
// shorter than draft_min. Returns the number of guesses.
int32_t propose(Sequence& seq, int32_t limit);

}  // namespace pagoda::speculation
