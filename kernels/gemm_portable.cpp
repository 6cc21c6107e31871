// Portable GEMM tiles in plain C++: the same per-output chain as the SIMD tiles (a multiply
// then an add per k, never contracted since the library builds with -ffp-contract=off), which
// the compiler may still vectorise across the independent columns.

#include <utility>

#include "kernels/dispatch.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kCols = 16;  // NR
constexpr int kRows = 4;   // MR

template <int MR>
void tile(const float* a, int lda, const float* w, int k, float* c, int ldc, int n_valid,
          bool load_c) {
  float acc[MR][kCols];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < kCols; ++j) acc[r][j] = load_c && j < n_valid ? c[r * ldc + j] : 0.0f;
  for (int kk = 0; kk < k; ++kk) {
    const float* wk = w + kk * kCols;
    for (int r = 0; r < MR; ++r) {
      const float x = a[r * lda + kk];
      for (int j = 0; j < kCols; ++j) acc[r][j] = acc[r][j] + x * wk[j];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < n_valid; ++j) c[r * ldc + j] = acc[r][j];
}

template <int... R>
constexpr GemmKernels make_kernels(std::integer_sequence<int, R...>) {
  return {kRows, kCols, {nullptr, &tile<R + 1>...}};
}

}  // namespace

extern const GemmKernels gemm_portable = make_kernels(std::make_integer_sequence<int, kRows>());

}  // namespace pagoda::kernels::detail
