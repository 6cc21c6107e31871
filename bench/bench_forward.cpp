// One forward step of the batched paged runner: decode steps at batch 1..256 and prefill
// chunks, on the brief's shapes (s15m, s110m, random weights written by the synth tool) and
// on the real stories260K. Reports tokens/s, achieved GFLOP/s and the fraction of the fp32
// FMA peak measured in this same process. BM_DecodeKv compares the KV cache types (f32, f16,
// bf16, q8_0) at the same shapes: large batches stream their K/V, so its bytes count.

#include <benchmark/benchmark.h>
#include <tbb/info.h>

#include <filesystem>
#include <map>
#include <memory>

#include "bench/bench_models.h"
#include "bench/fma_peak.h"
#include "engine/forward/model_runner.h"
#include "kernels/kv_rows.h"

namespace {

using namespace pagoda;

constexpr int32_t kTokensPerPage = 16;
constexpr int32_t kDecodeContext = 128;  // positions already cached when a decode step runs

double peak_flops() {
  static const double peak = [] {
    tbb::task_arena arena(tbb::info::default_concurrency());
    return bench::measure_peak_flops(arena);
  }();
  return peak;
}

struct Loaded {
  Model model;
  ModelRunner runner;
  explicit Loaded(const std::string& path) : model(load_model(path)), runner(model) {}
};

Loaded& loaded(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<Loaded>(bench::model_path(name));
  return *slot;
}

// `batch` sequences with `n_cached` positions each (their cached K/V are the pool's zeros,
// which cost the same to attend to as real ones), each adding `n_new` tokens this step.
void run_steps(benchmark::State& state, const std::string& name, int32_t batch_size, int32_t n_cached, int32_t n_new,
               KvCacheType kv_type = KvCacheType::F32) {
  if (name == "stories260K" && !std::filesystem::exists(bench::model_path(name))) {
    state.SkipWithError("../shared/models/stories260K is absent");
    return;
  }
  Loaded& l = loaded(name);
  const int32_t pages_per_seq = (n_cached + n_new + kTokensPerPage - 1) / kTokensPerPage;
  if (!kernels::kv_row_fits(kv_type, l.model.config.head_dim())) {
    state.SkipWithError("head_dim does not fit this KV cache type");
    return;
  }
  PagePool pool(KvLayout::for_model(l.model.config, kTokensPerPage, kv_type), batch_size * pages_per_seq);
  std::vector<BlockTable> tables(batch_size, BlockTable(kTokensPerPage));
  const std::vector<int32_t> tokens(n_new, 42);
  Batch batch;
  for (BlockTable& t : tables) {
    t.reserve(n_cached + n_new, pool);
    batch.entries.push_back({tokens, n_cached, &t, true});
  }
  std::vector<float> logits;
  l.runner.forward(batch, pool.view(), logits);  // warm-up: scratch buffers reach their size
  for (auto _ : state) {
    l.runner.forward(batch, pool.view(), logits);
    benchmark::DoNotOptimize(logits.data());
  }
  const double flops = l.runner.flops(batch) * double(state.iterations());
  state.counters["tokens/s"] = benchmark::Counter(double(batch.total_tokens()) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak"] = benchmark::Counter(flops / peak_flops(), benchmark::Counter::kIsRate);
  state.counters["threads"] = l.runner.threads();
  // Slots held but not filled: at most one partly filled page per sequence.
  const double slots = double(pool.used_pages()) * kTokensPerPage;
  state.counters["kv_waste"] = (slots - double(batch_size) * (n_cached + n_new)) / slots;
}

void BM_Decode(benchmark::State& state, const std::string& name) {
  run_steps(state, name, int32_t(state.range(0)), kDecodeContext, 1);
}

// Decode at batch range(1) with the KV cache type range(0) (KvCacheType order).
void BM_DecodeKv(benchmark::State& state, const std::string& name) {
  const auto type = KvCacheType(state.range(0));
  state.SetLabel(kv_cache_type_name(type));
  run_steps(state, name, int32_t(state.range(1)), kDecodeContext, 1, type);
}

void BM_Prefill(benchmark::State& state, const std::string& name) {
  run_steps(state, name, 1, 0, int32_t(state.range(0)));
}

void BM_FmaPeak(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(peak_flops());
  state.counters["GFLOP/s"] = peak_flops() * 1e-9;
}

}  // namespace

BENCHMARK(BM_FmaPeak)->Iterations(1);
BENCHMARK_CAPTURE(BM_Decode, stories260K, std::string("stories260K"))->Arg(1)->Arg(8)->Arg(64)->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, s15m, std::string("s15m"))
    ->ArgName("batch")->Arg(1)->Arg(8)->Arg(32)->Arg(64)->Arg(128)->Arg(256)->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, s110m, std::string("s110m"))
    ->ArgName("batch")->Arg(1)->Arg(8)->Arg(32)->Arg(64)->Arg(128)->Arg(256)->UseRealTime();
BENCHMARK_CAPTURE(BM_DecodeKv, s15m, std::string("s15m"))
    ->ArgNames({"kv", "batch"})->ArgsProduct({{0, 1, 2, 3}, {1, 32, 128}})->UseRealTime();
BENCHMARK_CAPTURE(BM_DecodeKv, s110m, std::string("s110m"))
    ->ArgNames({"kv", "batch"})->ArgsProduct({{0, 1, 2, 3}, {1, 32, 128}})->UseRealTime();
BENCHMARK_CAPTURE(BM_Prefill, s15m, std::string("s15m"))->ArgName("chunk")->Arg(16)->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK_CAPTURE(BM_Prefill, s110m, std::string("s110m"))->ArgName("chunk")->Arg(16)->Arg(64)->Arg(256)->UseRealTime();

BENCHMARK_MAIN();
