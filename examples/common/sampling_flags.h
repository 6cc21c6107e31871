#pragma once
// The sampling flags the example programs share, spelled as llama.cpp spells them.

#include <cstdint>
#include <string>
#include <utility>

#include "examples/common/args.h"
#include "pagoda/sampling.h"

namespace pagoda::cli {

// The flags sampling_from_flags reads, all taking a value.
inline constexpr const char* kSamplingFlags[] = {"--temp",
                                                 "--top-k",
                                                 "--top-p",
                                                 "--min-p",
                                                 "--repeat-penalty",
                                                 "--repeat-last-n",
                                                 "--presence-penalty",
                                                 "--frequency-penalty",
                                                 "--logit-bias",
                                                 "--min-tokens"};

// "TOKEN_ID+BIAS" or "TOKEN_ID-BIAS", as llama.cpp's --logit-bias ("15043+1", "2-100").
inline std::pair<int32_t, float> parse_logit_bias(const std::string& text) {
  const size_t sign = text.find_first_of("+-", 1);
  if (sign == std::string::npos) throw Error("--logit-bias needs TOKEN_ID+BIAS or TOKEN_ID-BIAS, got '" + text + "'");
  const int32_t id = Args::parse<int32_t>("--logit-bias", text.substr(0, sign));
  const float bias = Args::parse<float>("--logit-bias", text.substr(sign + 1));
  return {id, text[sign] == '-' ? -bias : bias};
}

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --presence-penalty
// --frequency-penalty --logit-bias (repeatable) --min-tokens over `defaults` (the seed is each
// program's own business).
inline SamplingParams sampling_from_flags(const Args& args, SamplingParams defaults) {
  SamplingParams s = defaults;
  args.set_fields({{"--temp", s.temperature},
                   {"--top-k", s.top_k},
                   {"--top-p", s.top_p},
                   {"--min-p", s.min_p},
                   {"--repeat-penalty", s.repetition_penalty},
                   {"--repeat-last-n", s.repetition_window},
                   {"--presence-penalty", s.presence_penalty},
                   {"--frequency-penalty", s.frequency_penalty}});
  for (const std::string& bias : args.all("--logit-bias")) s.logit_bias.push_back(parse_logit_bias(bias));
  s.min_tokens = args.number("--min-tokens", s.min_tokens);
  return s;
}

}  // namespace pagoda::cli
