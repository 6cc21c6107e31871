// AVX2 GEMM tiles: MR rows × 16 columns in 12 ymm accumulators (of the 16 registers, the rest
// hold the panel row and the broadcast).

#include <utility>

#include "kernels/dispatch.h"
#include "kernels/simd_avx2.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kVectors = 2;              // ymm per panel row
constexpr int kCols = 8 * kVectors;      // NR
constexpr int kRows = 6;                 // MR

template <int MR>
void tile(const GemmTile& t) {
  __m256i mask[kVectors];
  for (int v = 0; v < kVectors; ++v) mask[v] = tail_mask(t.n_valid - 8 * v);
  const bool full = t.n_valid == kCols;  // vmaskmovps is slow: only the last panel needs it
  const float* a[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) a[r] = t.a + r * t.lda;
  float* c = t.c;
  const int ldc = t.ldc;

  __m256 acc[MR][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v)
      acc[r][v] = !t.load_c ? _mm256_setzero_ps()
                  : full    ? _mm256_loadu_ps(c + r * ldc + 8 * v)
                            : _mm256_maskload_ps(c + r * ldc + 8 * v, mask[v]);

  const int lines_per_step = (t.prefetch_lines + t.depth - 1) / t.depth;
  int line = 0;
  for (int k = 0; k < t.depth; ++k) {
    for (int i = 0; i < lines_per_step && line < t.prefetch_lines; ++i, ++line)
      _mm_prefetch(t.prefetch + 64 * line, _MM_HINT_T1);
    const float* w = t.panel + k * kCols;
    __m256 wv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) wv[v] = _mm256_load_ps(w + 8 * v);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(a[r] + k);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm256_fmadd_ps(x, wv[v], acc[r][v]);
    }
  }

#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      if (full)
        _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r][v]);
      else
        _mm256_maskstore_ps(c + r * ldc + 8 * v, mask[v], acc[r][v]);
    }
}

template <int... R>
constexpr GemmKernels make_kernels(std::integer_sequence<int, R...>) {
  return {kRows, kCols, {nullptr, &tile<R + 1>...}};
}

}  // namespace

extern const GemmKernels gemm_avx2 = make_kernels(std::make_integer_sequence<int, kRows>());

}  // namespace pagoda::kernels::detail
