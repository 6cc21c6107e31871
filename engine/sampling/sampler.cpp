#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/ops.h"
#include "pagoda/error.h"

namespace pagoda {

void SamplingParams::validate() const {
  auto fail = [](const std::string& what) { throw Error("bad sampling parameter: " + what); };
  if (!std::isfinite(temperature) || temperature < 0.0f)
    fail("temperature must be >= 0, got " + std::to_string(temperature));
  if (top_k < 0) fail("top_k must be >= 0 (0 = off), got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got " + std::to_string(top_p));
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got " + std::to_string(min_p));
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f) {
    fail("repetition_penalty must be > 0, got " + std::to_string(repetition_penalty));
  }
  if (repetition_window < 0) fail("repetition_window must be >= 0, got " + std::to_string(repetition_window));
  auto within_two = [](float x) { return std::isfinite(x) && x >= -2.0f && x <= 2.0f; };
  if (!within_two(presence_penalty))
    fail("presence_penalty must be in [-2, 2], got " + std::to_string(presence_penalty));
  if (!within_two(frequency_penalty))
    fail("frequency_penalty must be in [-2, 2], got " + std::to_string(frequency_penalty));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) fail("logit_bias token ids must be >= 0, got " + std::to_string(id));
    if (!(std::isfinite(bias) && bias >= -100.0f && bias <= 100.0f)) {
      fail("logit_bias values must be in [-100, 100], got " + std::to_string(bias) + " for token " +
           std::to_string(id));
    }
  }
  if (min_tokens < 0) fail("min_tokens must be >= 0, got " + std::to_string(min_tokens));
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

void Sampler::adjust(std::span<const int32_t> history, size_t prompt_len, std::span<const int32_t> banned) {
  const auto n = static_cast<int32_t>(candidates_.size());
  auto in_vocabulary = [n](int32_t id) { return id >= 0 && id < n; };
  for (const auto& [id, bias] : params_.logit_bias) {
    if (in_vocabulary(id)) candidates_[id].value += bias;
  }
  for (int32_t id : banned) {
    if (in_vocabulary(id)) candidates_[id].value = -std::numeric_limits<float>::infinity();
  }
  if (params_.repetition_penalty != 1.0f && params_.repetition_window > 0) {
    const size_t window = std::min<size_t>(history.size(), size_t(params_.repetition_window));
    std::vector<bool> seen(n, false);
    for (int32_t id : history.last(window)) {
      if (!in_vocabulary(id) || seen[id]) continue;
      seen[id] = true;
      float& v = candidates_[id].value;
      v = v > 0.0f ? v / params_.repetition_penalty : v * params_.repetition_penalty;
    }
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    // Counted on a sorted copy of the output (thousands of ids at most), not in a
    // vocabulary-sized table cleared every step.
    output_ids_.assign(history.begin() + ptrdiff_t(prompt_len), history.end());
    std::sort(output_ids_.begin(), output_ids_.end());
    for (size_t i = 0; i < output_ids_.size();) {
      size_t j = i;
      while (j < output_ids_.size() && output_ids_[j] == output_ids_[i]) ++j;
      if (in_vocabulary(output_ids_[i])) {
        candidates_[output_ids_[i]].value -= float(j - i) * params_.frequency_penalty + params_.presence_penalty;
      }
      i = j;
    }
  }
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history, size_t prompt_len,
                        std::span<const int32_t> ending_ids, TokenFilter* filter) {
  prompt_len = std::min(prompt_len, history.size());
  const bool banning = history.size() - prompt_len < size_t(params_.min_tokens) && !ending_ids.empty();
  const bool adjusted = (params_.repetition_penalty != 1.0f && params_.repetition_window > 0) ||
                        params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f ||
                        !params_.logit_bias.empty() || banning;
  if (params_.temperature == 0.0f && !adjusted) {  // no copy needed
    const int32_t best = argmax(logits);
    if (!filter || filter->allows(best)) return best;
  }
  const auto n = static_cast<int32_t>(logits.size());
  candidates_.resize(n);
  for (int32_t i = 0; i < n; ++i) candidates_[i] = {i, logits[i]};
  if (adjusted) adjust(history, prompt_len, banning ? ending_ids : std::span<const int32_t>());
  if (filter) {
    const std::span<const uint64_t> allowed = filter->mask();
    std::erase_if(candidates_, [&](const Candidate& c) {
      return size_t(c.id) / 64 >= allowed.size() || !((allowed[size_t(c.id) / 64] >> (c.id % 64)) & 1);
    });
    // Banned tokens (min_tokens) are -inf: drop them too, so an all-banned set draws nothing.
    std::erase_if(candidates_, [](const Candidate& c) { return c.value == -std::numeric_limits<float>::infinity(); });
    if (candidates_.empty()) return -1;
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
