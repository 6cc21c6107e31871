#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "engine/sampling/sampler.h"
#include "pagoda/error.h"

namespace pagoda {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

TEST(Sampler, GreedyPicksTheLargestAndTheLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p);
  EXPECT_EQ(s.sample(logits_of({0.1f, 3.0f, -1.0f, 3.0f}), {}), 1);
  EXPECT_EQ(argmax(logits_of({5.0f, 5.0f})), 0);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.seed = 1234;
  p.top_p = 0.9f;
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = float(i % 7) * 0.3f;
  Sampler a(p), b(p);
  p.seed = 4321;
  Sampler c(p);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 50; ++i) {
    ta.push_back(a.sample(logits, ta));
    tb.push_back(b.sample(logits, tb));
    tc.push_back(c.sample(logits, tc));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

std::map<int32_t, int> histogram(const SamplingParams& p, const std::vector<float>& logits, int draws) {
  Sampler s(p);
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) ++h[s.sample(logits, {})];
  return h;
}

TEST(Sampler, TopKKeepsOnlyTheKMostLikely) {
  SamplingParams p;
  p.top_k = 2;
  const auto h = histogram(p, logits_of({1.0f, 4.0f, 3.9f, 0.5f, 2.0f}), 2000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.count(1) && h.count(2));
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  SamplingParams p;
  p.top_p = 0.5f;
  // Probabilities about 0.64, 0.24, 0.09, 0.03: 0.64 alone reaches 0.5.
  const auto h = histogram(p, logits_of({3.0f, 2.0f, 1.0f, 0.0f}), 500);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.begin()->first, 0);
}

TEST(Sampler, MinPDropsTheUnlikely) {
  SamplingParams p;
  p.min_p = 0.3f;  // keeps tokens with probability >= 0.3 × top
  const auto h = histogram(p, logits_of({3.0f, 2.5f, 0.0f, -1.0f}), 2000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_FALSE(h.count(2) || h.count(3));
}

TEST(Sampler, TemperatureFollowsTheDistribution) {
  SamplingParams p;
  p.seed = 9;
  const auto h = histogram(p, logits_of({0.0f, std::log(3.0f)}), 20000);  // 1:3
  const double share = double(h.at(1)) / 20000.0;
  EXPECT_NEAR(share, 0.75, 0.02);
}

TEST(Sampler, RepetitionPenaltyDiscouragesSeenTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  const std::vector<int32_t> history{0};
  EXPECT_EQ(s.sample(logits_of({2.0f, 1.5f}), history), 1);    // 2.0 / 2 < 1.5
  EXPECT_EQ(s.sample(logits_of({-1.0f, -1.5f}), history), 1);  // -1.0 * 2 < -1.5
  p.repetition_penalty = 1.0f;
  EXPECT_EQ(Sampler(p).sample(logits_of({2.0f, 1.5f}), history), 0);
}

// OpenAI's definition: logit − count × frequency_penalty − [count > 0] × presence_penalty,
// counting the output only (history after prompt_len).
TEST(Sampler, PresenceAndFrequencyPenaltiesCountTheOutputOnly) {
  SamplingParams p;
  p.temperature = 0.0f;
  const std::vector<float> logits = logits_of({2.0f, 1.9f, 0.0f});
  const std::vector<int32_t> history{0, 0};
  p.frequency_penalty = 0.1f;  // 2.0 − 2 × 0.1 = 1.8 < 1.9
  EXPECT_EQ(Sampler(p).sample(logits, history, 0), 1);
  EXPECT_EQ(Sampler(p).sample(logits, history, 2), 0) << "prompt tokens are not counted";
  EXPECT_EQ(Sampler(p).sample(logits, history, 1), 0) << "one in the output: 2.0 − 0.1 = 1.9 ties, lowest id wins";
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 0.05f;  // once, whatever the count: 1.95 > 1.9
  EXPECT_EQ(Sampler(p).sample(logits, history, 0), 0);
  p.presence_penalty = 0.15f;  // 1.85 < 1.9
  EXPECT_EQ(Sampler(p).sample(logits, history, 0), 1);
  p.presence_penalty = -1.0f;  // negative values encourage repeats
  EXPECT_EQ(Sampler(p).sample(logits_of({1.0f, 1.5f}), std::vector<int32_t>{0}, 0), 0);
}

// The shift in the distribution, drawn: logits (0, 0, 0), token 0 twice and token 1 once in
// the output, presence 0.5 and frequency 0.25: weights e^-1, e^-0.75, 1.
TEST(Sampler, PenaltiesShiftTheDistributionAsDefined) {
  SamplingParams p;
  p.seed = 5;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p);
  const std::vector<float> logits = logits_of({0.0f, 0.0f, 0.0f});
  const std::vector<int32_t> history{0, 1, 0};
  std::map<int32_t, int> h;
  const int draws = 30000;
  for (int i = 0; i < draws; ++i) ++h[s.sample(logits, history, 0)];
  const double w0 = std::exp(-1.0), w1 = std::exp(-0.75), total = w0 + w1 + 1.0;
  EXPECT_NEAR(h[0] / double(draws), w0 / total, 0.01);
  EXPECT_NEAR(h[1] / double(draws), w1 / total, 0.01);
  EXPECT_NEAR(h[2] / double(draws), 1.0 / total, 0.01);
}

TEST(Sampler, LogitBiasShiftsGreedyAndSampledChoices) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{1, 1.5f}};
  EXPECT_EQ(Sampler(p).sample(logits_of({1.0f, 0.0f}), {}), 1);  // 0 + 1.5 > 1
  p.logit_bias = {{1, 0.5f}, {1, 0.6f}};                         // repeated ids add up
  EXPECT_EQ(Sampler(p).sample(logits_of({1.0f, 0.0f}), {}), 1);
  p.temperature = 1.0f;
  p.seed = 3;
  p.logit_bias = {{0, std::log(3.0f)}, {2, -100.0f}};  // 0 : 1 becomes 3 : 1, token 2 banned
  const auto h = histogram(p, logits_of({0.0f, 0.0f, 5.0f}), 20000);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_NEAR(h.at(0) / 20000.0, 0.75, 0.02);
}

TEST(Sampler, MinTokensBansTheEndingTokensUntilReached) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  const std::vector<float> logits = logits_of({0.0f, 1.0f, 9.0f});
  const std::vector<int32_t> ending{2}, prompt{5, 5};
  std::vector<int32_t> history = prompt;
  Sampler s(p);
  history.push_back(s.sample(logits, history, prompt.size(), ending));
  history.push_back(s.sample(logits, history, prompt.size(), ending));
  EXPECT_EQ(history, (std::vector<int32_t>{5, 5, 1, 1}));
  EXPECT_EQ(s.sample(logits, history, prompt.size(), ending), 2) << "two generated: the ban is lifted";
  p.temperature = 1.0f;  // sampled too, where token 2 would otherwise be drawn almost always
  p.seed = 1;
  Sampler t(p);
  for (int i = 0; i < 200; ++i) EXPECT_NE(t.sample(logits, prompt, prompt.size(), ending), 2);
}

// The filters written the obvious way: every candidate sorted, weights summed in id order.
// The sampler orders only the prefix it needs; it must pick what this picks for the same draw.
int32_t sample_by_full_sort(const SamplingParams& p, const std::vector<float>& logits, float u) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  if (p.top_k > 0 && size_t(p.top_k) < ids.size()) ids.resize(size_t(p.top_k));
  const float max_logit = logits[ids[0]];
  auto weight = [&](int32_t id) { return std::exp((logits[id] - max_logit) / p.temperature); };
  std::vector<int32_t> by_id = ids;
  std::sort(by_id.begin(), by_id.end());
  double total = 0;
  for (int32_t id : (p.top_k > 0 ? ids : by_id)) total += weight(id);
  if (p.top_p < 1.0f || p.min_p > 0.0f) {
    double cumulative = 0;
    size_t cut = 0;
    while (cut < ids.size()) {
      const double q = weight(ids[cut]) / total;
      if (cut > 0 && q < p.min_p / total) break;
      cumulative += q;
      ++cut;
      if (cumulative >= p.top_p) break;
    }
    ids.resize(cut);
    total = 0;
    for (int32_t id : ids) total += weight(id);
  }
  const double target = double(u) * total;
  double cumulative = 0;
  for (int32_t id : ids) {
    cumulative += weight(id);
    if (target < cumulative) return id;
  }
  return ids.back();
}

TEST(Sampler, LargeVocabularyFiltersPickWhatAFullSortPicks) {
  struct Case {
    float temperature, top_p, min_p, spread;
    int32_t top_k;
  };
  // Peaked and flat distributions; nuclei of a few tokens up to the whole vocabulary (the
  // prefix the sampler orders grows several times); ties (a flat spread of 0).
  const Case cases[] = {{0.8f, 0.95f, 0.0f, 3.0f, 0},  {1.0f, 0.9f, 0.05f, 3.0f, 0}, {0.7f, 1.0f, 0.01f, 2.0f, 0},
                        {1.5f, 0.999f, 0.0f, 0.5f, 0}, {1.0f, 0.95f, 0.0f, 0.0f, 0}, {0.8f, 0.95f, 0.05f, 3.0f, 40},
                        {1.0f, 0.5f, 0.0f, 1.0f, 1000}};
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    std::vector<float> logits(128256);
    std::normal_distribution<float> dist(0.0f, c.spread);
    for (float& x : logits) x = c.spread > 0 ? dist(rng) : 1.0f;
    SamplingParams p;
    p.temperature = c.temperature, p.top_p = c.top_p, p.min_p = c.min_p, p.top_k = c.top_k, p.seed = 11;
    Sampler sampler(p);
    std::mt19937_64 draws(11);  // the sampler's own uniform() sequence
    for (int i = 0; i < 20; ++i) {
      const float u = float(draws() >> 40) * (1.0f / 16777216.0f);
      ASSERT_EQ(sampler.sample(logits, {}), sample_by_full_sort(p, logits, u))
          << "T " << c.temperature << " top_p " << c.top_p << " min_p " << c.min_p << " top_k " << c.top_k << " draw "
          << i;
    }
  }
}

TEST(Sampler, BadParametersAreRefused) {
  auto refused = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(Sampler{p}, Error);
  };
  refused([](SamplingParams& p) { p.temperature = -0.5f; });
  refused([](SamplingParams& p) { p.temperature = NAN; });
  refused([](SamplingParams& p) { p.top_k = -1; });
  refused([](SamplingParams& p) { p.top_p = 0.0f; });
  refused([](SamplingParams& p) { p.top_p = 1.5f; });
  refused([](SamplingParams& p) { p.min_p = -0.1f; });
  refused([](SamplingParams& p) { p.repetition_penalty = 0.0f; });
  refused([](SamplingParams& p) { p.repetition_window = -2; });
  refused([](SamplingParams& p) { p.presence_penalty = 2.5f; });
  refused([](SamplingParams& p) { p.frequency_penalty = NAN; });
  refused([](SamplingParams& p) { p.logit_bias = {{3, 101.0f}}; });
  refused([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; });
  refused([](SamplingParams& p) { p.min_tokens = -1; });
}

}  // namespace
}  // namespace pagoda
