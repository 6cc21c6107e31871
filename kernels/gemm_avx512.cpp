// AVX-512 GEMM tiles: MR rows × 48 columns in 24 zmm accumulators. Each k step loads one row
// of the panel (3 zmm) and broadcasts one A value per row into 3 FMAs.

#include <utility>

#include "kernels/dispatch.h"
#include "kernels/simd_avx512.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kVectors = 3;               // zmm per panel row
constexpr int kCols = 16 * kVectors;      // NR
constexpr int kRows = 8;                  // MR

template <int MR>
void tile(const GemmTile& t) {
  __mmask16 mask[kVectors];
  for (int v = 0; v < kVectors; ++v) mask[v] = tail_mask(t.n_valid - 16 * v);
  const float* a[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) a[r] = t.a + r * t.lda;
  float* c = t.c;
  const int ldc = t.ldc;

  __m512 acc[MR][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v)
      acc[r][v] = t.load_c ? _mm512_maskz_loadu_ps(mask[v], c + r * ldc + 16 * v) : _mm512_setzero_ps();

  const int lines_per_step = (t.prefetch_lines + t.depth - 1) / t.depth;
  int line = 0;
  for (int k = 0; k < t.depth; ++k) {
    for (int i = 0; i < lines_per_step && line < t.prefetch_lines; ++i, ++line)
      _mm_prefetch(t.prefetch + 64 * line, _MM_HINT_T1);
    const float* w = t.panel + k * kCols;
    __m512 wv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) wv[v] = _mm512_load_ps(w + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(a[r][k]);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_fmadd_ps(x, wv[v], acc[r][v]);
    }
  }

#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask[v], acc[r][v]);
}

template <int... R>
constexpr GemmKernels make_kernels(std::integer_sequence<int, R...>) {
  return {kRows, kCols, {nullptr, &tile<R + 1>...}};
}

}  // namespace

extern const GemmKernels gemm_avx512 = make_kernels(std::make_integer_sequence<int, kRows>());

}  // namespace pagoda::kernels::detail
