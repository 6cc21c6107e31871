// Page accounting under churn with the prefix cache: random prompts sharing random prefixes,
// random cancels, a pool small enough to force eviction and preemption. Every future
// resolves, every finished output equals the uncached engine's, and at the end no page is in
// use: free + cached == capacity. Runs under ThreadSanitizer too (scripts/test.sh).

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "pagoda/engine.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using namespace std::chrono_literals;

std::vector<Request> churn_requests(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> openings(3);
  for (auto& o : openings) {
    for (int i = 0; i < 40; ++i) o.push_back(int32_t(3 + rng() % 990));
  }
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    const auto& o = openings[rng() % openings.size()];
    r.prompt_ids.assign(o.begin(), o.begin() + ptrdiff_t(rng() % o.size()));
    for (uint32_t k = 1 + rng() % 10; k > 0; --k) r.prompt_ids.push_back(int32_t(3 + rng() % 990));
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = 1 + int32_t(rng() % 24);
    r.ignore_eos = true;
    out.push_back(std::move(r));
  }
  return out;
}

TEST(PrefixChurn, AccountingStaysExactUnderEvictionPreemptionAndCancels) {
  const std::vector<Request> requests = churn_requests(17, 60);
  std::vector<std::vector<int32_t>> want;
  {
    Engine plain({.model_path = test::tiny_gqa_model(), .threads = 1, .tokens_per_page = 4, .prefix_caching = false});
    std::vector<RequestHandle> handles;
    for (const Request& r : requests) handles.push_back(plain.submit(r));
    for (auto& h : handles) want.push_back(test::await(h).token_ids);
  }
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    SCOPED_TRACE(mode == PreemptionMode::Recompute ? "recompute" : "swap");
    // 40 pages of 4 tokens: a few requests' worth, so cached pages are evicted and running
    // ones preempted.
    Engine engine({.model_path = test::tiny_gqa_model(),
                   .threads = 1,
                   .kv_pages = 40,
                   .tokens_per_page = 4,
                   .max_running = 12,
                   .prefill_chunk = 8,
                   .preemption = mode});
    std::mt19937 rng(5);
    std::vector<RequestHandle> handles;
    std::vector<bool> cancelled(requests.size(), false);
    for (size_t i = 0; i < requests.size(); ++i) {
      handles.push_back(engine.submit(requests[i]));
      if (rng() % 4 == 0) {
        const size_t victim = rng() % handles.size();
        handles[victim].cancel();
        cancelled[victim] = true;
      }
      if (i % 10 == 9) std::this_thread::sleep_for(1ms);
    }
    int finished = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
      const Completion c = test::await(handles[i]);
      if (c.finish_reason == FinishReason::Cancelled) {
        EXPECT_TRUE(cancelled[i]) << i;
        continue;
      }
      ++finished;
      EXPECT_EQ(c.finish_reason, FinishReason::Length) << i << " " << c.error;
      EXPECT_EQ(c.token_ids, want[i]) << i;
    }
    EXPECT_GT(finished, 0);
    // Pages come back by message after a future resolves, so the count settles a moment later.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (engine.metrics().kv_pages_used != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    const EngineMetrics m = engine.metrics();
    EXPECT_EQ(m.kv_pages_used, 0);
    EXPECT_EQ(m.kv_pages_free + m.kv_pages_cached, m.kv_pages_total);
    EXPECT_GT(m.kv_pages_cached, 0);
    EXPECT_GT(m.prefix_hit_tokens, 0);
    EXPECT_EQ(m.running, 0);
    EXPECT_EQ(m.queued, 0);
    EXPECT_EQ(m.finished, int64_t(requests.size()));
    EXPECT_GT(m.preempted, 0) << "the pool was meant to run dry";
  }
}

// Shutdown with requests in flight that share cached pages: every future resolves and every
// page is free or cached.
TEST(PrefixChurn, ShutdownReleasesSharedPages) {
  const std::vector<Request> requests = churn_requests(23, 40);
  Engine engine({.model_path = test::tiny_gqa_model(),
                 .threads = 1,
                 .kv_pages = 40,
                 .tokens_per_page = 4,
                 .max_running = 8,
                 .prefill_chunk = 8});
  std::vector<RequestHandle> handles;
  for (const Request& r : requests) handles.push_back(engine.submit(r));
  std::this_thread::sleep_for(5ms);
  engine.shutdown();
  for (auto& h : handles) {
    const Completion c = test::await(h);
    EXPECT_TRUE(c.finish_reason == FinishReason::Cancelled || c.finish_reason == FinishReason::Length);
  }
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.kv_pages_used, 0);
  EXPECT_EQ(m.kv_pages_free + m.kv_pages_cached, m.kv_pages_total);
}

}  // namespace
}  // namespace pagoda
