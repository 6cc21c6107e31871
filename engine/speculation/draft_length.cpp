#include "engine/speculation/draft_length.h"

#include <algorithm>

namespace pagoda::speculation {

int32_t DraftLength::next() {
  if (gave_up_) return 0;
  if (pause_ > 0) {
    --pause_;
    return 0;
  }
  return current_;
}

void DraftLength::record(int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  if (accepted == 0) {
    ++misses_;
    gave_up_ = may_give_up_ && misses_ >= kDraftGiveUp;
    // A draft on probation tries again at once: a verdict in a few steps, each reading one
    // new token, rather than one spread over pauses that it must then catch up with.
    const bool on_probation = may_give_up_ && !trusted();
    pause_ = on_probation ? 0 : std::min((1 << std::min(misses_, 4)) - 1, kMaxPause);
    current_ = std::max(min_, 1);
    return;
  }
  misses_ = 0;
  accepted_ += accepted;
  current_ = accepted == proposed ? std::min(max_, 2 * current_) : std::max({min_, accepted + 1, 1});
  current_ = std::min(current_, max_);
}

}  // namespace pagoda::speculation
