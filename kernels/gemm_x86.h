#pragma once
// Internal, for gemm_avx2.cpp / gemm_avx512.cpp only: the GEMM tile written once over a vector
// of lanes (simd_lanes.h): MR rows × kVectors vectors of columns in MR·kVectors accumulators.
// Each k step loads one row of the panel (kVectors vectors) and broadcasts one A value per
// row into kVectors FMAs, so every output is one FMA chain over k in order. Each ISA's unit
// picks the tile that fills its registers.

#include <utility>

#include "kernels/dispatch.h"
#include "kernels/simd_lanes.h"

namespace pagoda::kernels::detail {
namespace {

template <class V, int kVectors, int MR>
void gemm_tile(const GemmTile& t) {
  constexpr int kCols = V::kLanes * kVectors;
  typename V::Mask mask[kVectors];
  for (int v = 0; v < kVectors; ++v) mask[v] = V::tail_mask(t.n_valid - V::kLanes * v);
  // Where masked accesses are slow, only the last panel (not full) takes them.
  const bool full = !V::kCheapMasks && t.n_valid == kCols;
  const float* a[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) a[r] = t.a + r * t.lda;
  float* c = t.c;
  const int ldc = t.ldc;

  typename V::F acc[MR][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v)
      acc[r][v] = !t.load_c ? V::zero()
                  : full    ? V::template load<false>(c + r * ldc + V::kLanes * v, mask[v])
                            : V::template load<true>(c + r * ldc + V::kLanes * v, mask[v]);

  const int lines_per_step = (t.prefetch_lines + t.depth - 1) / t.depth;
  int line = 0;
  for (int k = 0; k < t.depth; ++k) {
    for (int i = 0; i < lines_per_step && line < t.prefetch_lines; ++i, ++line)
      _mm_prefetch(t.prefetch + 64 * line, _MM_HINT_T1);
    const float* w = t.panel + k * kCols;
    typename V::F wv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) wv[v] = V::load_aligned(w + V::kLanes * v);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const typename V::F x = V::broadcast(a[r] + k);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = V::fmadd(x, wv[v], acc[r][v]);
    }
  }

#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      if (full) V::template store<false>(c + r * ldc + V::kLanes * v, mask[v], acc[r][v]);
      else V::template store<true>(c + r * ldc + V::kLanes * v, mask[v], acc[r][v]);
    }
}

template <class V, int kVectors, int... R>
constexpr GemmKernels gemm_kernels_of(std::integer_sequence<int, R...>) {
  return {int(sizeof...(R)), V::kLanes * kVectors, {nullptr, &gemm_tile<V, kVectors, R + 1>...}};
}

// The table of tiles of 1 … kRows rows (MR), each kVectors vectors wide (NR = kVectors·kLanes).
template <class V, int kVectors, int kRows>
constexpr GemmKernels gemm_kernels_of() {
  return gemm_kernels_of<V, kVectors>(std::make_integer_sequence<int, kRows>());
}

}  // namespace
}  // namespace pagoda::kernels::detail
