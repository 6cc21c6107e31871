#pragma once
// Prompt lookup (n-gram speculation): the text often repeats itself — a summary quotes its
// source, an edit copies the code around it, a story is retold — so the tokens that followed
// the latest earlier occurrence of the text's last few tokens are a good guess at what comes
// next. No second model: a search over the sequence's own tokens.

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda::speculation {

// Appends to `out` up to `k` tokens guessed to follow `tokens`: for n from ngram_max down to
// ngram_min, the last n tokens are looked for earlier in `tokens` (latest occurrence first),
// and the tokens that followed the first match found are the guess. Nothing when no tail of
// at least ngram_min tokens occurs earlier.
void propose_ngram(std::span<const int32_t> tokens, int32_t ngram_max, int32_t ngram_min, int32_t k,
                   std::vector<int32_t>& out);

}  // namespace pagoda::speculation
