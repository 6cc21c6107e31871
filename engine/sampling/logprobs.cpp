#include "engine/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/ops.h"

namespace pagoda {

double log_sum_exp(std::span<const float> logits) {
  const float max = logits[kernels::argmax(logits.data(), int(logits.size()))];
  double sum = 0.0;  // in double: 150k terms of very different sizes
  for (float x : logits) sum += std::exp(double(x) - double(max));
  return double(max) + std::log(sum);
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top) {
  const auto n = int32_t(logits.size());
  const double log_sum = log_sum_exp(logits);
  auto logprob = [&](int32_t id) { return float(double(logits[id]) - log_sum); };

  TokenLogprobs out;
  out.logprob = logprob(token);
  top = std::min(top, n);
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    const auto more_likely = [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    };
    std::partial_sort(ids.begin(), ids.begin() + top, ids.end(), more_likely);
    for (int32_t i = 0; i < top; ++i) out.top.push_back({ids[size_t(i)], logprob(ids[size_t(i)])});
  }
  return out;
}

}  // namespace pagoda
