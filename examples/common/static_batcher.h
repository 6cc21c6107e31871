#pragma once
// The baseline pagoda-loadgen measures the engine against: static batching with max padding,
// as servers batched before continuous batching, on the same ModelRunner and kernels. It waits
// until a full batch of requests has arrived, pads every prompt on the left to the batch's
// longest, prefills them all in one step, then runs decode steps for the whole batch until
// its longest output is done. Members that finished early keep their row and are fed a pad
// token, so the padding is computed and costs what it really costs. Each batch's KV pages are
// reserved up front for the longest prompt plus the longest output, as static servers
// preallocate. A request's future resolves at its own last token (as if streamed), so its
// client may send the next request, which then waits for the next batch.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <span>
#include <thread>
#include <variant>
#include <vector>

#include "actors/mailbox.h"
#include "engine/forward/model_runner.h"
#include "engine/kv/page_pool.h"
#include "engine/sampling/sampler.h"
#include "pagoda/error.h"

namespace pagoda::loadgen {

using Clock = std::chrono::steady_clock;

// When a request's tokens came out.
struct TokenTimes {
  Clock::time_point first;  // first generated token
  Clock::time_point last;   // last generated token
  int32_t tokens = 0;
};

class StaticBatcher {
 public:
  // Batches of `batch_size`; the last one runs short once `total_requests` have arrived.
  StaticBatcher(ModelRunner& runner, int32_t kv_pages, int32_t tokens_per_page, KvCacheType kv_type, int32_t batch_size,
                int64_t total_requests, const SamplingParams& sampling)
      : runner_(runner),
        pool_(KvLayout::for_model(runner.config(), tokens_per_page, kv_type), kv_pages),
        batch_size_(batch_size),
        total_requests_(total_requests),
        sampling_(sampling),
        pad_id_(runner.model().tokenizer.eos_id()),
        thread_([this] { run(); }) {}

  ~StaticBatcher() {
    inbox_.post(Quit{});
    thread_.join();
  }

  StaticBatcher(const StaticBatcher&) = delete;
  StaticBatcher& operator=(const StaticBatcher&) = delete;

  // Thread-safe. The future fails if the batch could not run (e.g. too few KV pages).
  std::future<TokenTimes> submit(std::vector<int32_t> prompt, int32_t max_new_tokens) {
    Pending p{std::move(prompt), max_new_tokens, {}};
    std::future<TokenTimes> f = p.done.get_future();
    inbox_.post(std::move(p));
    return f;
  }

  int32_t pages_used() const { return pages_used_.load(std::memory_order_relaxed); }
  int32_t pages_total() const { return pool_.capacity(); }
  int64_t generated_tokens() const { return generated_.load(std::memory_order_relaxed); }

 private:
  struct Pending {
    std::vector<int32_t> prompt;
    int32_t max_new_tokens;
    std::promise<TokenTimes> done;
  };
  struct Quit {};
  using Message = std::variant<Quit, Pending>;

  // A request in the running batch.
  struct Member {
    Pending request;
    std::vector<int32_t> history;  // the real prompt, then generated: the sampler's history
    BlockTable table;
    Sampler sampler;
    int32_t fed = 0;  // this step's token (the last generated, or the pad)
    TokenTimes times;
    bool finished = false;
  };

  void run() {
    std::vector<Pending> batch;
    int64_t received = 0;
    for (;;) {
      Message m = inbox_.receive();
      auto* p = std::get_if<Pending>(&m);
      if (!p) return;
      batch.push_back(std::move(*p));
      ++received;
      if (int32_t(batch.size()) == batch_size_ || received == total_requests_) {
        run_batch(batch);
        batch.clear();
      }
    }
  }

  void run_batch(std::vector<Pending>& requests) {
    std::vector<Member> members;
    members.reserve(requests.size());
    int32_t pad_to = 0, steps = 0;
    for (Pending& r : requests) {
      pad_to = std::max(pad_to, int32_t(r.prompt.size()));
      steps = std::max(steps, r.max_new_tokens);
      std::vector<int32_t> history = r.prompt;
      members.push_back(
          {std::move(r), std::move(history), BlockTable(pool_.layout()), Sampler(sampling_), 0, {}, false});
    }
    try {
      reserve(members, pad_to + steps);
      prefill(members, pad_to);
      for (int32_t s = 1; s < steps; ++s) decode(members, pad_to + s - 1);
    } catch (...) {
      for (Member& m : members) {
        if (!m.finished) m.request.done.set_exception(std::current_exception());
      }
    }
    for (Member& m : members) m.table.release(pool_);
    pages_used_.store(pool_.used_pages(), std::memory_order_relaxed);
  }

  void reserve(std::vector<Member>& members, int32_t positions) {
    const int32_t per_member = members.front().table.pages_needed(0, positions);
    if (int64_t(per_member) * int64_t(members.size()) > pool_.free_pages()) {
      throw Error("a static batch of " + std::to_string(members.size()) + " needs " +
                  std::to_string(per_member * int64_t(members.size())) + " KV pages; the cache has " +
                  std::to_string(pool_.free_pages()));
    }
    for (Member& m : members) m.table.reserve(positions, pool_);
    pages_used_.store(pool_.used_pages(), std::memory_order_relaxed);
  }

  // Every prompt, left-padded to `pad_to` tokens, in one step.
  void prefill(std::vector<Member>& members, int32_t pad_to) {
    std::vector<std::vector<int32_t>> padded;
    padded.reserve(members.size());
    batch_.entries.clear();
    for (Member& m : members) {
      std::vector<int32_t> tokens(size_t(pad_to) - m.request.prompt.size(), pad_id_);
      tokens.insert(tokens.end(), m.request.prompt.begin(), m.request.prompt.end());
      padded.push_back(std::move(tokens));
      batch_.entries.push_back({padded.back(), 0, &m.table, true});
    }
    runner_.forward(batch_, pool_.view(), logits_);
    sample(members);
  }

  // One token for every member, finished or not, at position `n_cached`.
  void decode(std::vector<Member>& members, int32_t n_cached) {
    batch_.entries.clear();
    for (Member& m : members) {
      m.fed = m.finished ? pad_id_ : m.history.back();
      batch_.entries.push_back({std::span<const int32_t>(&m.fed, 1), n_cached, &m.table, true});
    }
    runner_.forward(batch_, pool_.view(), logits_);
    sample(members);
  }

  // The next token of every unfinished member; a member is done at its own max_new_tokens.
  void sample(std::vector<Member>& members) {
    const size_t vocab = size_t(runner_.config().vocab_size);
    int64_t made = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      Member& m = members[i];
      if (m.finished) continue;
      const std::span<const float> row(logits_.data() + i * vocab, vocab);
      m.history.push_back(m.sampler.sample(row, m.history));
      const auto now = Clock::now();  // as the engine stamps a token: once it is sampled
      if (m.times.tokens++ == 0) m.times.first = now;
      m.times.last = now;
      ++made;
      if (m.times.tokens == m.request.max_new_tokens) {
        m.finished = true;
        m.request.done.set_value(m.times);
      }
    }
    generated_.fetch_add(made, std::memory_order_relaxed);
  }

  ModelRunner& runner_;
  PagePool pool_;
  int32_t batch_size_;
  int64_t total_requests_;
  SamplingParams sampling_;
  int32_t pad_id_;
  Mailbox<Message> inbox_;
  Batch batch_;
  std::vector<float> logits_;
  std::atomic<int32_t> pages_used_{0};
  std::atomic<int64_t> generated_{0};
  std::thread thread_;  // last: it starts once everything above is built
};

}  // namespace pagoda::loadgen
