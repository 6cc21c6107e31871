#include "engine/speculation/ngram_proposer.h"

#include <algorithm>

namespace pagoda::speculation {

void propose_ngram(std::span<const int32_t> tokens, int32_t ngram_max, int32_t ngram_min, int32_t k,
                   std::vector<int32_t>& out) {
  const auto len = int64_t(tokens.size());
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    const std::span<const int32_t> tail = tokens.last(size_t(n));
    // An occurrence at `start` must end before the tail does, so something follows it.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t to = std::min(len, from + k);
      out.insert(out.end(), tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

}  // namespace pagoda::speculation
