// AVX2 GEMM tiles: MR rows × 16 columns in 12 ymm accumulators (of the 16 registers, the rest
// hold the panel row and the broadcast).

#include "kernels/simd.h"

#include <utility>

#include "kernels/dispatch.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kVectors = 2;              // ymm per panel row
constexpr int kCols = 8 * kVectors;      // NR
constexpr int kRows = 6;                 // MR

template <int MR>
void tile(const float* a, int lda, const float* w, int k, float* c, int ldc, int n_valid,
          bool load_c) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i mask[kVectors];
  for (int v = 0; v < kVectors; ++v)
    mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid - 8 * v), lane);
  __m256 acc[MR][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v)
      acc[r][v] = load_c ? _mm256_maskload_ps(c + r * ldc + 8 * v, mask[v]) : _mm256_setzero_ps();

  for (int kk = 0; kk < k; ++kk) {
    const float* wk = w + kk * kCols;
    __m256 wv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) wv[v] = _mm256_load_ps(wk + 8 * v);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + kk);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm256_fmadd_ps(x, wv[v], acc[r][v]);
    }
  }

#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) _mm256_maskstore_ps(c + r * ldc + 8 * v, mask[v], acc[r][v]);
}

template <int... R>
constexpr GemmKernels make_kernels(std::integer_sequence<int, R...>) {
  return {kRows, kCols, {nullptr, &tile<R + 1>...}};
}

}  // namespace

extern const GemmKernels gemm_avx2 = make_kernels(std::make_integer_sequence<int, kRows>());

}  // namespace pagoda::kernels::detail
