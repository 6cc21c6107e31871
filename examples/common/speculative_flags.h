#pragma once
// The speculative-decoding flags the example programs share: the n-gram (prompt lookup)
// switch --spec-ngram (alias --lookup, as llama.cpp's example), and llama-server's
// --draft-max / --draft-min.

#include "examples/common/args.h"
#include "pagoda/speculative.h"

namespace pagoda::cli {

inline constexpr const char* kSpeculativeUsage = R"(speculative decoding (outputs are the same with and without it, bit for bit):
  --spec-ngram, --lookup  guess the next tokens from earlier text (prompt lookup) and verify
                          them in one step
  --draft-max N           guesses per step at most (default 8)
  --draft-min N           a shorter guess is not verified (default 1)
  --spec-ngram-max N  --spec-ngram-min N   the longest and shortest tail looked up (3, 1)
)";

// Throws pagoda::Error for values out of range.
inline SpeculativeParams speculative_from_flags(const Args& args) {
  SpeculativeParams p;
  if (args.has("--spec-ngram")) p.mode = SpeculativeMode::Ngram;
  p.draft_max = args.number("--draft-max", p.draft_max);
  p.draft_min = args.number("--draft-min", p.draft_min);
  p.ngram_max = args.number("--spec-ngram-max", p.ngram_max);
  p.ngram_min = args.number("--spec-ngram-min", p.ngram_min);
  p.validate();
  return p;
}

}  // namespace pagoda::cli
