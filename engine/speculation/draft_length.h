#pragma once
// How many guesses a speculating sequence asks for, following the acceptance measured on it:
// a run fully accepted lengthens the next draft, a partial one shortens it to just past what
// was accepted, and verifications that accept nothing make the sequence decode plainly for a
// doubling number of steps (up to kMaxPause) before trying again, so that text the proposer
// cannot guess costs at most one wasted verification every kMaxPause + 1 steps.
//
// A draft model is different: every guess costs it a pass, and to guess at all it must keep
// reading the sequence. So it starts on probation: one guess (more once guesses are accepted),
// tried again at once after a miss (a verdict within a few steps, each reading one new
// token). After kDraftGiveUp fruitless verifications in a row it steps aside for the rest of
// the request (the n-gram proposer never does: its guesses cost nothing, and a quote may come
// later). Once kDraftTrust of its guesses were accepted it is trusted, and the draft proposer
// reads the whole context (SpeculativeParams::draft_probe).

#include <algorithm>
#include <cstdint>

#include "pagoda/speculative.h"

namespace pagoda::speculation {

class DraftLength {
 public:
  static constexpr int32_t kMaxPause = 15;
  static constexpr int32_t kDraftGiveUp = 4;
  static constexpr int32_t kDraftTrust = 3;

  explicit DraftLength(const SpeculativeParams& params)
      : min_(params.draft_min),
        max_(params.draft_max),
        current_(params.mode == SpeculativeMode::Draft ? std::max(params.draft_min, 1) : params.draft_max),
        may_give_up_(params.mode == SpeculativeMode::Draft) {}

  // Guesses to ask for in this step; 0 while pausing after rejections, and for good once a
  // draft model gave up. Counts the pause down.
  int32_t next();
  // The outcome of a verification: `accepted` of `proposed` guesses equalled the samples.
  void record(int32_t proposed, int32_t accepted);

  int32_t min() const { return min_; }
  // A draft model missed kDraftGiveUp times in a row: no more guesses for this request.
  bool gave_up() const { return gave_up_; }
  // kDraftTrust guesses were accepted so far: the proposer has earned the whole context.
  bool trusted() const { return accepted_ >= kDraftTrust; }

 private:
  int32_t min_, max_, current_;
  bool may_give_up_;
  bool gave_up_ = false;
  int32_t misses_ = 0;    // verifications in a row that accepted nothing
  int32_t pause_ = 0;     // steps left to decode plainly
  int32_t accepted_ = 0;  // guesses accepted so far
};

}  // namespace pagoda::speculation
