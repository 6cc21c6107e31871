#include "examples/loadgen/driver.h"

#include <sys/resource.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "examples/common/progress.h"
#include "examples/loadgen/turn_queue.h"

namespace pagoda::loadgen {
namespace {

// Samples the KV cache and shows progress until stopped.
class Monitor {
 public:
  Monitor(const Backend& backend, int64_t total, const std::atomic<int64_t>& done, Clock::time_point start)
      : backend_(backend),
        done_(done),
        start_(start),
        progress_(backend.name, total),
        thread_([this](std::stop_token stop) { run(stop); }) {}

  KvSamples stop() {
    thread_.request_stop();
    thread_.join();
    progress_.finish();
    kv_.mean_utilization = samples_ ? utilization_sum_ / double(samples_) : 0.0;
    return kv_;
  }

 private:
  void run(std::stop_token stop) {
    auto next_report = start_ + period();
    while (!stop.stop_requested()) {
      Gauge g{};
      try {
        g = backend_.gauge();
      } catch (const std::exception&) {  // a sample the server did not answer: the next one counts
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      kv_.peak_pages = std::max(kv_.peak_pages, g.pages_used);
      kv_.total_pages = g.pages_total;
      utilization_sum_ += g.pages_total ? double(g.pages_used) / double(g.pages_total) : 0.0;
      ++samples_;
      const auto now = Clock::now();
      if (now >= next_report) {
        const double elapsed = std::chrono::duration<double>(now - start_).count();
        progress_.update(done_.load(), elapsed, elapsed > 0 ? double(g.generated_tokens) / elapsed : 0.0,
                         g.pages_total ? double(g.pages_used) / double(g.pages_total) : 0.0);
        next_report = now + period();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  Clock::duration period() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(progress_.period_s()));
  }

  const Backend& backend_;
  const std::atomic<int64_t>& done_;
  Clock::time_point start_;
  Progress progress_;
  KvSamples kv_;
  double utilization_sum_ = 0.0;
  int64_t samples_ = 0;
  std::jthread thread_;  // last: it starts once everything above is built
};

// User and system CPU time of the whole process so far.
double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return s(u.ru_utime) + s(u.ru_stime);
}

// A conversation between its turns.
struct ConversationState {
  std::vector<int32_t> context;  // every prompt and reply so far
  size_t turn = 0;               // the next one
};

// Sends a conversation's next turn, its context so far and the turn's new message, and waits
// for it; the reply joins the context.
RequestRecord send_turn(const Backend& backend, const Conversation& c, ConversationState& state,
                        Clock::time_point start) {
  const std::vector<int32_t>& message = state.turn == 0 ? c.prompt : c.later_messages[state.turn - 1];
  state.context.insert(state.context.end(), message.begin(), message.end());
  const auto sent = Clock::now();
  Served s = backend.serve(state.context, c);
  const auto now = Clock::now();
  const RequestRecord record{s.ttft_s,
                             s.tpot_s,
                             seconds(now - sent),
                             seconds(now - start),
                             s.prompt_tokens > 0 ? s.prompt_tokens : int32_t(state.context.size()),
                             s.tokens,
                             s.preemptions,
                             int32_t(state.turn),
                             s.dropped};
  state.context.insert(state.context.end(), s.reply.begin(), s.reply.end());
  ++state.turn;
  return record;
}

}  // namespace

// `concurrency` clients take conversations from a TurnQueue; a conversation's first turn waits
// for its arrival time. A turn whose time comes while every client is busy is sent late:
// client-side queueing is not counted in its latency, as with a real client's pool.
RunSummary drive(const Backend& backend, const std::vector<Conversation>& work, bool interleave_turns,
                 int32_t concurrency) {
  const size_t turns = work.empty() ? 1 : 1 + work[0].later_messages.size();
  std::vector<RequestRecord> records(work.size() * turns);  // conversation-major
  std::vector<ConversationState> states(work.size());
  std::vector<char> failed(work.size(), 0);  // per conversation
  TurnQueue queue(work.size());
  std::atomic<int64_t> done{0};  // turns
  std::mutex error_mutex;
  std::string error;
  const double cpu_start = process_cpu_s();
  const auto start = Clock::now();
  Monitor monitor(backend, int64_t(records.size()), done, start);
  auto client = [&] {
    while (const std::optional<size_t> i = queue.take()) {
      const Conversation& c = work[*i];
      ConversationState& state = states[*i];
      if (state.turn == 0) {
        std::this_thread::sleep_until(
            start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.arrival_s)));
      }
      try {
        do {
          const size_t turn = state.turn;
          records[*i * turns + turn] = send_turn(backend, c, state, start);
          ++done;
        } while (!interleave_turns && state.turn < turns);
      } catch (const std::exception& e) {
        failed[*i] = 1;
        done += int64_t(turns - state.turn);  // the turns it will not send
        std::lock_guard lock(error_mutex);
        if (error.empty()) error = e.what();
      }
      if (failed[*i] || state.turn == turns) {
        queue.finish();
      } else {
        queue.put_back(*i);
      }
    }
  };
  std::vector<std::jthread> clients;
  for (int32_t c = 0; c < concurrency; ++c) clients.emplace_back(client);
  clients.clear();  // joins
  const KvSamples kv = monitor.stop();
  // A failed conversation counts as failed requests, and its records stay out of the figures.
  std::vector<RequestRecord> served;
  int64_t failures = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    if (failed[i]) {
      failures += int64_t(turns);
      continue;
    }
    served.insert(served.end(), records.begin() + ptrdiff_t(i * turns), records.begin() + ptrdiff_t((i + 1) * turns));
  }
  RunSummary s = summarize(backend.name, served, kv, process_cpu_s() - cpu_start);  // each turn is a request
  s.failed = failures;
  s.first_error = error;
  s.load_average = load_average();
  return s;
}

}  // namespace pagoda::loadgen
