// Micro-benchmarks of the actor plumbing, everything around the forward pass:
//   - Mailbox throughput, 1..8 producer threads into one consumer (messages/s);
//   - a request/reply round trip between two actor threads (post + Reply wait), bare and as
//     the decode scheduler asks the page-pool actor for a page;
//   - the decode scheduler's per-step cost at 1..1024 running sequences: planning the batch
//     (engine/scheduling/step_planner.h), page bookkeeping through the page-pool actor, and the
//     per-token updates after the step.
// On a 2-core machine, more than one producer oversubscribes the cores: that is the point of
// the 4 and 8 producer cases (many application threads submitting at once).

#include <benchmark/benchmark.h>

#include <chrono>
#include <latch>
#include <memory>
#include <span>
#include <thread>
#include <variant>
#include <vector>

#include "actors/actor.h"
#include "actors/mailbox.h"
#include "actors/page_pool_actor.h"
#include "actors/reply.h"
#include "engine/forward/batch.h"
#include "engine/request/sequence.h"
#include "engine/scheduling/step_planner.h"
#include "pagoda/engine.h"

namespace {

using namespace pagoda;

// The size of the actors' own messages: a variant tag and a pointer.
struct Ping {
  int64_t value;
  int64_t sender;
};

void BM_MailboxThroughput(benchmark::State& state) {
  const int producers = int(state.range(0));
  constexpr int64_t kMessages = 200'000;  // per iteration, over all producers
  const int64_t per_producer = kMessages / producers;
  for (auto _ : state) {
    Mailbox<Ping> mailbox;
    std::latch go(1);
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        go.wait();
        for (int64_t i = 0; i < per_producer; ++i) mailbox.post({i, p});
      });
    }
    // Timed from the start signal, so thread creation is not counted.
    const auto start = std::chrono::steady_clock::now();
    go.count_down();
    for (int64_t i = 0; i < per_producer * producers; ++i) benchmark::DoNotOptimize(mailbox.receive());
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    state.SetIterationTime(elapsed.count());
    for (std::thread& t : threads) t.join();
  }
  state.SetItemsProcessed(state.iterations() * per_producer * producers);
}

// An actor that answers every question with its value plus one.
struct Question {
  int64_t value;
  std::shared_ptr<Reply<int64_t>> reply;
};
struct Quit {};
using EchoMessage = std::variant<Quit, Question>;

class Echo : public Actor<EchoMessage> {
 protected:
  void handle(EchoMessage message) override {
    if (auto* q = std::get_if<Question>(&message)) {
      q->reply->set(q->value + 1);
    } else {
      stop();
    }
  }
};

// What an actor pays to ask another one something and wait: one Reply allocated, one post,
// one wake-up each way.
void BM_RoundTrip(benchmark::State& state) {
  Echo echo;
  echo.start();
  int64_t value = 0;
  for (auto _ : state) {
    auto reply = Reply<int64_t>::make();
    echo.post(Question{value, reply});
    value = reply->wait();
  }
  echo.post(Quit{});
  echo.join();
  benchmark::DoNotOptimize(value);
}

// The page-pool round trip the decode scheduler makes when a sequence crosses a page boundary:
// allocate one page (post + wait), then give it back (post, no wait).
void BM_PageRoundTrip(benchmark::State& state) {
  PagePool pool(KvLayout{1, 1, 4, 16}, 1024);
  MetricsBoard metrics;
  PagePoolActor actor(pool, metrics);
  actor.start();
  for (auto _ : state) {
    auto pages = actor.allocate(1, 0, PageRequester::Decode);
    actor.release(std::move(*pages));
  }
  actor.post(Stop{});
  actor.join();
  actor.drain();
}

// ---- The decode scheduler's step, without the forward pass ----
//
// DecodeScheduler needs the whole engine around it, so its step is rebuilt here around the
// same planner: the step planner plans the entries (decodes first, then prefill chunks in admission
// order cut to the token budget and entry cap) and their pages, which come from the page-pool
// actor in one round trip; then the batch entries are built and, in place of the
// forward pass and the sampler, every sequence whose chunk completed gets a fixed token. Nothing
// speculates and the pool never runs dry here (preemption is not measured). A sequence that
// reaches its length gives its pages back (one-way post) and starts over as a new prompt, so
// the mix of prefills and decodes stays steady; its new prompt's pages are allocated by the
// plan rather than by the prefill scheduler.

constexpr int32_t kTokensPerPage = 16;
constexpr int32_t kPromptLen = 64;
constexpr int32_t kGenerated = 192;  // tokens each sequence generates before starting over
constexpr int32_t kPrefillChunk = 64;

// The engine's default, mixed-adapter batches: no sequence is left out for its adapter. The caps
// are large enough that every running sequence is in every step: this is the cost of a plan
// over n entries, not of the default caps (512 tokens, 256 entries).
EngineConfig step_config(int32_t n_running) {
  EngineConfig config;
  config.max_tokens_per_step = n_running + kPrefillChunk;
  config.max_entries_per_step = n_running;
  config.prefill_chunk = kPrefillChunk;
  return config;
}

Tokenizer tiny_tokenizer() {
  TokenizerVocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "a"};
  v.scores = {0, 0, 0, 0};
  v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Normal};
  return Tokenizer(std::move(v));
}

class PlanBench {
 public:
  explicit PlanBench(int32_t n_running)
      : tokenizer_(tiny_tokenizer()),
        pool_(KvLayout{1, 1, 4, kTokensPerPage}, n_running * ((kPromptLen + kGenerated) / kTokensPerPage + 2)),
        actor_(pool_, metrics_),
        planner_(step_config(n_running)) {
    // Staggered ages, so that sequences cross page boundaries and restart on different steps.
    for (int32_t i = 0; i < n_running; ++i) {
      running_.push_back(new_sequence());
      Sequence& s = *running_.back();
      const int32_t age = (i * 37) % kGenerated;
      s.tokens.resize(size_t(kPromptLen + age), 3);
      s.n_cached = int32_t(s.tokens.size()) - 1;
      s.status = SequenceStatus::Decoding;
      s.table.reserve(int32_t(s.tokens.size()), pool_);
    }
    actor_.start();  // from here on only the actor touches the pool
  }

  ~PlanBench() {
    actor_.post(Stop{});
    actor_.join();
    actor_.drain();
  }

  void step() {
    for (SequencePtr& seq : running_) {
      if (seq->cancel_requested()) seq->status = SequenceStatus::Finished;
    }
    std::erase_if(running_, [](const SequencePtr& s) { return s->status == SequenceStatus::Finished; });
    plan();
    batch_.entries.clear();
    for (const Planned& p : planned_) {
      Sequence& s = *p.seq;
      const bool last_chunk = s.n_cached + p.n_tokens == int32_t(s.tokens.size());
      batch_.entries.push_back({std::span<const int32_t>(s.tokens).subspan(s.n_cached, p.n_tokens), s.n_cached,
                                &s.table, last_chunk, s.lora.get()});
    }
    benchmark::DoNotOptimize(batch_.entries.data());
    after_forward();
  }

 private:
  struct Planned {
    Sequence* seq;
    int32_t n_tokens;
  };

  SequencePtr new_sequence() {
    Request r;
    r.max_new_tokens = kGenerated;
    auto seq = std::make_unique<Sequence>(std::make_shared<detail::RequestState>(), r,
                                          std::vector<int32_t>(kPromptLen, 3), tokenizer_, actor_.layout());
    seq->status = SequenceStatus::Prefilling;
    return seq;
  }

  void plan() {
    views_.clear();
    for (const SequencePtr& seq : running_) views_.push_back(scheduling::view_of(*seq));
    planner_.plan_entries(views_, turn_++, false, plan_);
    auto pages = actor_.allocate(plan_.pages, 0, PageRequester::Decode);
    std::span<const int32_t> next(*pages);
    planned_.clear();
    for (const scheduling::PlannedEntry& e : plan_.entries) {
      Sequence& seq = *running_[e.sequence];
      seq.table.grow(seq.n_cached, seq.n_cached + e.n_tokens, next.first(size_t(e.pages)));
      next = next.subspan(size_t(e.pages));
      planned_.push_back({&seq, e.n_tokens});
    }
  }

  // process_outputs() without the sampler and the token's text, then the retirements.
  void after_forward() {
    for (const Planned& p : planned_) {
      Sequence& seq = *p.seq;
      seq.n_cached += p.n_tokens;
      if (seq.n_cached < int32_t(seq.tokens.size())) continue;
      seq.status = SequenceStatus::Decoding;
      seq.tokens.push_back(3);
      if (seq.generated() >= kGenerated) restart(seq);
    }
  }

  void restart(Sequence& seq) {
    actor_.release(seq.table.take_pages());
    seq.tokens.resize(kPromptLen);
    seq.n_cached = 0;
    seq.status = SequenceStatus::Prefilling;
  }

  Tokenizer tokenizer_;
  PagePool pool_;
  MetricsBoard metrics_;
  PagePoolActor actor_;
  scheduling::StepPlanner planner_;
  std::vector<SequencePtr> running_;
  // Reused from step to step, as the scheduler does.
  std::vector<scheduling::SequenceView> views_;
  scheduling::StepPlan plan_;
  std::vector<Planned> planned_;
  size_t turn_ = 0;
  Batch batch_;
};

void BM_SchedulerStep(benchmark::State& state) {
  const int32_t n = int32_t(state.range(0));
  PlanBench bench(n);
  for (int i = 0; i < kGenerated; ++i) bench.step();  // warm-up: vectors reach their sizes
  for (auto _ : state) bench.step();
  state.counters["per_seq"] =
      benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(BM_MailboxThroughput)->ArgName("producers")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseManualTime();
BENCHMARK(BM_RoundTrip)->UseRealTime();
BENCHMARK(BM_PageRoundTrip)->UseRealTime();
BENCHMARK(BM_SchedulerStep)->ArgName("running")->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->UseRealTime();

BENCHMARK_MAIN();
