// The engine against its own kernels: one job (B sequences of a P-token prompt, G tokens
// generated greedily each) run twice per iteration, first as bare ModelRunner steps (the
// prompts prefilled in steps of the engine's token budget, then G - 1 decode steps of the
// whole batch, argmax on each logits row: what the kernels alone need), then through the
// Engine (B requests submitted at once, every future awaited). `engine/raw` is the ratio of
// the two rates measured in the same iteration, so a noisy machine affects both alike.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "bench/bench_models.h"
#include "engine/forward/model_runner.h"
#include "engine/kv/page_pool.h"
#include "engine/sampling/sampler.h"
#include "pagoda/engine.h"

namespace {

using namespace pagoda;
using Clock = std::chrono::steady_clock;

constexpr int32_t kTokensPerPage = 16;

std::vector<std::vector<int32_t>> prompts(int32_t batch, int32_t length, int32_t vocab) {
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> out(size_t(batch), std::vector<int32_t>(size_t(length), 0));
  for (auto& p : out) {
    p[0] = 1;
    for (size_t i = 1; i < p.size(); ++i) p[i] = int32_t(rng() % uint32_t(vocab - 3)) + 3;
  }
  return out;
}

// The job on bare runner steps; returns the seconds it took.
double raw_job(ModelRunner& runner, const EngineConfig& config, const std::vector<std::vector<int32_t>>& ps,
               int32_t generate) {
  const int32_t vocab = runner.config().vocab_size;
  const int32_t batch = int32_t(ps.size()), length = int32_t(ps[0].size());
  const int32_t pages = (length + generate + kTokensPerPage - 1) / kTokensPerPage;
  PagePool pool(KvLayout::for_model(runner.config(), kTokensPerPage, config.kv_cache_type), batch * pages);
  std::vector<BlockTable> tables(size_t(batch), BlockTable{kTokensPerPage});
  std::vector<std::vector<int32_t>> seqs = ps;
  std::vector<float> logits;
  const auto start = Clock::now();
  // Prefill: whole prompts, as many as the step's token budget holds.
  const int32_t per_step = std::max(1, config.max_tokens_per_step / length);
  for (int32_t first = 0; first < batch; first += per_step) {
    Batch step;
    const int32_t last = std::min(batch, first + per_step);
    for (int32_t s = first; s < last; ++s) {
      tables[size_t(s)].reserve(length, pool);
      step.entries.push_back({seqs[size_t(s)], 0, &tables[size_t(s)], true});
    }
    runner.forward(step, pool.view(), logits);
    for (int32_t s = first; s < last; ++s) {
      seqs[size_t(s)].push_back(argmax(std::span(logits.data() + size_t(s - first) * vocab, size_t(vocab))));
    }
  }
  // Decode: the whole batch each step.
  for (int32_t g = 1; g < generate; ++g) {
    Batch step;
    for (int32_t s = 0; s < batch; ++s) {
      std::vector<int32_t>& seq = seqs[size_t(s)];
      tables[size_t(s)].reserve(int32_t(seq.size()), pool);
      step.entries.push_back(
          {std::span<const int32_t>(seq).last(1), int32_t(seq.size()) - 1, &tables[size_t(s)], true});
    }
    runner.forward(step, pool.view(), logits);
    for (int32_t s = 0; s < batch; ++s) {
      seqs[size_t(s)].push_back(argmax(std::span(logits.data() + size_t(s) * vocab, size_t(vocab))));
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The same job through the Engine; returns the seconds it took.
double engine_job(Engine& engine, const std::vector<std::vector<int32_t>>& ps, int32_t generate) {
  const auto start = Clock::now();
  std::vector<RequestHandle> handles;
  for (const auto& p : ps) {
    Request r;
    r.prompt_ids = p;
    r.max_new_tokens = generate;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    handles.push_back(engine.submit(std::move(r)));
  }
  for (RequestHandle& h : handles) h.get();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// range(0): sequences; range(1): prompt tokens; range(2): generated tokens.
void BM_EngineEfficiency(benchmark::State& state, const std::string& name) {
  const int32_t batch = int32_t(state.range(0)), length = int32_t(state.range(1)), generate = int32_t(state.range(2));
  // No prefix caching: every iteration repeats the prompts, and the raw steps cache nothing.
  const EngineConfig config{.model_path = bench::model_path(name), .prefix_caching = false};
  Engine engine(config);
  const Model model = load_model(config.model_path);
  ModelRunner runner(model, config.threads);
  const auto ps = prompts(batch, length, model.config.vocab_size);
  raw_job(runner, config, ps, 2);  // warm-up: scratch buffers reach their size
  engine_job(engine, ps, 2);
  double raw_s = 0, engine_s = 0;
  for (auto _ : state) {
    const double r = raw_job(runner, config, ps, generate);
    const double e = engine_job(engine, ps, generate);
    state.SetIterationTime(r + e);
    raw_s += r;
    engine_s += e;
  }
  const double tokens = double(batch) * (length + generate) * double(state.iterations());
  state.counters["raw_tok/s"] = tokens / raw_s;
  state.counters["engine_tok/s"] = tokens / engine_s;
  state.counters["engine/raw"] = raw_s / engine_s;
}

}  // namespace

BENCHMARK_CAPTURE(BM_EngineEfficiency, s110m, std::string("s110m"))
    ->ArgNames({"batch", "prompt", "gen"})
    ->Args({32, 128, 128})
    ->UseManualTime()
    ->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_EngineEfficiency, s15m, std::string("s15m"))
    ->ArgNames({"batch", "prompt", "gen"})
    ->Args({64, 128, 128})
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

BENCHMARK_MAIN();
