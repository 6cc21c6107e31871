// pagoda-soak: drives one Engine for a set time with a mixed, adversarial workload and checks
// that nothing is lost: random prompt and output lengths, prompts sharing prefixes (prefix
// cache churn), cancels at every stage, adapters loaded and unloaded under load, a KV pool small
// enough to force preemption (recompute, then swap), slow and throwing `on_token` callbacks,
// pull streams nobody reads, and bad requests. At the end of each phase it asserts that every
// future resolved, every page came back, RSS did not grow after warm-up and the metrics agree
// with the completions seen; then it shuts the engine down with requests in flight.
//
//   pagoda-soak [-m MODEL] [--seconds N] [--clients N] [--kv-pages N] [--seed N]
//
// Without -m it writes a small random model (and its adapters) into a temporary folder.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/model.h"
#include "testing/lora_synth.h"
#include "testing/synth.h"
#include "examples/common/args.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr int kAdapters = 4;
#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer holds freed memory in its quarantine (256 MB by default) before reusing it,
// so RSS climbs by design there; the growth check is for real builds.
constexpr bool kRssIsMeaningful = false;
#else
constexpr bool kRssIsMeaningful = true;
#endif
constexpr auto kResolveLimit = std::chrono::seconds(120);  // a future slower than this has hung

double rss_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return double(pages_resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

struct Failures {
  std::mutex mutex;
  std::vector<std::string> list;
  void add(const std::string& what) {
    std::lock_guard lock(mutex);
    if (list.size() < 20) std::fprintf(stderr, "pagoda-soak: FAIL: %s\n", what.c_str());
    list.push_back(what);
  }
};

struct Tally {
  std::atomic<int64_t> submitted{0}, refused{0}, completed{0}, tokens{0};
  std::atomic<int64_t> cancels{0}, cancelled{0}, errors{0}, callback_throws{0}, adapter_loads{0}, adapter_unloads{0};
  std::map<pagoda::FinishReason, std::atomic<int64_t>> by_reason;
  Tally() {
    for (auto r : {pagoda::FinishReason::Eos, pagoda::FinishReason::Length, pagoda::FinishReason::Stop,
                   pagoda::FinishReason::Cancelled, pagoda::FinishReason::Error}) {
      by_reason[r];
    }
  }
};

struct Workload {
  int32_t vocab = 0;
  std::vector<std::vector<int32_t>> prefixes;  // shared "system prompts"
  std::vector<std::string> adapter_paths;
};

// What one client does to one request.
enum class Callback { None, Slow, Throws, UnreadStream, ReadStream };
enum class Cancel { None, AtOnce, AfterDelay, AfterTokens };

class Client {
 public:
  Client(pagoda::Engine& engine, const Workload& w, Tally& tally, Failures& failures, uint64_t seed)
      : engine_(engine), w_(w), tally_(tally), failures_(failures), rng_(seed) {}

  void run_until(Clock::time_point deadline) {
    while (Clock::now() < deadline) one_request();
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  std::vector<int32_t> random_ids(int n) {
    std::vector<int32_t> ids(n);
    for (int32_t& id : ids) id = 3 + pick(w_.vocab - 3);
    return ids;
  }

  pagoda::Request make_request() {
    pagoda::Request r;
    if (chance(0.6)) r.prompt_ids = w_.prefixes[pick(int(w_.prefixes.size()))];
    const std::vector<int32_t> rest = random_ids(1 + pick(chance(0.2) ? 160 : 48));
    r.prompt_ids.insert(r.prompt_ids.end(), rest.begin(), rest.end());
    r.max_new_tokens = 1 + pick(48);
    if (chance(0.5)) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = rng_();
    } else {
      r.sampling.temperature = 0.0f;
    }
    if (chance(0.3)) r.adapter = "soak" + std::to_string(pick(kAdapters));
    if (chance(0.1)) r.stop_strings = {"e", "the"};
    r.ignore_eos = chance(0.5);
    r.prefix_cache = !chance(0.1);
    return r;
  }

  void one_request() {
    if (chance(0.02)) return bad_request();
    pagoda::Request r = make_request();
    const auto callback = Callback(pick(5));
    const auto cancel = chance(0.5) ? Cancel::None : Cancel(1 + pick(3));
    auto seen = std::make_shared<std::atomic<int32_t>>(0);
    const int32_t throw_at = 1 + pick(8);
    if (callback == Callback::Slow) {
      r.on_token = [seen](const pagoda::StreamEvent&) {
        seen->fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(300));
      };
    } else if (callback == Callback::Throws) {
      r.on_token = [seen, throw_at](const pagoda::StreamEvent&) {
        if (seen->fetch_add(1) + 1 == throw_at) throw std::runtime_error("soak: on_token throws");
      };
    } else {
      r.on_token = [seen](const pagoda::StreamEvent&) { seen->fetch_add(1); };
    }
    r.stream = callback == Callback::UnreadStream || callback == Callback::ReadStream;
    const int32_t max_new = r.max_new_tokens;

    std::optional<pagoda::RequestHandle> handle;
    try {
      handle.emplace(engine_.submit(std::move(r)));
    } catch (const pagoda::Error& e) {
      failures_.add(std::string("a valid request was refused: ") + e.what());
      return;
    }
    tally_.submitted++;
    bool cancelled = false;
    auto request_cancel = [&] {
      handle->cancel();
      cancelled = true;
      tally_.cancels++;
    };
    if (cancel == Cancel::AtOnce) request_cancel();
    if (cancel == Cancel::AfterDelay) {
      std::this_thread::sleep_for(std::chrono::microseconds(pick(20000)));
      request_cancel();
    }
    if (callback == Callback::ReadStream) {
      const int32_t stop_after = cancel == Cancel::AfterTokens ? 1 + pick(6) : INT32_MAX;
      int32_t read = 0;
      while (auto event = handle->next_token(std::chrono::milliseconds(5000))) {
        if (++read == stop_after) request_cancel();
      }
    } else if (cancel == Cancel::AfterTokens) {
      const int32_t wait_for = 1 + pick(6);
      const auto give_up = Clock::now() + std::chrono::seconds(5);
      while (seen->load() < wait_for && Clock::now() < give_up &&
             handle->future().wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
      }
      request_cancel();
    }

    if (handle->future().wait_for(kResolveLimit) != std::future_status::ready) {
      failures_.add("a future did not resolve within 120 s (request " + std::to_string(handle->id()) + ")");
      return;
    }
    const pagoda::Completion c = handle->get();
    tally_.completed++;
    tally_.tokens += int64_t(c.token_ids.size());
    tally_.by_reason[c.finish_reason]++;
    if (c.finish_reason == pagoda::FinishReason::Cancelled) tally_.cancelled++;
    if (c.finish_reason == pagoda::FinishReason::Error) tally_.errors++;
    if (callback == Callback::Throws && c.finish_reason == pagoda::FinishReason::Error) tally_.callback_throws++;
    if (int32_t(c.token_ids.size()) > max_new) failures_.add("more tokens than max_new_tokens");
    if (c.finish_reason == pagoda::FinishReason::Cancelled && !cancelled) failures_.add("cancelled without a cancel");
    if (c.finish_reason == pagoda::FinishReason::Error && callback != Callback::Throws &&
        c.error.find("adapter") == std::string::npos) {
      failures_.add("an unexpected error: " + c.error);
    }
  }

  // A request the engine must refuse at submit, queuing nothing.
  void bad_request() {
    pagoda::Request r;
    switch (pick(4)) {
      case 0: break;  // empty prompt
      case 1: r.prompt_ids = {w_.vocab + 5}; break;
      case 2: r.prompt_ids = {5}, r.sampling.temperature = -1.0f; break;
      default: r.prompt_ids = random_ids(8), r.max_new_tokens = engine_.context_length() + 1; break;
    }
    try {
      engine_.submit(std::move(r));
      failures_.add("a bad request was accepted");
    } catch (const pagoda::Error&) {
      tally_.refused++;
    }
  }

  pagoda::Engine& engine_;
  const Workload& w_;
  Tally& tally_;
  Failures& failures_;
  std::mt19937_64 rng_;
};

// Loads and unloads adapters at random moments while requests run on them.
void churn_adapters(pagoda::Engine& engine, const Workload& w, Tally& tally, Failures& failures,
                    Clock::time_point deadline, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<bool> loaded(kAdapters, false);
  while (Clock::now() < deadline) {
    const int a = int(rng() % kAdapters);
    const std::string name = "soak" + std::to_string(a);
    try {
      if (loaded[a]) {
        engine.unload_adapter(name);
        tally.adapter_unloads++;
      } else {
        engine.load_adapter(name, w.adapter_paths[a], 0.5f);
        tally.adapter_loads++;
      }
      loaded[a] = !loaded[a];
    } catch (const pagoda::Error& e) {
      failures.add(std::string("adapter churn: ") + e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 150));
  }
}

void check_pages(const pagoda::EngineMetrics& m, const char* when, Failures& failures) {
  if (m.kv_pages_used + m.kv_pages_free + m.kv_pages_cached != m.kv_pages_total) {
    failures.add(std::string(when) + ": used " + std::to_string(m.kv_pages_used) + " + free " +
                 std::to_string(m.kv_pages_free) + " + cached " + std::to_string(m.kv_pages_cached) + " != total " +
                 std::to_string(m.kv_pages_total));
  }
}

struct PhaseReport {
  const char* name;
  Tally tally;
  pagoda::EngineMetrics end{};
  double rss_warm = 0, rss_end = 0;
};

void run_phase(PhaseReport& report, const pagoda::EngineConfig& config, const Workload& w, int clients, double seconds,
               uint64_t seed, Failures& failures) {
  pagoda::Engine engine(config);
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto warm = start + (deadline - start) / 4;

  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] { Client(engine, w, report.tally, failures, seed * 1000 + c).run_until(deadline); });
  }
  threads.emplace_back([&] { churn_adapters(engine, w, report.tally, failures, deadline, seed + 77); });
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    bool warmed = false;
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!warmed && Clock::now() >= warm) report.rss_warm = rss_mb(), warmed = true;
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  watcher.join();

  // Every client has its completion: the engine must be idle with every page back.
  report.end = engine.metrics();
  report.rss_end = rss_mb();
  const auto& m = report.end;
  check_pages(m, report.name, failures);
  if (m.running != 0 || m.queued != 0 || m.kv_pages_used != 0) {
    failures.add(std::string(report.name) + ": idle engine still has running " + std::to_string(m.running) +
                 ", queued " + std::to_string(m.queued) + ", pages used " + std::to_string(m.kv_pages_used));
  }
  if (m.finished != report.tally.completed) {
    failures.add(std::string(report.name) + ": metrics say " + std::to_string(m.finished) + " finished, clients saw " +
                 std::to_string(report.tally.completed.load()));
  }
  if (m.generated_tokens < report.tally.tokens) {
    failures.add(std::string(report.name) + ": metrics count " + std::to_string(m.generated_tokens) +
                 " generated tokens, completions hold " + std::to_string(report.tally.tokens.load()));
  }
  if (kRssIsMeaningful && report.rss_warm > 0 && report.rss_end > report.rss_warm * 1.10 + 16.0) {
    failures.add(std::string(report.name) + ": RSS grew after warm-up from " + std::to_string(report.rss_warm) +
                 " to " + std::to_string(report.rss_end) + " MB");
  }

  // Shutdown with requests in flight: every future resolves.
  std::vector<pagoda::RequestHandle> in_flight;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 32; ++i) {
    pagoda::Request r;
    for (int k = 0; k < 40; ++k) r.prompt_ids.push_back(3 + int32_t(rng() % uint64_t(w.vocab - 3)));
    r.max_new_tokens = 48;
    in_flight.push_back(engine.submit(std::move(r)));
  }
  engine.shutdown();
  for (auto& h : in_flight) {
    if (h.future().wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      failures.add(std::string(report.name) + ": a future did not resolve at shutdown");
    }
  }
}

void print(const PhaseReport& r) {
  const auto& t = r.tally;
  const auto& m = r.end;
  std::printf(
      "%-10s submitted %lld  completed %lld (eos %lld, length %lld, stop %lld, cancelled %lld, error %lld)  refused "
      "%lld\n"
      "           cancels asked %lld  callback throws %lld  adapter loads %lld / unloads %lld  preemptions %lld\n"
      "           generated tokens %lld  prefix hit %lld / %lld tokens  pages total %lld, free %lld, cached %lld\n"
      "           RSS after warm-up %.1f MB, at end %.1f MB\n",
      r.name, (long long)t.submitted, (long long)t.completed,
      (long long)t.by_reason.at(pagoda::FinishReason::Eos).load(),
      (long long)t.by_reason.at(pagoda::FinishReason::Length).load(),
      (long long)t.by_reason.at(pagoda::FinishReason::Stop).load(), (long long)t.cancelled, (long long)t.errors,
      (long long)t.refused, (long long)t.cancels, (long long)t.callback_throws, (long long)t.adapter_loads,
      (long long)t.adapter_unloads, (long long)m.preempted, (long long)m.generated_tokens,
      (long long)m.prefix_hit_tokens, (long long)m.prefix_queried_tokens, (long long)m.kv_pages_total,
      (long long)m.kv_pages_free, (long long)m.kv_pages_cached, r.rss_warm, r.rss_end);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    pagoda::cli::Args args(argc, argv, {"--model", "--seconds", "--clients", "--kv-pages", "--seed", "--threads"},
                           {"--help"});
    if (args.has("--help")) {
      std::puts(
          "usage: pagoda-soak [-m MODEL] [--seconds N (120)] [--clients N (12)] [--kv-pages N (48)] [--seed N] [-t N]\n"
          "Drives one engine with a mixed adversarial workload (half the time with recompute preemption, half with\n"
          "swap) and checks that every future resolves, every KV page comes back, RSS stays flat after warm-up and\n"
          "the metrics agree with the completions. Exit status 1 on any failure.");
      return 0;
    }
    const double seconds = args.number<double>("--seconds", 120.0);
    const int clients = args.number<int>("--clients", 12);
    const uint64_t seed = args.number<uint64_t>("--seed", 1);

    const fs::path dir = fs::temp_directory_path() / ("pagoda-soak-" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::string model_path = args.get("--model", "");
    if (model_path.empty()) {
      pagoda::SynthSpec spec;
      pagoda::ModelConfig& c = spec.config;
      c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 128;
      c.vocab_size = 512, c.context_length = 512;
      spec.seed = seed;
      model_path = (dir / "soak-model.gguf").string();
      pagoda::write_synth_model(model_path, spec);
    }
    const pagoda::Model model = pagoda::load_model(model_path);
    Workload w;
    w.vocab = model.config.vocab_size;
    for (int a = 0; a < kAdapters; ++a) {
      w.adapter_paths.push_back((dir / ("adapter" + std::to_string(a) + ".gguf")).string());
      pagoda::write_synth_lora(w.adapter_paths.back(), model.config, {.rank = 4, .alpha = 4.0f, .seed = seed + a});
    }
    std::mt19937_64 rng(seed);
    for (int p = 0; p < 4; ++p) {
      std::vector<int32_t> prefix(16 + rng() % 80);
      for (int32_t& id : prefix) id = 3 + int32_t(rng() % uint64_t(w.vocab - 3));
      w.prefixes.push_back(std::move(prefix));
    }

    pagoda::EngineConfig config;
    config.model_path = model_path;
    config.threads = args.number<int>("--threads", 0);
    config.kv_pages = args.number<int32_t>("--kv-pages", 48);
    config.max_resident_adapters = 2;

    Failures failures;
    PhaseReport recompute{"recompute"}, swap{"swap"};
    config.preemption = pagoda::PreemptionMode::Recompute;
    run_phase(recompute, config, w, clients, seconds / 2, seed, failures);
    config.preemption = pagoda::PreemptionMode::Swap;
    run_phase(swap, config, w, clients, seconds / 2, seed + 1, failures);
    print(recompute);
    print(swap);
    fs::remove_all(dir);
    if (!kRssIsMeaningful)
      std::printf("note: built with AddressSanitizer, whose quarantine grows RSS; RSS not checked\n");
    if (recompute.end.preempted == 0 || swap.end.preempted == 0) {
      std::printf("note: a phase saw no preemption; use a smaller --kv-pages to force it\n");
    }
    if (!failures.list.empty()) {
      std::printf("pagoda-soak: %zu failures\n", failures.list.size());
      return 1;
    }
    std::printf("pagoda-soak: no failures\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-soak: %s\n", e.what());
    return 1;
  }
}
