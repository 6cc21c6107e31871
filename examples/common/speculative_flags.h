#pragma once
// The speculative-decoding flags the example programs share: the n-gram (prompt lookup)
// switch --spec-ngram (alias --lookup, as llama.cpp's example), and llama-server's
// --model-draft (-md), --draft-max, --draft-min and --draft-p-min, and pagoda's --draft-probe.

#include <string>

#include "examples/common/args.h"
#include "pagoda/speculative.h"

namespace pagoda::cli {

// The flags speculative_from_flags and draft_model_from_flags read that take a value (--spec-ngram is
// a switch).
inline constexpr const char* kSpeculativeFlags[] = {"--draft-max",      "--draft-min",   "--spec-ngram-max",
                                                    "--spec-ngram-min", "--model-draft", "--draft-p-min",
                                                    "--draft-probe"};

inline constexpr const char* kSpeculativeUsage =
    R"(speculative decoding (outputs are the same with and without it, bit for bit):
  --spec-ngram, --lookup  guess the next tokens from earlier text (prompt lookup) and verify
                          them in one step
  -md, --model-draft F    a smaller GGUF with the same vocabulary guesses the next tokens
                          (the default proposer when given, unless --spec-ngram)
  --draft-max N           guesses per step at most (default 8)
  --draft-min N           a shorter guess is not verified (default 1)
  --draft-p-min P         the draft model stops at a guess less likely than P (default 0)
  --draft-probe N         until some of its guesses are accepted, the draft model reads only
                          the first token and the last N of the context (default 16; 0: all)
  --spec-ngram-max N  --spec-ngram-min N   the longest and shortest tail looked up (3, 1)
)";

// Throws pagoda::Error for values out of range.
inline SpeculativeParams speculative_from_flags(const Args& args) {
  SpeculativeParams p;
  if (args.has("--spec-ngram")) {
    p.mode = SpeculativeMode::Ngram;
  } else if (args.has("--model-draft")) {
    p.mode = SpeculativeMode::Draft;
  }
  args.set_fields({{"--draft-p-min", p.draft_p_min},
                   {"--draft-probe", p.draft_probe},
                   {"--draft-max", p.draft_max},
                   {"--draft-min", p.draft_min},
                   {"--spec-ngram-max", p.ngram_max},
                   {"--spec-ngram-min", p.ngram_min}});
  p.validate();
  return p;
}

// The draft model's path (--model-draft, -md); "" without one.
inline std::string draft_model_from_flags(const Args& args) { return args.get("--model-draft", ""); }

}  // namespace pagoda::cli
