// One forward step of the batched paged runner: decode steps at batch 1..256 and prefill
// chunks, on the brief's shapes (s15m, s110m, random weights written by the synth tool) and
// on the real stories260K. Reports tokens/s, achieved GFLOP/s and the fraction of the fp32
// FMA peak measured in this same process. BM_DecodeKv compares the KV cache types (f32, f16,
// bf16, q8_0) at the same shapes: large batches stream their K/V, so its bytes count.
// BM_DecodeType runs s110m stored in each weight type (pagoda-quantize's presets): single
// stream as a fraction of the bandwidth roofline (the read bandwidth measured in this process
// over the weight bytes one token streams), and batched decode, whose tokens/s per type are
// compared with F32's.

#include <benchmark/benchmark.h>
#include <tbb/info.h>

#include <filesystem>
#include <map>
#include <memory>

#include "bench/bench_models.h"
#include "bench/fma_peak.h"
#include "bench/read_bandwidth.h"
#include "engine/gguf/quant_preset.h"
#include "engine/gguf/quantize_gguf.h"
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

// The weight types of BM_DecodeType, as pagoda-quantize names them.
const char* const kWeightTypes[] = {"f32", "f16", "q8_0", "q4_k_m", "q6_k"};

// s110m in `type`, quantized once from the F32 synth model into the build folder.
std::string typed_model_path(const std::string& name, const std::string& type) {
  const std::string f32 = bench::model_path(name);
  if (type == "f32") return f32;
  const std::string path = f32.substr(0, f32.size() - 5) + "-" + type + ".gguf";
  if (!std::filesystem::exists(path)) quantize_gguf(f32, path, parse_quant_preset(type));
  return path;
}

Loaded& loaded(const std::string& name, const std::string& type = "f32") {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[name + "/" + type];
  if (!slot) slot = std::make_unique<Loaded>(typed_model_path(name, type));
  return *slot;
}

// Bytes of weights one decode step streams: every layer's matrices and the classifier (the
// embedding lookup reads one row).
double weight_bytes_per_token(const Model& model) {
  double bytes = double(model.weights.output.n_bytes());
  for (const LayerWeights& w : model.weights.layers)
    for (const WeightTensor* t : {&w.attn_q, &w.attn_k, &w.attn_v, &w.attn_output, &w.ffn_gate, &w.ffn_up, &w.ffn_down})
      bytes += double(t->n_bytes());
  return bytes;
}

// `batch` sequences with `n_cached` positions each (their cached K/V are the pool's zeros,
// which cost the same to attend to as real ones once resident: the pool is prefaulted, or
// every read of an unwritten page would hit the one zero page in cache), each adding `n_new`
// tokens this step.
void run_steps(benchmark::State& state, const std::string& name, int32_t batch_size, int32_t n_cached, int32_t n_new,
               KvCacheType kv_type = KvCacheType::F32, const std::string& weight_type = "f32") {
  if (name == "stories260K" && !std::filesystem::exists(bench::model_path(name))) {
    state.SkipWithError("../shared/models/stories260K is absent");
    return;
  }
  Loaded& l = loaded(name, weight_type);
  const int32_t pages_per_seq = (n_cached + n_new + kTokensPerPage - 1) / kTokensPerPage;
  if (!kernels::kv_row_fits(kv_type, l.model.config.head_dim())) {
    state.SkipWithError("head_dim does not fit this KV cache type");
    return;
  }
  PagePool pool(KvLayout::for_model(l.model.config, kTokensPerPage, kv_type), batch_size * pages_per_seq, true);
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
  state.counters["tokens/s"] =
      benchmark::Counter(double(batch.total_tokens()) * state.iterations(), benchmark::Counter::kIsRate);
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

// Decode with s110m's weights in kWeightTypes[range(0)] at batch range(1), the KV cache in
// f16 (the engine's default).
void BM_DecodeType(benchmark::State& state, const std::string& name) {
  const std::string type = kWeightTypes[state.range(0)];
  const auto batch = int32_t(state.range(1));
  state.SetLabel(type);
  run_steps(state, name, batch, kDecodeContext, 1, KvCacheType::F16, type);
  if (state.error_occurred()) return;
  const double bytes = weight_bytes_per_token(loaded(name, type).model), roofline = bench::read_bandwidth() / bytes;
  state.counters["weight_MB"] = bytes * 1e-6;
  if (batch == 1) {
    state.counters["roofline_tok/s"] = roofline;
    state.counters["of_roofline"] =
        benchmark::Counter(double(state.iterations()) / roofline, benchmark::Counter::kIsRate);
  }
}

void BM_ReadBandwidth(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bench::read_bandwidth());
  state.counters["GB/s"] = bench::read_bandwidth() * 1e-9;
}

void BM_Prefill(benchmark::State& state, const std::string& name) {
  run_steps(state, name, 1, 0, int32_t(state.range(0)));
}

void BM_FmaPeak(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(peak_flops());
  state.counters["GFLOP/s"] = peak_flops() * 1e-9;
}

// The decode batches measured on the synthetic shapes.
void decode_batches(benchmark::internal::Benchmark* b) {
  b->ArgName("batch");
  for (int batch : {1, 8, 32, 64, 128, 256}) b->Arg(batch);
}

}  // namespace

BENCHMARK(BM_FmaPeak)->Iterations(1);
BENCHMARK(BM_ReadBandwidth)->Iterations(1);
// Single stream for every type, then batched for F32, Q8_0 and Q4_K_M.
BENCHMARK_CAPTURE(BM_DecodeType, s110m, std::string("s110m"))
    ->ArgNames({"type", "batch"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1}})
    ->ArgsProduct({{0, 2, 3}, {32, 64, 128}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, stories260K, std::string("stories260K"))->Arg(1)->Arg(8)->Arg(64)->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, s15m, std::string("s15m"))->Apply(decode_batches)->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, s110m, std::string("s110m"))->Apply(decode_batches)->UseRealTime();
BENCHMARK_CAPTURE(BM_DecodeKv, s15m, std::string("s15m"))
    ->ArgNames({"kv", "batch"})
    ->ArgsProduct({{0, 1, 2, 3}, {1, 32, 128}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_DecodeKv, s110m, std::string("s110m"))
    ->ArgNames({"kv", "batch"})
    ->ArgsProduct({{0, 1, 2, 3}, {1, 32, 128}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Prefill, s15m, std::string("s15m"))->ArgName("chunk")->Arg(16)->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK_CAPTURE(BM_Prefill, s110m, std::string("s110m"))->ArgName("chunk")->Arg(16)->Arg(64)->Arg(256)->UseRealTime();

BENCHMARK_MAIN();
