#include <gtest/gtest.h>

#include <map>

#include "engine/request/sampler.h"
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
  EXPECT_EQ(s.sample(logits_of({2.0f, 1.5f}), history), 1);       // 2.0 / 2 < 1.5
  EXPECT_EQ(s.sample(logits_of({-1.0f, -1.5f}), history), 1);     // -1.0 * 2 < -1.5
  p.repetition_penalty = 1.0f;
  EXPECT_EQ(Sampler(p).sample(logits_of({2.0f, 1.5f}), history), 0);
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
}

}  // namespace
}  // namespace pagoda
