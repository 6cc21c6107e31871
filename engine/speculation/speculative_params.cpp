#include <string>

#include "pagoda/error.h"
#include "pagoda/speculative.h"

namespace pagoda {

void SpeculativeParams::validate() const {
  auto fail = [](const std::string& what) { throw Error("bad speculative parameter: " + what); };
  if (draft_max < 1) fail("draft_max must be >= 1, got " + std::to_string(draft_max));
  if (draft_min < 0 || draft_min > draft_max) {
    fail("draft_min must be in [0, draft_max = " + std::to_string(draft_max) + "], got " + std::to_string(draft_min));
  }
  if (ngram_min < 1) fail("ngram_min must be >= 1, got " + std::to_string(ngram_min));
  if (ngram_max < ngram_min) {
    fail("ngram_max must be >= ngram_min = " + std::to_string(ngram_min) + ", got " + std::to_string(ngram_max));
  }
  if (draft_probe < 0) fail("draft_probe must be >= 0, got " + std::to_string(draft_probe));
  if (!(draft_p_min >= 0.0f && draft_p_min <= 1.0f))
    fail("draft_p_min must be in [0, 1], got " + std::to_string(draft_p_min));
}

const char* speculative_mode_name(SpeculativeMode mode) {
  switch (mode) {
    case SpeculativeMode::None: return "none";
    case SpeculativeMode::Ngram: return "ngram";
    case SpeculativeMode::Draft: return "draft";
  }
  return "unknown";
}

}  // namespace pagoda
