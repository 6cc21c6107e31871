#include "engine/request/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/ops.h"
#include "pagoda/error.h"

namespace pagoda {

void SamplingParams::validate() const {
  auto fail = [](const std::string& what) { throw Error("bad sampling parameter: " + what); };
  if (!std::isfinite(temperature) || temperature < 0.0f) fail("temperature must be >= 0, got " + std::to_string(temperature));
  if (top_k < 0) fail("top_k must be >= 0 (0 = off), got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got " + std::to_string(top_p));
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got " + std::to_string(min_p));
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f) {
    fail("repetition_penalty must be > 0, got " + std::to_string(repetition_penalty));
  }
  if (repetition_window < 0) fail("repetition_window must be >= 0, got " + std::to_string(repetition_window));
}

int32_t argmax(std::span<const float> values) { return kernels::argmax(values.data(), int(values.size())); }

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { params.validate(); }

float Sampler::uniform() {
  // 24 random bits: exactly representable, and mt19937_64's output is fixed by the standard
  // (std::uniform_real_distribution's is not).
  return float(rng_() >> 40) * (1.0f / 16777216.0f);
}

template <typename Less>
void Sampler::order_prefix(size_t n, const Less& less) {
  // The order is total (ties go to the lower id), so the sorted prefix is the same however
  // it is found, and already ordered elements stay put.
  const auto mid = candidates_.begin() + static_cast<ptrdiff_t>(n);
  if (mid != candidates_.end()) std::nth_element(candidates_.begin(), mid, candidates_.end(), less);
  std::sort(candidates_.begin(), mid, less);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const bool penalized = params_.repetition_penalty != 1.0f && params_.repetition_window > 0;
  if (params_.temperature == 0.0f && !penalized) return argmax(logits);  // no copy needed
  const auto n = static_cast<int32_t>(logits.size());
  candidates_.resize(n);
  for (int32_t i = 0; i < n; ++i) candidates_[i] = {i, logits[i]};

  if (penalized) {
    const size_t window = std::min<size_t>(history.size(), size_t(params_.repetition_window));
    std::vector<bool> seen(n, false);
    for (int32_t id : history.last(window)) {
      if (id < 0 || id >= n || seen[id]) continue;
      seen[id] = true;
      float& v = candidates_[id].value;
      v = v > 0.0f ? v / params_.repetition_penalty : v * params_.repetition_penalty;
    }
  }

  const auto more_likely = [](const Candidate& a, const Candidate& b) {
    return a.value > b.value || (a.value == b.value && a.id < b.id);
  };
  if (params_.temperature == 0.0f) {
    return std::min_element(candidates_.begin(), candidates_.end(), more_likely)->id;
  }

  // Order only as far as a filter needs: top-k the first k; top-p and min-p the nucleus, which
  // on a 128k–152k vocabulary is a few hundred candidates at most, so they are ordered in
  // growing prefixes (nth_element, then a sort of the prefix) instead of all at once.
  const bool needs_order = params_.top_p < 1.0f || params_.min_p > 0.0f;
  if (params_.top_k > 0 && size_t(params_.top_k) < candidates_.size()) {
    order_prefix(size_t(params_.top_k), more_likely);
    candidates_.resize(size_t(params_.top_k));
  }

  float max_logit = candidates_[0].value;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.value);
  const auto weight = [&](float logit) { return std::exp((logit - max_logit) / params_.temperature); };
  double total = 0.0;
  for (const Candidate& c : candidates_) total += weight(c.value);
  if (needs_order) {
    // The most likely has weight exp(0) = 1.
    const double floor = params_.min_p * (1.0 / total);
    size_t ordered = 0, cut = 0;
    double cumulative = 0.0;
    for (bool done = false; !done;) {
      if (cut == ordered) {
        ordered = std::min(candidates_.size(), std::max<size_t>(256, 4 * ordered));
        order_prefix(ordered, more_likely);
      }
      const double p = weight(candidates_[cut].value) / total;
      if (cut > 0 && p < floor) break;
      cumulative += p;
      ++cut;
      done = cumulative >= params_.top_p || cut == candidates_.size();
    }
    candidates_.resize(cut);
  }
  for (Candidate& c : candidates_) c.value = weight(c.value);
  if (needs_order) {
    total = 0.0;
    for (const Candidate& c : candidates_) total += c.value;
  }

  const double target = double(uniform()) * total;
  double cumulative = 0.0;
  for (const Candidate& c : candidates_) {
    cumulative += c.value;
    if (target < cumulative) return c.id;
  }
  return candidates_.back().id;
}

}  // namespace pagoda
