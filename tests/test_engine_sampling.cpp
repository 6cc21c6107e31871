// OpenAI's sampling adjustments through the Engine, on stories260K: logit_bias, presence and
// frequency penalties and min_tokens change the greedy output exactly as their definitions
// say, computed here from the oracle's logits step by step.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "engine/model/model.h"
#include "testing/reference_model.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

class EngineSampling : public test::StoriesTest {
 protected:
  // The greedy continuation of `prompt` by the oracle, each step's logits adjusted by the
  // definitions: + logit_bias; −∞ for `ending` while fewer than min_tokens are out; −count ×
  // frequency − [count > 0] × presence over the output.
  std::vector<int32_t> expected(const std::vector<int32_t>& prompt, const SamplingParams& p, int32_t n,
                                const std::vector<int32_t>& ending = {}) {
    const Model model = load_model(model_);
    ReferenceModel ref(model);
    std::vector<int32_t> tokens = prompt, out;
    for (int32_t pos = 0; int32_t(out.size()) < n; ++pos) {
      std::vector<float> logits = ref.forward(tokens[pos], pos);
      if (pos + 1 < int32_t(tokens.size())) continue;  // still reading the prompt
      for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
      if (int32_t(out.size()) < p.min_tokens) {
        for (int32_t id : ending) logits[id] = -std::numeric_limits<float>::infinity();
      }
      std::map<int32_t, int> count;
      for (int32_t id : out) ++count[id];
      for (const auto& [id, c] : count) logits[id] -= float(c) * p.frequency_penalty + p.presence_penalty;
      const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(next);
      tokens.push_back(next);
    }
    return out;
  }

  std::vector<int32_t> generated(Engine& engine, const std::vector<int32_t>& prompt, const SamplingParams& p, int32_t n,
                                 const std::vector<int32_t>& stop_ids = {}) {
    Request r = test::greedy_request(prompt, n);
    r.sampling = p;
    r.stop_token_ids = stop_ids;
    RequestHandle h = engine.submit(r);
    return test::await(h).token_ids;
  }
};

TEST_F(EngineSampling, AdjustmentsChangeTheGreedyOutputAsDefined) {
  Engine engine({.model_path = model_, .threads = 2});
  const int32_t n = 24;
  // The story whose greedy continuation repeats tokens most, for the penalties to act on.
  auto repeats = [&](const test::GoldenCase& c) {
    std::vector<int32_t> head(c.greedy_ids.begin(), c.greedy_ids.begin() + std::min<size_t>(n, c.greedy_ids.size()));
    std::sort(head.begin(), head.end());
    return head.size() - size_t(std::unique(head.begin(), head.end()) - head.begin());
  };
  const auto story = std::max_element(cases_.begin(), cases_.end(),
                                      [&](const auto& a, const auto& b) { return repeats(a) < repeats(b); });
  ASSERT_GT(repeats(*story), 0u) << "no golden continuation repeats a token";
  const std::vector<int32_t> prompt = story->prompt_ids;
  SamplingParams plain;
  plain.temperature = 0.0f;
  const std::vector<int32_t> greedy = generated(engine, prompt, plain, n);
  ASSERT_EQ(greedy, expected(prompt, plain, n));

  SamplingParams banned = plain;
  banned.logit_bias = {{greedy[0], -100.0f}};
  const std::vector<int32_t> without_first = generated(engine, prompt, banned, n);
  EXPECT_NE(without_first[0], greedy[0]);
  EXPECT_EQ(without_first, expected(prompt, banned, n));

  SamplingParams penalized = plain;
  penalized.presence_penalty = 1.5f;
  penalized.frequency_penalty = 0.5f;
  const std::vector<int32_t> varied = generated(engine, prompt, penalized, n);
  EXPECT_NE(varied, greedy) << "the penalties should change a 24-token story";
  EXPECT_EQ(varied, expected(prompt, penalized, n));

  SamplingParams late_stop = plain;  // the greedy first token ends the output, but not before 3
  late_stop.min_tokens = 3;
  const std::vector<int32_t> held = generated(engine, prompt, late_stop, n, {greedy[0]});
  ASSERT_GE(held.size(), 3u);
  const std::vector<int32_t> want = expected(prompt, late_stop, 3, {greedy[0]});
  EXPECT_TRUE(std::equal(want.begin(), want.end(), held.begin()));
  test::expect_engine_idle(engine);
}

// Logprobs are the log-softmax of the step's raw logits (the oracle's here, to a tolerance), the
// top alternatives sorted with the greedy token first; the stream carries the same values as
// the completion, and a request's values do not depend on what shares its batch (bitwise).
TEST_F(EngineSampling, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  // An f32 cache, as the oracle keeps: f16's rounding alone moves logprobs by ~1e-3.
  Engine engine({.model_path = model_, .threads = 2, .kv_cache_type = KvCacheType::F32});
  const std::vector<int32_t> prompt = cases_[0].prompt_ids;
  const int32_t n = 12;
  Request r = test::greedy_request(prompt, n);
  r.logprobs = 3;
  r.sampling.logit_bias = {{7, 3.0f}};  // an adjustment: logprobs stay those of the raw logits
  r.stream = true;
  RequestHandle h = engine.submit(r);
  std::vector<TokenLogprobs> streamed;
  while (auto e = h.next_token()) {
    if (e->logprobs) streamed.push_back(*e->logprobs);
  }
  const Completion c = test::await(h);
  ASSERT_EQ(c.logprobs.size(), c.token_ids.size());
  ASSERT_EQ(streamed.size(), c.logprobs.size());

  const Model model = load_model(model_);
  ReferenceModel ref(model);
  std::vector<int32_t> tokens = prompt;
  tokens.insert(tokens.end(), c.token_ids.begin(), c.token_ids.end());
  for (int32_t pos = 0, step = 0; step < int32_t(c.token_ids.size()); ++pos) {
    const std::vector<float>& logits = ref.forward(tokens[pos], pos);
    if (pos + 1 < int32_t(prompt.size())) continue;
    double sum = 0.0;
    const float max = *std::max_element(logits.begin(), logits.end());
    for (float x : logits) sum += std::exp(double(x) - max);
    const auto want = [&](int32_t id) { return double(logits[id]) - max - std::log(sum); };
    const TokenLogprobs& got = c.logprobs[step];
    EXPECT_NEAR(got.logprob, want(c.token_ids[step]), 1e-3) << "step " << step;
    ASSERT_EQ(got.top.size(), 3u);
    for (size_t k = 0; k < got.top.size(); ++k) {
      EXPECT_NEAR(got.top[k].logprob, want(got.top[k].token), 1e-3);
      if (k > 0) {
        EXPECT_GE(got.top[k - 1].logprob, got.top[k].logprob);
      }
    }
    EXPECT_EQ(streamed[step].logprob, got.logprob);
    EXPECT_EQ(streamed[step].top.size(), got.top.size());
    ++step;
  }

  Request plain = test::greedy_request(prompt, n);
  plain.logprobs = 0;
  RequestHandle alone_handle = engine.submit(plain);
  const Completion alone = test::await(alone_handle);
  std::vector<RequestHandle> crowd;
  for (const test::GoldenCase& other : cases_)
    crowd.push_back(engine.submit(test::greedy_request(other.prompt_ids, 20)));
  RequestHandle batched_handle = engine.submit(plain);
  const Completion batched = test::await(batched_handle);
  for (RequestHandle& other : crowd) test::await(other);
  ASSERT_EQ(alone.logprobs.size(), size_t(n));
  ASSERT_EQ(batched.logprobs.size(), size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    EXPECT_EQ(alone.logprobs[i].logprob, batched.logprobs[i].logprob) << i;
    EXPECT_TRUE(alone.logprobs[i].top.empty());
    EXPECT_EQ(alone.logprobs[i].logprob, c.logprobs[i].logprob) << "the same token, the same raw logits";
  }
  r.logprobs = 21;
  EXPECT_THROW(engine.submit(r), Error);
}

// Prompt logprobs (scoring a text): token i + 1's given tokens 0..i, the oracle's log-softmax;
// the same bits however the prompt is chunked, and in full after the prompt was cached.
TEST_F(EngineSampling, PromptLogprobsScoreEveryPromptToken) {
  std::vector<int32_t> prompt;
  for (const test::GoldenCase& c : cases_) {
    prompt.insert(prompt.end(), c.prompt_ids.begin(), c.prompt_ids.end());
    prompt.insert(prompt.end(), c.greedy_ids.begin(), c.greedy_ids.begin() + std::min<size_t>(12, c.greedy_ids.size()));
  }
  auto score = [&](int32_t chunk, bool cache_first) {
    Engine engine({.model_path = model_, .threads = 2, .kv_cache_type = KvCacheType::F32, .prefill_chunk = chunk});
    if (cache_first) {
      RequestHandle warm = engine.submit(test::greedy_request(prompt, 1));
      test::await(warm);
    }
    Request r = test::greedy_request(prompt, 0);
    r.prompt_logprobs = 2;
    RequestHandle h = engine.submit(r);
    const Completion c = test::await(h);
    EXPECT_TRUE(c.token_ids.empty());
    EXPECT_EQ(c.finish_reason, FinishReason::Length);
    test::expect_engine_idle(engine);
    return c.prompt_logprobs;
  };
  const std::vector<TokenLogprobs> whole = score(256, false);
  ASSERT_EQ(whole.size(), prompt.size() - 1);
  const Model model = load_model(model_);
  ReferenceModel ref(model);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    const std::vector<float>& logits = ref.forward(prompt[i], int32_t(i));
    double sum = 0.0;
    const float max = *std::max_element(logits.begin(), logits.end());
    for (float x : logits) sum += std::exp(double(x) - max);
    EXPECT_NEAR(whole[i].logprob, double(logits[prompt[i + 1]]) - max - std::log(sum), 1e-3) << i;
    ASSERT_EQ(whole[i].top.size(), 2u);
    EXPECT_GE(whole[i].top[0].logprob, whole[i].top[1].logprob);
    EXPECT_GE(whole[i].top[0].logprob, whole[i].logprob);
  }
  for (const auto& [chunk, cache_first] : {std::pair{7, false}, std::pair{256, true}}) {
    const std::vector<TokenLogprobs> again = score(chunk, cache_first);
    ASSERT_EQ(again.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i)
      EXPECT_EQ(again[i].logprob, whole[i].logprob) << "chunk " << chunk << " at " << i;
  }
}

TEST_F(EngineSampling, LogitBiasOutsideTheVocabularyIsRefused) {
  Engine engine({.model_path = model_, .threads = 1});
  Request r = test::greedy_request(cases_[0].prompt_ids, 4);
  r.sampling.logit_bias = {{engine.vocab_size(), 1.0f}};
  EXPECT_THROW(engine.submit(r), Error);
  r.sampling.logit_bias = {{0, 1000.0f}};
  EXPECT_THROW(engine.submit(r), Error);
  r.sampling.logit_bias.clear();
  r.max_new_tokens = 0;  // only a prompt being scored may generate nothing
  EXPECT_THROW(engine.submit(r), Error);
  r.prompt_logprobs = 21;
  EXPECT_THROW(engine.submit(r), Error);
}

}  // namespace
}  // namespace pagoda
