#pragma once
// The sampling flags the example programs share, spelled as llama.cpp spells them.

#include "examples/common/args.h"
#include "pagoda/sampling.h"

namespace pagoda::cli {

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n over `defaults` (the seed is
// each program's own business).
inline SamplingParams sampling_from_flags(const Args& args, SamplingParams defaults) {
  SamplingParams s = defaults;
  s.temperature = args.number("--temp", s.temperature);
  s.top_k = args.number("--top-k", s.top_k);
  s.top_p = args.number("--top-p", s.top_p);
  s.min_p = args.number("--min-p", s.min_p);
  s.repetition_penalty = args.number("--repeat-penalty", s.repetition_penalty);
  s.repetition_window = args.number("--repeat-last-n", s.repetition_window);
  return s;
}

}  // namespace pagoda::cli
