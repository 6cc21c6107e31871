// The Engine as applications use it: golden outputs through the actors, concurrency, seeds,
// cancellation at every stage, shutdown with requests in flight, preemption, bad requests.

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::await;

using namespace std::chrono_literals;

Request golden_request(const test::GoldenCase& g) {
  Request r;
  r.prompt_ids = g.prompt_ids;
  r.sampling.temperature = 0.0f;
  r.stop_token_ids = {1};  // llama2.c ends a story at BOS
  r.ignore_eos = true;
  r.max_new_tokens = g.max_positions - int32_t(g.prompt_ids.size()) + 1;
  return r;
}

Request sampled_request(uint64_t seed, int32_t max_new_tokens = 40) {
  Request r;
  r.prompt = "Once upon a time, a little";
  r.sampling.temperature = 0.9f;
  r.sampling.top_p = 0.95f;
  r.sampling.top_k = 40;
  r.sampling.seed = seed;
  r.max_new_tokens = max_new_tokens;
  r.ignore_eos = true;
  return r;
}

// Pages come back by message after a future resolves, so the count settles a moment later.
void expect_all_pages_free(const Engine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (engine.metrics().kv_pages_used != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.kv_pages_free + m.kv_pages_cached, m.kv_pages_total) << "cached pages are kept for the prefix cache";
  EXPECT_EQ(m.kv_pages_used, 0);
}

using EngineGolden = test::StoriesTest;

TEST_F(EngineGolden, OneClient) {
  Engine engine({.model_path = model_, .threads = 2});
  for (const auto& g : cases_) {
    RequestHandle h = engine.submit(golden_request(g));
    const Completion c = await(h);
    EXPECT_EQ(c.token_ids, g.greedy_ids) << g.prompt;
    EXPECT_EQ(c.prompt_tokens, int32_t(g.prompt_ids.size()));
    EXPECT_EQ(c.finish_reason, g.greedy_ids.back() == 1 ? FinishReason::Stop : FinishReason::Length) << g.prompt;
    EXPECT_GT(c.time_to_first_token_s, 0.0);
  }
  expect_all_pages_free(engine);
}

// An on_token callback that throws ends its own request with an error naming what it threw;
// the requests beside it in the same steps finish untouched, and the callback is not called
// again (not even for the held-back text at the end).
TEST_F(EngineGolden, ThrowingCallbackFailsOnlyItsRequest) {
  Engine engine({.model_path = model_, .threads = 2});
  std::vector<RequestHandle> others;
  for (const auto& g : cases_) others.push_back(engine.submit(golden_request(g)));
  std::atomic<int> calls{0};
  Request r = sampled_request(7);
  r.on_token = [&](const StreamEvent&) {
    if (++calls == 3) throw std::runtime_error("callback failed on purpose");
  };
  RequestHandle thrower = engine.submit(r);
  const Completion failed = await(thrower);
  EXPECT_EQ(failed.finish_reason, FinishReason::Error);
  EXPECT_NE(failed.error.find("callback failed on purpose"), std::string::npos) << failed.error;
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(failed.token_ids.size(), 3u);
  for (size_t i = 0; i < others.size(); ++i) EXPECT_EQ(await(others[i]).token_ids, cases_[i].greedy_ids);
  expect_all_pages_free(engine);
}

// 64 requests from 8 threads at once: golden greedy ones and seeded sampled ones mixed. Every
// greedy one gives the golden ids; every sampled one gives what the same seed gives alone.
TEST_F(EngineGolden, SixtyFourConcurrentRequestsFromEightThreads) {
  Engine engine({.model_path = model_, .threads = 2, .max_tokens_per_step = 256, .prefill_chunk = 16});
  std::map<uint64_t, std::vector<int32_t>> alone;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    RequestHandle h = engine.submit(sampled_request(seed));
    alone[seed] = await(h).token_ids;
  }
  EXPECT_NE(alone[0], alone[1]) << "different seeds should differ";

  constexpr int kThreads = 8, kPerThread = 8;
  std::vector<std::thread> clients;
  std::vector<std::vector<Completion>> results(kThreads);
  std::latch start(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      start.arrive_and_wait();
      std::vector<RequestHandle> handles;
      for (int i = 0; i < kPerThread; ++i) {
        const int n = t * kPerThread + i;
        handles.push_back(engine.submit(n % 2 ? golden_request(cases_[size_t(n / 2) % cases_.size()])
                                              : sampled_request(uint64_t(n / 2) % 8)));
      }
      for (auto& h : handles) results[t].push_back(await(h));
    });
  }
  for (auto& c : clients) c.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const int n = t * kPerThread + i;
      const auto& got = results[t][i].token_ids;
      if (n % 2) {
        EXPECT_EQ(got, cases_[size_t(n / 2) % cases_.size()].greedy_ids) << "request " << n;
      } else {
        EXPECT_EQ(got, alone[uint64_t(n / 2) % 8]) << "request " << n;
      }
    }
  }
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.finished, 8 + kThreads * kPerThread);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.queued, 0);
  expect_all_pages_free(engine);
}

// A pool far too small for the load: both preemption modes finish everything, with outputs
// identical to an unconstrained run.
TEST_F(EngineGolden, PreemptionGivesIdenticalOutputs) {
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    SCOPED_TRACE(mode == PreemptionMode::Recompute ? "recompute" : "swap");
    // 40 pages of 8 tokens: two golden stories' worth for ten concurrent ones.
    Engine engine({.model_path = model_, .threads = 2, .kv_pages = 40, .tokens_per_page = 8, .preemption = mode});
    std::vector<RequestHandle> handles;
    for (int i = 0; i < 10; ++i) {
      handles.push_back(i % 2 ? engine.submit(golden_request(cases_[size_t(i) % cases_.size()]))
                              : engine.submit(sampled_request(uint64_t(i), 120)));
    }
    int preempted = 0;
    for (int i = 0; i < 10; ++i) {
      const Completion c = await(handles[size_t(i)]);
      preempted += c.preemptions;
      if (i % 2) {
        EXPECT_EQ(c.token_ids, cases_[size_t(i) % cases_.size()].greedy_ids) << i;
      } else {
        Engine roomy({.model_path = model_, .threads = 1});
        RequestHandle solo = roomy.submit(sampled_request(uint64_t(i), 120));
        EXPECT_EQ(c.token_ids, await(solo).token_ids) << i;
      }
    }
    EXPECT_GT(preempted, 0) << "the pool was meant to run dry";
    EXPECT_EQ(engine.metrics().preempted, preempted);
    expect_all_pages_free(engine);
  }
}

TEST_F(EngineGolden, StreamsTokensAsTheyAreMade) {
  Engine engine({.model_path = model_, .threads = 2});
  Request r = golden_request(cases_[0]);
  r.stream = true;
  std::vector<int32_t> from_callback;
  std::string callback_text;
  r.on_token = [&](const StreamEvent& e) {
    if (e.token >= 0) from_callback.push_back(e.token);
    callback_text += e.text;
  };
  RequestHandle h = engine.submit(r);
  std::vector<int32_t> pulled;
  std::string pulled_text;
  while (auto e = h.next_token()) {
    if (e->token >= 0) pulled.push_back(e->token);
    pulled_text += e->text;
  }
  const Completion c = await(h);
  EXPECT_EQ(pulled, c.token_ids);
  EXPECT_EQ(from_callback, c.token_ids);
  EXPECT_EQ(pulled_text, c.text);
  EXPECT_EQ(callback_text, c.text);
  EXPECT_EQ(c.text, cases_[0].text.substr(cases_[0].prompt.size())) << "the golden text continues the prompt";
  EXPECT_FALSE(h.next_token()) << "the stream stays ended";
  EXPECT_TRUE(h.stream_ended());
}

// The pull stream with a timeout: nothing yet, then every token, then the end.
TEST_F(EngineGolden, StreamWithATimeoutLetsTheReaderDoOtherThings) {
  Engine engine({.model_path = model_, .threads = 2});
  Request r = golden_request(cases_[0]);
  r.stream = true;
  std::latch go(1);
  r.on_token = [&](const StreamEvent&) { go.wait(); };  // holds the first token back
  RequestHandle h = engine.submit(r);
  EXPECT_FALSE(h.next_token(std::chrono::milliseconds(20))) << "no token may come while the engine is held";
  EXPECT_FALSE(h.stream_ended());
  go.count_down();
  std::vector<int32_t> pulled;
  while (!h.stream_ended()) {
    if (auto e = h.next_token(std::chrono::milliseconds(50)); e && e->token >= 0) pulled.push_back(e->token);
  }
  EXPECT_EQ(pulled, await(h).token_ids);
  EXPECT_EQ(pulled, cases_[0].greedy_ids);
}

TEST_F(EngineGolden, StopStringsCutTheText) {
  Engine engine({.model_path = model_, .threads = 2});
  Request r = golden_request(cases_[0]);
  r.stop_strings = {"Lily"};
  r.stream = true;
  RequestHandle h = engine.submit(r);
  std::string streamed;
  while (auto e = h.next_token()) streamed += e->text;
  const Completion c = await(h);
  EXPECT_EQ(c.finish_reason, FinishReason::Stop);
  EXPECT_EQ(c.text, ", there was a little girl named ");
  EXPECT_EQ(streamed, c.text) << "the stream must not show text a stop string cut";
}

TEST_F(EngineGolden, TheCompletionNamesTheStopStringThatStartsFirst) {
  Engine engine({.model_path = model_, .threads = 2});
  Request r = golden_request(cases_[0]);
  r.stop_strings = {"Lily", "no such text", "named Lily"};
  RequestHandle h = engine.submit(r);
  const Completion c = await(h);
  EXPECT_EQ(c.finish_reason, FinishReason::Stop);
  EXPECT_EQ(c.stop_string, "named Lily");
  EXPECT_EQ(c.text, ", there was a little girl ");
  r.stop_strings = {"no such text"};
  RequestHandle unstopped = engine.submit(r);
  EXPECT_EQ(await(unstopped).stop_string, "") << "no stop string ended this output";
}

TEST_F(EngineGolden, CancelAtEveryStage) {
  Engine engine({.model_path = model_, .threads = 2, .max_running = 1, .prefill_chunk = 1});
  // During decode: from the token callback, after five tokens.
  {
    Request r = golden_request(cases_[0]);
    std::atomic<int> seen{0};
    std::optional<RequestHandle> h;
    std::latch published(1);  // the callback may run before submit() has returned
    r.on_token = [&](const StreamEvent&) {
      if (++seen == 5) {
        published.wait();
        h->cancel();
      }
    };
    h.emplace(engine.submit(r));
    published.count_down();
    const Completion c = await(*h);
    EXPECT_EQ(c.finish_reason, FinishReason::Cancelled);
    EXPECT_GE(c.token_ids.size(), 5u);
    EXPECT_LT(c.token_ids.size(), cases_[0].greedy_ids.size());
  }
  // Before admission: the one running slot is held by a request whose callback blocks.
  {
    std::latch release(1);
    Request blocker = golden_request(cases_[0]);
    blocker.on_token = [&](const StreamEvent&) { release.wait(); };
    RequestHandle first = engine.submit(blocker);
    RequestHandle queued = engine.submit(golden_request(cases_[1]));
    queued.cancel();
    const Completion c = await(queued);
    EXPECT_EQ(c.finish_reason, FinishReason::Cancelled);
    EXPECT_TRUE(c.token_ids.empty());
    release.count_down();
    first.cancel();
    EXPECT_EQ(await(first).finish_reason, FinishReason::Cancelled);
  }
  // During prefill: a 400-token prompt fed one token a step.
  {
    Request r;
    r.prompt_ids.assign(400, 300);
    r.max_new_tokens = 10;
    RequestHandle h = engine.submit(r);
    while (engine.metrics().running == 0) std::this_thread::sleep_for(100us);
    h.cancel();
    const Completion c = await(h);
    EXPECT_EQ(c.finish_reason, FinishReason::Cancelled);
    EXPECT_TRUE(c.token_ids.empty()) << "cancelled before its prompt was through";
  }
  // After the end: cancel is a no-op.
  RequestHandle done = engine.submit(golden_request(cases_[2]));
  EXPECT_EQ(await(done).token_ids, cases_[2].greedy_ids);
  done.cancel();
  expect_all_pages_free(engine);
}

TEST_F(EngineGolden, ShutdownWithAHundredRequestsInFlight) {
  Engine engine({.model_path = model_, .threads = 2, .kv_pages = 64, .max_running = 16});
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 100; ++i) handles.push_back(engine.submit(sampled_request(uint64_t(i), 200)));
  std::this_thread::sleep_for(20ms);
  engine.shutdown();
  int cancelled = 0;
  for (auto& h : handles) {
    const Completion c = await(h);
    EXPECT_TRUE(c.finish_reason == FinishReason::Cancelled || c.finish_reason == FinishReason::Length);
    cancelled += c.finish_reason == FinishReason::Cancelled;
  }
  EXPECT_GT(cancelled, 0);
  expect_all_pages_free(engine);
  EXPECT_THROW(engine.submit(sampled_request(1)), Error) << "no submits after shutdown";
}

TEST(Engine, BadRequestsAreRefusedAtSubmit) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 1, .kv_pages = 8});  // 128 tokens of KV
  auto refused = [&](Request r, const std::string& phrase) {
    try {
      engine.submit(std::move(r));
      ADD_FAILURE() << "accepted a request that should fail with '" << phrase << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  Request ok;
  ok.prompt = "hello";
  ok.max_new_tokens = 4;
  refused(Request{}, "empty");
  Request r = ok;
  r.prompt_ids = {1, 5, 1000};
  refused(r, "outside the vocabulary");
  r = ok;
  r.max_new_tokens = 0;
  refused(r, "max_new_tokens");
  r = ok;
  r.max_new_tokens = 300;  // context is 256
  refused(r, "context length");
  r = ok;
  r.max_new_tokens = 200;  // fits the context, not the 128-token cache
  refused(r, "could never run");
  r = ok;
  r.sampling.top_p = 2.0f;
  refused(r, "top_p");
  r = ok;
  r.sampling.temperature = -1.0f;
  refused(r, "temperature");
  r = ok;
  r.stop_token_ids = {-3};
  refused(r, "stop token");
  EXPECT_EQ(engine.metrics().queued, 0) << "nothing was queued";
  // The engine still serves.
  RequestHandle h = engine.submit(ok);
  EXPECT_EQ(await(h).token_ids.size(), 4u);
}

TEST(Engine, UnknownAdapterFailsThatRequestAlone) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 1});
  Request bad;
  bad.prompt = "hello";
  bad.adapter = "no-such-adapter";
  bad.max_new_tokens = 3;
  Request good = bad;
  good.adapter.clear();
  RequestHandle b = engine.submit(bad), g = engine.submit(good);
  const Completion cb = await(b);
  EXPECT_EQ(cb.finish_reason, FinishReason::Error);
  EXPECT_NE(cb.error.find("no-such-adapter"), std::string::npos) << cb.error;
  EXPECT_EQ(await(g).token_ids.size(), 3u);
}

TEST_F(EngineGolden, TellsItsVocabulary) {
  Engine engine({.model_path = model_, .threads = 1});
  EXPECT_TRUE(engine.add_bos());
  EXPECT_EQ(engine.tokenize(cases_[0].prompt, true), cases_[0].prompt_ids);
  EXPECT_EQ(engine.eos_id(), 2);
  std::map<std::string, int32_t> specials;
  for (const auto& s : engine.special_tokens()) specials[s.piece] = s.id;
  EXPECT_EQ(specials, (std::map<std::string, int32_t>{{"<s>", 1}, {"</s>", 2}}));
}

TEST(Engine, BadConfigAndModelAreRefused) {
  EXPECT_THROW(Engine({.model_path = test::scratch_path("missing.gguf")}), Error);
  EXPECT_THROW(Engine({.model_path = test::tiny_gqa_model(), .tokens_per_page = 0}), Error);
  EXPECT_THROW(Engine({.model_path = test::tiny_gqa_model(), .kv_bytes = 10}), Error);
}

// CPU seconds of every thread of this process.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// An engine with nothing to do parks every thread: the actors block on their mailboxes and the
// compute threads sleep. Over a second of idleness after a request, the process uses a small
// fraction of one core, where a single spinning thread would use all of it.
TEST(Engine, IdleEngineBurnsNoCpu) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 2});
  EXPECT_EQ(engine.submit(test::greedy_request({1, 5, 9, 33}, 8)).get().finish_reason, FinishReason::Length);
  std::this_thread::sleep_for(200ms);  // the compute threads may spin a little before they sleep
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(1s);
  EXPECT_LT(process_cpu_seconds() - before, 0.2) << "CPU seconds used in one idle second";
}

TEST(Engine, IdleEngineShutsDownCleanly) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 1});
  engine.shutdown();
  engine.shutdown();
  expect_all_pages_free(engine);
}

}  // namespace
}  // namespace pagoda
