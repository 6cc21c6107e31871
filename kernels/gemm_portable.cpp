// Portable GEMM tiles in plain C++: the same per-output chain as the SIMD tiles (a multiply
// then an add per k, never contracted since the library builds with -ffp-contract=off), which
// the compiler may still vectorise across the independent columns.

#include <utility>

#include "kernels/dispatch.h"

namespace pagoda::kernels::detail {

namespace {

// 2 rows × 16 columns: 8 SSE registers of accumulators. Larger tiles make GCC spill at the
// baseline ISA and run 4× slower.
constexpr int kCols = 16;  // NR
constexpr int kRows = 2;   // MR

template <int MR>
void tile(const GemmTile& t) {
  float acc[MR][kCols];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < kCols; ++j) acc[r][j] = t.load_c && j < t.n_valid ? t.c[r * t.ldc + j] : 0.0f;
  const int lines_per_step = (t.prefetch_lines + t.depth - 1) / t.depth;
  int line = 0;
  for (int k = 0; k < t.depth; ++k) {
    for (int i = 0; i < lines_per_step && line < t.prefetch_lines; ++i, ++line)
      __builtin_prefetch(t.prefetch + 64 * line, 0, 2);
    const float* w = t.panel + k * kCols;
    for (int r = 0; r < MR; ++r) {
      const float x = t.a[r * t.lda + k];
      for (int j = 0; j < kCols; ++j) acc[r][j] = acc[r][j] + x * w[j];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < t.n_valid; ++j) t.c[r * t.ldc + j] = acc[r][j];
}

template <int... R>
constexpr GemmKernels make_kernels(std::integer_sequence<int, R...>) {
  return {kRows, kCols, {nullptr, &tile<R + 1>...}};
}

}  // namespace

extern const GemmKernels gemm_portable = make_kernels(std::make_integer_sequence<int, kRows>());

}  // namespace pagoda::kernels::detail
