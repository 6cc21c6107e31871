// Multi-LoRA serving through the Engine on s15m: 64 concurrent requests spread over 1, 8 and
// 64 distinct rank-16 adapters stored as f16 (as `convert_lora_to_gguf.py --outtype f16` and
// `pagoda-synth --lora-for s15m.gguf --type f16` write them; the base model stays f32)
// against the base model alone; mixed-adapter batches against coalesce-only scheduling (a
// step serves one adapter); and adapter swaps (count and cost) when only 8 of 64 adapters may
// be resident. Each configuration's timing starts after one untimed pass (the resident
// adapters packed, the prefix cache warm). tokens/cpu_s divides by the CPU time of all the
// process's threads. vs_base and vs_base_cpu are the adapter passes' rates over those of base
// model passes run on the same engine alternately with them: the ratios to read when other
// jobs share the machine. BM_LoraSgmvStep times the fused kernel alone.

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <vector>

#include "bench/bench_models.h"
#include "testing/lora_synth.h"
#include "testing/synth.h"
#include "kernels/lora_sgmv.h"
#include "engine/model/model.h"
#include "pagoda/engine.h"

namespace {

using namespace pagoda;

constexpr int kRequests = 64;
constexpr int32_t kPromptTokens = 32;
constexpr int32_t kOutputTokens = 64;
constexpr int32_t kRank = 16;

// CPU seconds this process has used (every thread), so a figure survives a machine shared with
// other jobs better than wall time does.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string adapter_path(const std::string& base, int i) {
  const auto path =
      std::filesystem::path(PAGODA_BINARY_DIR) / "models" / ("s15m-lora-f16-" + std::to_string(i) + ".gguf");
  if (!std::filesystem::exists(path)) {
    static const ModelConfig config = load_model(base).config;
    LoraSynthSpec spec;
    spec.rank = kRank;
    spec.alpha = float(kRank);
    spec.seed = uint64_t(i + 1);
    spec.type = GgmlType::F16;
    write_synth_lora(path.string(), config, spec);
  }
  return path.string();
}

// state.range(0): distinct adapters (0 = the base model alone); range(1): mixed batches;
// range(2): resident adapter slots.
void BM_LoraServing(benchmark::State& state) {
  const int adapters = int(state.range(0));
  const bool mixed = state.range(1) != 0;
  const std::string base = bench::model_path("s15m");
  Engine engine({.model_path = base,
                 .max_running = kRequests,
                 .max_resident_adapters = int32_t(state.range(2)),
                 .mixed_adapter_batches = mixed});
  for (int i = 0; i < adapters; ++i) engine.load_adapter("a" + std::to_string(i), adapter_path(base, i));

  std::vector<int32_t> prompt(kPromptTokens, 100);
  prompt[0] = 1;
  // One pass: kRequests requests at once, on the adapters or (with_adapters false) all on the
  // base model. Returns the tokens generated.
  auto run_pass = [&](bool with_adapters) {
    std::vector<RequestHandle> handles;
    for (int r = 0; r < kRequests; ++r) {
      Request req;
      req.prompt_ids = prompt;
      req.prompt_ids[1] = 200 + r;  // distinct prompts
      req.max_new_tokens = kOutputTokens;
      req.ignore_eos = true;
      req.sampling.temperature = 0.0f;
      if (with_adapters && adapters > 0) req.adapter = "a" + std::to_string(r % adapters);
      handles.push_back(engine.submit(std::move(req)));
    }
    int64_t n = 0;
    for (auto& h : handles) n += int64_t(h.get().token_ids.size());
    return n;
  };
  struct Timed {
    int64_t tokens = 0;
    double seconds = 0.0, cpu_seconds = 0.0;
    double rate() const { return double(tokens) / seconds; }
    double cpu_rate() const { return double(tokens) / cpu_seconds; }
  };
  auto timed_pass = [&](bool with_adapters, Timed& into) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    into.tokens += run_pass(with_adapters);
    into.cpu_seconds += process_cpu_seconds() - cpu_start;
    into.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // One untimed pass (each kind): the adapters that fit are packed (their swap-in time is
  // reported apart) and every configuration starts from the same warm prefix cache.
  run_pass(true);
  if (adapters > 0) run_pass(false);
  const EngineMetrics before = engine.metrics();
  // With adapters, each iteration also runs the pass on the base model on this engine, before
  // the adapter pass or after it in turn, outside the benchmark's clock: vs_base compares the
  // two under the same load, the figure to trust when other jobs share the machine.
  Timed with, without;
  int iteration = 0;
  for (auto _ : state) {
    const bool base_first = iteration++ % 2 == 0;
    if (adapters > 0 && base_first) {
      state.PauseTiming();
      timed_pass(false, without);
      state.ResumeTiming();
    }
    timed_pass(true, with);
    if (adapters > 0 && !base_first) {
      state.PauseTiming();
      timed_pass(false, without);
      state.ResumeTiming();
    }
  }
  const EngineMetrics m = engine.metrics();
  const auto swaps = double(m.adapter_swaps - before.adapter_swaps);
  const double swap_seconds = m.adapter_swap_seconds - before.adapter_swap_seconds;
  state.counters["tokens/s"] = benchmark::Counter(double(with.tokens), benchmark::Counter::kIsRate);
  state.counters["tokens/cpu_s"] = with.cpu_rate();
  if (adapters > 0) {
    state.counters["vs_base"] = with.rate() / without.rate();
    state.counters["vs_base_cpu"] = with.cpu_rate() / without.cpu_rate();
  }
  state.counters["swaps"] = swaps;
  state.counters["swap_ms_each"] = swaps > 0 ? 1e3 * swap_seconds / swaps : 0.0;
}

// The fused kernel alone on one decode step of s15m: 64 rows, row r on adapter r mod
// range(0), every projection of every block in the runner's calls (Q, K and V in one; output;
// gate and up in one; down), factors stored as range(1) (a LoraElement). bytes_per_second
// counts each adapter's factors once a step: what the step must read.
void BM_LoraSgmvStep(benchmark::State& state) {
  const int adapters = int(state.range(0));
  const auto element = kernels::LoraElement(state.range(1));
  const ModelConfig c = synth_preset("s15m");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  };
  // sets[a][l·7 + p], each adapter's factors in one set, as LoraWeights packs them.
  std::vector<kernels::LoraFactorSet> sets;
  size_t factor_bytes = 0;
  for (int a = 0; a < adapters; ++a) {
    std::vector<std::vector<float>> values;
    std::vector<kernels::LoraFactorSource> sources;
    for (int32_t l = 0; l < c.n_layers; ++l)
      for (int32_t p = 0; p < kLoraProjections; ++p) {
        const LoraShape s = lora_projection_shape(c, LoraProjection(p));
        values.push_back(random(size_t(kRank) * s.n_in));
        values.push_back(random(size_t(s.n_out) * kRank));
        sources.push_back(
            {values[values.size() - 2].data(), values.back().data(), kRank, s.n_in, s.n_out, 0.5f, element});
        factor_bytes += size_t(kRank) * (s.n_in + s.n_out) * (element == kernels::LoraElement::F32 ? 4 : 2);
      }
    sets.emplace_back(sources);
  }
  const int ld = 3 * c.dim;  // room for Q, K and V side by side, and for ffn_dim
  const std::vector<float> x = random(size_t(kRequests) * ld);
  std::vector<float> y(size_t(kRequests) * ld), tmp(size_t(kRequests) * kRank);
  std::vector<int> rows;
  std::vector<int> bounds{0};
  for (int a = 0; a < adapters; ++a) {
    for (int r = a; r < kRequests; r += adapters) rows.push_back(r);
    bounds.push_back(int(rows.size()));
  }
  const std::vector<std::vector<LoraProjection>> calls = {{LoraProjection::Q, LoraProjection::K, LoraProjection::V},
                                                          {LoraProjection::Output},
                                                          {LoraProjection::Gate, LoraProjection::Up},
                                                          {LoraProjection::Down}};
  std::vector<kernels::LoraSegment> segments(3 * size_t(adapters));
  for (auto _ : state) {
    for (int32_t l = 0; l < c.n_layers; ++l)
      for (const auto& call : calls) {
        kernels::LoraOutput outputs[3];
        int offset = 0;
        for (size_t o = 0; o < call.size(); ++o) {
          for (int a = 0; a < adapters; ++a)
            segments[o * adapters + a] = {bounds[size_t(a)], bounds[size_t(a) + 1],
                                          &sets[size_t(a)][size_t(l * kLoraProjections + int32_t(call[o]))]};
          outputs[o] = {segments.data() + o * adapters, y.data() + offset, ld};
          offset += lora_projection_shape(c, call[o]).n_out;
        }
        kernels::lora_sgmv(x.data(), ld, rows.data(), adapters, outputs, int(call.size()), tmp.data(), kRank);
      }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(factor_bytes));
}

}  // namespace

BENCHMARK(BM_LoraSgmvStep)
    ->ArgNames({"adapters", "element"})
    ->ArgsProduct({{1, 8, 64}, {int(kernels::LoraElement::F32), int(kernels::LoraElement::F16)}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

BENCHMARK(BM_LoraServing)
    ->ArgNames({"adapters", "mixed", "resident"})
    ->Args({0, 1, 8})
    ->Args({1, 1, 8})
    ->Args({8, 1, 8})
    ->Args({64, 1, 64})
    ->Args({8, 0, 8})
    ->Args({64, 0, 64})
    ->Args({64, 1, 8})
    ->Iterations(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
