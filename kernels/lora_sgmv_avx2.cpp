// AVX2 halves of lora_sgmv. Shrink: R rows × 2 rows of A in 2R ymm accumulators, 8 lanes of
// k each, summed across lanes at the end. Expand: R rows × 16 output columns in 2R ymm
// accumulators, one broadcast of t per row and rank step.

#include "kernels/lora_sgmv_impl.h"
#include "kernels/simd_avx2.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kShrinkA = 2;     // rows of A per block
constexpr int kExpandVecs = 2;  // ymm of output columns per block

template <int R, int J>
void shrink_block(const float* const* x, const float* a, int n_in, float* t, int ldt) {
  __m256 acc[R][J];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < J; ++j) acc[i][j] = _mm256_setzero_ps();
  for_chunks(n_in, [&]<bool kMasked>(int k, __m256i mask) {
    __m256 av[J];
#pragma GCC unroll 2
    for (int j = 0; j < J; ++j) av[j] = load<kMasked>(a + std::size_t(j) * n_in + k, mask);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m256 xv = load<kMasked>(x[i] + k, mask);
#pragma GCC unroll 2
      for (int j = 0; j < J; ++j) acc[i][j] = _mm256_fmadd_ps(xv, av[j], acc[i][j]);
    }
  });
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < J; ++j) t[std::size_t(i) * ldt + j] = reduce_add(acc[i][j]);
}

template <int R>
void shrink_rows(const float* const* x, const float* a, int rank, int n_in, float* t, int ldt) {
  int j = 0;
  for (; j + kShrinkA <= rank; j += kShrinkA) shrink_block<R, kShrinkA>(x, a + std::size_t(j) * n_in, n_in, t + j, ldt);
  if (j < rank) shrink_block<R, 1>(x, a + std::size_t(j) * n_in, n_in, t + j, ldt);
}

void shrink(const float* const* x, int rows, const float* a, int rank, int n_in, float* t, int ldt) {
  switch (rows) {
    case 4: return shrink_rows<4>(x, a, rank, n_in, t, ldt);
    case 3: return shrink_rows<3>(x, a, rank, n_in, t, ldt);
    case 2: return shrink_rows<2>(x, a, rank, n_in, t, ldt);
    default: return shrink_rows<1>(x, a, rank, n_in, t, ldt);
  }
}

template <int R, bool kMasked>
void expand_block(const float* t, int ldt, const float* b_t, int rank, int n_out, int n0, float* const* y) {
  __m256i mask[kExpandVecs];
#pragma GCC unroll 2
  for (int v = 0; v < kExpandVecs; ++v) mask[v] = tail_mask(n_out - n0 - 8 * v);
  __m256 acc[R][kExpandVecs];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kExpandVecs; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int j = 0; j < rank; ++j) {
    const float* b = b_t + std::size_t(j) * n_out + n0;
    __m256 bv[kExpandVecs];
#pragma GCC unroll 2
    for (int v = 0; v < kExpandVecs; ++v) bv[v] = load<kMasked>(b + 8 * v, mask[v]);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m256 tv = _mm256_set1_ps(t[std::size_t(i) * ldt + j]);
#pragma GCC unroll 2
      for (int v = 0; v < kExpandVecs; ++v) acc[i][v] = _mm256_fmadd_ps(tv, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kExpandVecs; ++v) {
      float* out = y[i] + n0 + 8 * v;
      store<kMasked>(out, mask[v], _mm256_add_ps(load<kMasked>(out, mask[v]), acc[i][v]));
    }
}

template <int R>
void expand_rows(const float* t, int ldt, const float* b_t, int rank, int n_out, float* const* y) {
  constexpr int kCols = 8 * kExpandVecs;
  int n = 0;
  for (; n + kCols <= n_out; n += kCols) expand_block<R, false>(t, ldt, b_t, rank, n_out, n, y);
  if (n < n_out) expand_block<R, true>(t, ldt, b_t, rank, n_out, n, y);
}

void expand(const float* t, int ldt, int rows, const float* b_t, int rank, int n_out, float* const* y) {
  switch (rows) {
    case 4: return expand_rows<4>(t, ldt, b_t, rank, n_out, y);
    case 3: return expand_rows<3>(t, ldt, b_t, rank, n_out, y);
    case 2: return expand_rows<2>(t, ldt, b_t, rank, n_out, y);
    default: return expand_rows<1>(t, ldt, b_t, rank, n_out, y);
  }
}

}  // namespace

const LoraKernels lora_avx2 = {&shrink, &expand};

}  // namespace pagoda::kernels::detail
