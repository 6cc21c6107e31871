// WeightMatrix per weight type: GEMV (M = 1) as weight GB/s against the streaming-read
// bandwidth measured in the same run, and GEMM (M = 32–128) as GFLOP/s against the peak of
// its instruction mix measured in the same run (int8 vpdpbusd for the quantized types, fp32
// FMA for F32/F16/BF16). Shapes are s110m's (dim 768, ffn 2048, 12 layers).

#include <benchmark/benchmark.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "bench/fma_peak.h"
#include "bench/read_bandwidth.h"
#include "kernels/cpu_features.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/weight_matrix.h"

namespace {

using namespace pagoda::kernels;

constexpr QuantType kTypes[] = {QuantType::F32,  QuantType::F16,    QuantType::BF16,  QuantType::Q8_0,
                                QuantType::Q4_0, QuantType::Q4_1,   QuantType::Q5_0,  QuantType::Q5_1,
                                QuantType::Q4_K, QuantType::Q5_K,   QuantType::Q6_K,  QuantType::Q2_K,
                                QuantType::Q3_K, QuantType::IQ4_NL, QuantType::IQ4_XS};

int cores() { return tbb::info::default_concurrency(); }

tbb::task_arena& all_cores() {
  static tbb::task_arena arena(cores());
  return arena;
}

bool is_float(QuantType t) { return t == QuantType::F32 || t == QuantType::F16 || t == QuantType::BF16; }

using pagoda::bench::kReadBytes;
using pagoda::bench::read_bandwidth;

void BM_ReadBandwidth(benchmark::State& state) {
  pagoda::bench::ReadBandwidthProbe probe(cores());
  for (auto _ : state) benchmark::DoNotOptimize(probe.read());
  state.counters["GB/s"] =
      benchmark::Counter(double(kReadBytes) * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadBandwidth)->UseRealTime()->Unit(benchmark::kMillisecond);

// Twelve independent vpdpbusd chains per core: 64 int8 multiply-adds (128 ops) each.
__attribute__((target("avx512f,avx512vnni"))) double vnni_chains(long iterations) {
  const double ops = double(iterations) * 12 * 64 * 2;
#define PAGODA_DP(R) "vpdpbusd %%zmm14, %%zmm15, %%zmm" #R "\n\t"
  asm volatile("vpxord %%zmm14, %%zmm14, %%zmm14\n\t"
               "vpxord %%zmm15, %%zmm15, %%zmm15\n\t"
               "1:\n\t" PAGODA_DP(0) PAGODA_DP(1) PAGODA_DP(2) PAGODA_DP(3) PAGODA_DP(4) PAGODA_DP(5) PAGODA_DP(6)
                   PAGODA_DP(7) PAGODA_DP(8) PAGODA_DP(9) PAGODA_DP(10) PAGODA_DP(11) "dec %0\n\t"
               "jnz 1b\n\t"
               : "+r"(iterations)
               :
               : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                 "xmm11", "xmm14", "xmm15");
#undef PAGODA_DP
  return ops;
}

bool has_vnni() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni"); }

double run_vnni(long iterations) {
  std::vector<double> done(cores());
  all_cores().execute([&] {
    tbb::parallel_for(
        0, cores(), [&](int t) { done[t] = vnni_chains(iterations); }, tbb::static_partitioner());
  });
  return std::accumulate(done.begin(), done.end(), 0.0);
}

// All-core int8 peak in ops/s (0 without VNNI), measured once per process.
double int8_peak() {
  static const double peak = [] {
    if (!has_vnni()) return 0.0;
    run_vnni(10'000'000);
    double best = 0;
    for (int run = 0; run < 5; ++run) {
      const auto start = std::chrono::steady_clock::now();
      const double ops = run_vnni(10'000'000);
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best = std::max(best, ops / elapsed.count());
    }
    return best;
  }();
  return peak;
}

double fp32_peak() {
  static const double peak = pagoda::bench::measure_peak_flops(all_cores());
  return peak;
}

void BM_Int8Peak(benchmark::State& state) {
  if (!has_vnni()) return state.SkipWithError("no AVX-512 VNNI");
  double ops = 0;
  for (auto _ : state) ops += run_vnni(1'000'000);
  state.counters["GOP/s"] = benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Int8Peak)->UseRealTime();

void BM_Fp32Peak(benchmark::State& state) {
  double flops = 0;
  for (auto _ : state) flops += pagoda::bench::run_fma_chains(all_cores(), 1'000'000);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Fp32Peak)->UseRealTime();

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// One matrix's bytes in `type`, with the WeightMatrix reading them.
struct Weights {
  std::vector<uint8_t> bytes;
  WeightMatrix matrix;
};
std::unique_ptr<Weights> make_weights(QuantType type, int rows, int cols, const std::vector<uint8_t>* copy_of,
                                      unsigned seed) {
  auto w = std::make_unique<Weights>();
  if (copy_of) {
    w->bytes = *copy_of;
  } else {
    const std::vector<float> values = random_vector(std::size_t(rows) * cols, seed);
    const BlockShape shape = block_shape(type);
    w->bytes.resize(values.size() / shape.elements * shape.bytes);
    quantize_row(type, values.data(), w->bytes.data(), int64_t(values.size()));
  }
  const WeightPart part{type, w->bytes.data(), rows};
  w->matrix = WeightMatrix::make({&part, 1}, cols);
  if (type == QuantType::F32) w->bytes = {};  // packed: the original is no longer read
  return w;
}

// Decode at M = 1 through all projections of s110m's 12 layers (each layer's own copy of the
// bytes, so they stream from memory as in real decode).
void BM_Gemv(benchmark::State& state) {
  const QuantType type = kTypes[state.range(0)];
  const int dim = 768, ffn = 2048, layers = 12;
  struct Shape {
    int n, k;
  };
  const Shape shapes[] = {{3 * dim, dim}, {dim, dim}, {2 * ffn, dim}, {dim, ffn}};
  std::vector<std::unique_ptr<Weights>> weights;
  std::vector<std::unique_ptr<Weights>> first_layer;
  double bytes_per_pass = 0;
  for (int l = 0; l < layers; ++l)
    for (int s = 0; s < 4; ++s) {
      const std::vector<uint8_t>* original = l > 0 && type != QuantType::F32 ? &weights[s]->bytes : nullptr;
      weights.push_back(make_weights(type, shapes[s].n, shapes[s].k, original, unsigned(1 + s + 4 * l)));
      const BlockShape b = block_shape(type);
      bytes_per_pass += double(shapes[s].n) * shapes[s].k / b.elements * b.bytes;
    }
  const std::vector<float> a = random_vector(ffn, 7);
  std::vector<float> c(2 * ffn);
  const double bandwidth = read_bandwidth();
  for (auto _ : state)
    all_cores().execute([&] {
      for (const auto& w : weights) matmul(a.data(), 1, w->matrix.cols(), w->matrix, c.data(), w->matrix.rows());
    });
  const double bytes = bytes_per_pass * double(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsRate);
  state.counters["of_read_bw"] = benchmark::Counter(bytes / bandwidth, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(ggml_type_id_name(uint32_t(type))) + " " + isa_name(weights.front()->matrix.isa()));
}

// The GEMV kernels' own ceiling: M = 1 on one thread through a 256×2048 matrix that stays in
// L2, so memory does not bound it. Decode needs this rate ≥ its share of the read bandwidth.
void BM_GemvInCache(benchmark::State& state) {
  const QuantType type = kTypes[state.range(0)];
  const int N = 256, K = 2048;
  const std::unique_ptr<Weights> w = make_weights(type, N, K, nullptr, 5);
  const std::vector<float> a = random_vector(K, 6);
  std::vector<float> c(N);
  tbb::task_arena one_thread(1);
  for (auto _ : state) one_thread.execute([&] { matmul(a.data(), 1, K, w->matrix, c.data(), N); });
  const BlockShape b = block_shape(type);
  const double bytes = double(N) * K / b.elements * b.bytes * double(state.iterations());
  state.counters["GB/s_1_thread"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(ggml_type_id_name(uint32_t(type))) + " " + isa_name(w->matrix.isa()));
}

// Prefill / batched decode: M rows through a 2048×768 (gate-like) matrix.
void BM_Gemm(benchmark::State& state) {
  const QuantType type = kTypes[state.range(0)];
  const int M = int(state.range(1)), N = 2048, K = 768;
  const std::unique_ptr<Weights> w = make_weights(type, N, K, nullptr, 3);
  const std::vector<float> a = random_vector(std::size_t(M) * K, 4);
  std::vector<float> c(std::size_t(M) * N);
  const double peak = is_float(type) ? fp32_peak() : int8_peak();
  for (auto _ : state) all_cores().execute([&] { matmul(a.data(), M, K, w->matrix, c.data(), N); });
  const double flops = 2.0 * M * N * K * double(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  if (peak > 0) state.counters["of_peak"] = benchmark::Counter(flops / peak, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(ggml_type_id_name(uint32_t(type))) + (is_float(type) ? " vs fp32 FMA" : " vs int8 VNNI"));
}

void register_all() {
  for (int t = 0; t < int(std::size(kTypes)); ++t) {
    benchmark::RegisterBenchmark("BM_Gemv", BM_Gemv)
        ->Arg(t)
        ->ArgName("type")
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (int t = 0; t < int(std::size(kTypes)); ++t)
    benchmark::RegisterBenchmark("BM_GemvInCache", BM_GemvInCache)
        ->Arg(t)
        ->ArgName("type")
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  for (int t = 0; t < int(std::size(kTypes)); ++t)
    benchmark::RegisterBenchmark("BM_Gemm", BM_Gemm)
        ->Args({t, 32})
        ->Args({t, 64})
        ->Args({t, 128})
        ->ArgNames({"type", "M"})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
}

const bool registered = (register_all(), true);

}  // namespace

BENCHMARK_MAIN();
