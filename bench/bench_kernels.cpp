// Kernel micro-benchmarks. Matmul throughput is reported against the machine's fp32 FMA peak
// measured in the same process with the same threads (one per core), since these machines
// are too noisy for absolute figures to compare across runs.

#include <benchmark/benchmark.h>
#include <tbb/info.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/fma_peak.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm.h"
#include "kernels/kv_rows.h"
#include "kernels/ops.h"

namespace {

using namespace pagoda::kernels;
using pagoda::kv_cache_type_name;
using pagoda::KvCacheType;

int cores() { return tbb::info::default_concurrency(); }

tbb::task_arena& all_cores() {
  static tbb::task_arena arena(cores());
  return arena;
}

// The all-core peak in FLOP/s, measured once per process.
double peak_flops() {
  static const double peak = pagoda::bench::measure_peak_flops(all_cores());
  return peak;
}

void BM_FmaPeak(benchmark::State& state) {
  const int threads = int(state.range(0));
  tbb::task_arena arena(threads);
  double flops = 0.0;
  for (auto _ : state) flops += pagoda::bench::run_fma_chains(arena, 1'000'000);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s/core"] = benchmark::Counter(flops * 1e-9 / threads, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FmaPeak)->Arg(1)->Arg(cores())->ArgName("threads")->UseRealTime();

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void BM_Matmul(benchmark::State& state) {
  const int M = int(state.range(0)), N = int(state.range(1)), K = int(state.range(2));
  const std::vector<float> w = random_vector(std::size_t(N) * K, 1);
  const std::vector<float> a = random_vector(std::size_t(M) * K, 2);
  std::vector<float> c(std::size_t(M) * N);
  const PackedMatrix packed = PackedMatrix::pack(w.data(), N, K);
  const double peak = peak_flops();
  for (auto _ : state) all_cores().execute([&] { matmul(a.data(), M, K, packed, c.data(), N); });
  const double flops = 2.0 * M * N * K * double(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak"] = benchmark::Counter(flops / peak, benchmark::Counter::kIsRate);
  state.SetLabel(isa_name(packed.isa()));
}
BENCHMARK(BM_Matmul)
    ->ArgsProduct({{1, 8, 32, 64, 128, 256}, {768}, {768}})
    ->ArgsProduct({{1, 8, 32, 64, 128, 256}, {2048}, {768}})
    ->ArgsProduct({{1, 8, 32, 64, 128, 256}, {768}, {2048}})
    ->ArgsProduct({{1, 8, 32, 64, 128, 256}, {288}, {288}})
    ->ArgsProduct({{1, 8, 32, 64, 128, 256}, {768}, {288}})
    ->ArgNames({"M", "N", "K"})
    ->UseRealTime();

// All projections of s110m's 12 layers (q, k, v, o: 768×768; gate, up: 2048×768; down:
// 768×2048), 340 MB of weights: far beyond L3, so they stream from memory as in real decode.
void BM_MatmulS110mLayers(benchmark::State& state) {
  const int M = int(state.range(0));
  const int dim = 768, ffn = 2048, layers = 12;
  struct Projection {
    int n, k;
  };
  const Projection shapes[] = {{dim, dim}, {dim, dim}, {dim, dim}, {dim, dim}, {ffn, dim}, {ffn, dim}, {dim, ffn}};
  std::vector<PackedMatrix> weights;
  double flops_per_pass = 0.0;
  for (int l = 0; l < layers; ++l)
    for (const Projection& s : shapes) {
      const std::vector<float> w = random_vector(std::size_t(s.n) * s.k, 100 + unsigned(weights.size()));
      weights.push_back(PackedMatrix::pack(w.data(), s.n, s.k));
      flops_per_pass += 2.0 * M * s.n * s.k;
    }
  const std::vector<float> a = random_vector(std::size_t(M) * ffn, 7);
  std::vector<float> c(std::size_t(M) * ffn);
  const double peak = peak_flops();
  for (auto _ : state)
    all_cores().execute([&] {
      for (const PackedMatrix& w : weights) matmul(a.data(), M, w.cols(), w, c.data(), w.rows());
    });
  const double flops = flops_per_pass * double(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak"] = benchmark::Counter(flops / peak, benchmark::Counter::kIsRate);
  state.SetLabel(isa_name(weights.front().isa()));
}
BENCHMARK(BM_MatmulS110mLayers)->Arg(1)->Arg(8)->Arg(32)->Arg(64)->Arg(128)->ArgName("M")->UseRealTime();

constexpr int kHeadDim = 64;
constexpr int kTokensPerPage = 16;

// Random floats 64-byte aligned, as the engine's mmap'd page arena is: rows of a misaligned
// cache straddle cache lines, which makes every vector load two.
struct AlignedFloats {
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<float[], Free> data;

  AlignedFloats(std::size_t n, unsigned seed)
      : data(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t(64)))) {
    const std::vector<float> values = random_vector(n, seed);
    std::copy(values.begin(), values.end(), data.get());
  }
};

// One query head over n_ctx cached positions; paged with pages scattered in a pool, as the
// page pool hands them out, against the same keys and values stored contiguously.
void attention_bench(benchmark::State& state, bool paged) {
  const int n_ctx = int(state.range(0));
  const int pages = (n_ctx + kTokensPerPage - 1) / kTokensPerPage;
  const std::size_t page_floats = std::size_t(kTokensPerPage) * kHeadDim;
  const AlignedFloats k_pool(page_floats * pages, 3), v_pool(page_floats * pages, 4);
  std::vector<int> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  std::vector<const float*> k_pages(pages), v_pages(pages);
  for (int p = 0; p < pages; ++p) {
    k_pages[p] = k_pool.data.get() + order[p] * page_floats;
    v_pages[p] = v_pool.data.get() + order[p] * page_floats;
  }
  const AlignedFloats k(std::size_t(n_ctx) * kHeadDim, 0), v(std::size_t(n_ctx) * kHeadDim, 0);
  for (int t = 0; t < n_ctx; ++t) {
    const std::size_t in_page = std::size_t(t % kTokensPerPage) * kHeadDim;
    std::copy_n(k_pages[t / kTokensPerPage] + in_page, kHeadDim, k.data.get() + std::size_t(t) * kHeadDim);
    std::copy_n(v_pages[t / kTokensPerPage] + in_page, kHeadDim, v.data.get() + std::size_t(t) * kHeadDim);
  }
  const std::vector<float> q = random_vector(kHeadDim, 6);
  std::vector<float> out(kHeadDim);
  const float scale = 0.125f;
  for (auto _ : state) {
    if (paged)
      paged_attention(q.data(), 1, kHeadDim, n_ctx, k_pages.data(), v_pages.data(), kTokensPerPage, scale, out.data());
    else attention_contiguous(q.data(), 1, kHeadDim, n_ctx, k.data.get(), v.data.get(), scale, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double positions = double(n_ctx) * double(state.iterations());
  state.counters["positions/s"] = benchmark::Counter(positions, benchmark::Counter::kIsRate);
  // q·k and the weighted sum of v: 2 multiply-adds per position and column.
  state.counters["GFLOP/s"] = benchmark::Counter(positions * 4 * kHeadDim * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(isa_name(active_isa()));
}

// range(2) query heads sharing one KV head of range(3) columns (GQA: Llama-3.2-1B has 4 of 64,
// Llama-3.1-8B 4 of 128), one token, over range(1) positions cached as KV type range(0)
// (KvCacheType order) in pages scattered over a pool, on one thread: how fast decode attention
// reads each type's cache. KV_GB/s counts the K and V bytes read; at 512 positions they stay
// in L2, so it is the kernel's own ceiling, to set against its share of the read bandwidth.
void BM_PagedAttentionKv(benchmark::State& state) {
  const auto type = KvCacheType(state.range(0));
  const int n_ctx = int(state.range(1)), group = int(state.range(2)), head_dim = int(state.range(3));
  const int pages = (n_ctx + kTokensPerPage - 1) / kTokensPerPage;
  const std::size_t row = kv_row_bytes(type, head_dim), page_bytes = row * kTokensPerPage;
  std::vector<std::byte> k_pool(page_bytes * pages), v_pool(page_bytes * pages);
  const std::vector<float> k = random_vector(std::size_t(n_ctx) * head_dim, 3),
                           v = random_vector(std::size_t(n_ctx) * head_dim, 4);
  std::vector<int> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  std::vector<const std::byte*> k_pages(pages), v_pages(pages);
  for (int p = 0; p < pages; ++p) {
    k_pages[p] = k_pool.data() + order[p] * page_bytes;
    v_pages[p] = v_pool.data() + order[p] * page_bytes;
  }
  for (int t = 0; t < n_ctx; ++t) {
    const std::size_t at = std::size_t(order[t / kTokensPerPage]) * page_bytes + std::size_t(t % kTokensPerPage) * row;
    store_kv_row(type, k.data() + std::size_t(t) * head_dim, head_dim, k_pool.data() + at);
    store_kv_row(type, v.data() + std::size_t(t) * head_dim, head_dim, v_pool.data() + at);
  }
  const std::vector<float> q = random_vector(std::size_t(group) * head_dim, 6);
  std::vector<float> out(std::size_t(group) * head_dim);
  const float scale = 1.0f / std::sqrt(float(head_dim));
  for (auto _ : state) {
    paged_attention(type, q.data(), group, head_dim, n_ctx, k_pages.data(), v_pages.data(), kTokensPerPage, scale,
                    out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double positions = double(n_ctx) * double(state.iterations());
  state.counters["positions/s"] = benchmark::Counter(positions, benchmark::Counter::kIsRate);
  state.counters["KV_GB/s"] = benchmark::Counter(positions * 2.0 * double(row) * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(kv_cache_type_name(type)) + " " + isa_name(active_isa()));
}

// One row op on one thread, in L1 / L2: rmsnorm (range(0) 0), swiglu (1) or softmax (2) over
// range(1) values (a hidden row, an FFN row, a vocabulary's logits).
void BM_RowOp(benchmark::State& state) {
  const int op = int(state.range(0)), n = int(state.range(1));
  const std::vector<float> x = random_vector(std::size_t(n), 8), w = random_vector(std::size_t(n), 9);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    switch (op) {
      case 0: rmsnorm(x.data(), w.data(), out.data(), n, 1e-5f); break;
      case 1: swiglu(x.data(), w.data(), out.data(), n); break;
      default:
        std::copy(x.begin(), x.end(), out.begin());
        softmax(out.data(), n);
        break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n);
  state.SetLabel(std::string(op == 0 ? "rmsnorm " : op == 1 ? "swiglu " : "softmax ") + isa_name(active_isa()));
}

void BM_PagedAttention(benchmark::State& state) { attention_bench(state, true); }
void BM_ContiguousAttention(benchmark::State& state) { attention_bench(state, false); }
BENCHMARK(BM_RowOp)->ArgNames({"op", "n"})->ArgsProduct({{0, 1, 2}, {2048, 8192, 128256}});
BENCHMARK(BM_PagedAttention)->RangeMultiplier(2)->Range(128, 4096);
BENCHMARK(BM_ContiguousAttention)->RangeMultiplier(2)->Range(128, 4096);
BENCHMARK(BM_PagedAttentionKv)
    ->ArgNames({"kv", "ctx", "group", "head_dim"})
    ->ArgsProduct({{0, 1, 2, 3}, {512, 4096, 32768}, {1}, {64}})
    ->ArgsProduct({{0, 1, 2, 3}, {512, 8192}, {4}, {64, 128}});

}  // namespace

BENCHMARK_MAIN();
