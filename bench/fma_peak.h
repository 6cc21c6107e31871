#pragma once
// The machine's fp32 FMA peak, measured in the benchmark's own process with the same threads,
// so that achieved GFLOP/s can be reported as a fraction of it: these machines are too noisy
// for absolute figures to compare across runs.

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "kernels/cpu_features.h"

namespace pagoda::bench {

// Twelve independent FMA chains held in registers (enough to cover FMA latency times pipes),
// written in asm so the compiler can neither drop nor spill them.
#define PAGODA_FMA12(R)                    \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "0\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "1\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "2\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "3\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "4\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "5\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "6\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "7\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "8\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "9\n\t"                                  \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R \
  "10\n\t"                                 \
  "vfmadd231ps %%" R "14, %%" R "15, %%" R "11\n\t"

#define PAGODA_FMA_LOOP(R) \
  asm volatile("vzeroall\n\t"                                                               \
               "1:\n\t" PAGODA_FMA12(R) "dec %0\n\t"                                        \
               "jnz 1b\n\t"                                                                 \
               : "+r"(iterations)                                                           \
               :                                                                            \
               : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                 "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15")

inline constexpr int kFmaChains = 12;

__attribute__((target("avx512f"))) inline double fma_chains_avx512(long iterations) {
  const double flops = double(iterations) * kFmaChains * 16 * 2;
  PAGODA_FMA_LOOP("zmm");
  return flops;
}

__attribute__((target("avx2,fma"))) inline double fma_chains_avx2(long iterations) {
  const double flops = double(iterations) * kFmaChains * 8 * 2;
  PAGODA_FMA_LOOP("ymm");
  return flops;
}

#undef PAGODA_FMA_LOOP
#undef PAGODA_FMA12

// Runs the widest chains this CPU has; returns the flops done (0 without FMA).
inline double fma_chains(long iterations) {
  using kernels::Isa;
  if (kernels::cpu_supports(Isa::Avx512)) return fma_chains_avx512(iterations);
  if (kernels::cpu_supports(Isa::Avx2)) return fma_chains_avx2(iterations);
  return 0.0;
}

// Runs the chains on every thread of `arena` at once; returns the flops done.
inline double run_fma_chains(tbb::task_arena& arena, long iterations) {
  const int threads = arena.max_concurrency();
  std::vector<double> done(threads);
  arena.execute([&] {
    tbb::parallel_for(
        0, threads, [&](int t) { done[t] = fma_chains(iterations); }, tbb::static_partitioner());
  });
  return std::accumulate(done.begin(), done.end(), 0.0);
}

// Peak FLOP/s over all threads of `arena`: the best of a few runs after a warm-up.
inline double measure_peak_flops(tbb::task_arena& arena) {
  constexpr long kIterations = 10'000'000;
  run_fma_chains(arena, kIterations);
  double best = 0.0;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const double flops = run_fma_chains(arena, kIterations);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best = std::max(best, flops / elapsed.count());
  }
  return best;
}

}  // namespace pagoda::bench
