// AVX-512 halves of lora_sgmv. Shrink: R rows × J rows of A in R·J zmm accumulators, 16 lanes
// of k each, summed across lanes at the end. Expand: R rows × 64 output columns in 4R zmm
// accumulators, one broadcast of t per row and rank step. 16-bit factors are widened as they
// are loaded (vcvtph2ps, or a shift for bfloat16), both exact.

#include <cstdint>

#include "kernels/lora_sgmv_impl.h"
#include "kernels/simd_avx512.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kShrinkA = 4;     // rows of A per block
constexpr int kExpandVecs = 4;  // zmm of output columns per block

// 16 factor elements from element index i of p, widened to floats; masked-off lanes are 0.
template <LoraElement E, bool kMasked>
[[gnu::always_inline]] inline __m512 load_factor(const void* p, std::size_t i, __mmask16 mask) {
  if constexpr (E == LoraElement::F32) {
    return load<kMasked>(static_cast<const float*>(p) + i, mask);
  } else {
    const uint16_t* q = static_cast<const uint16_t*>(p) + i;
    const __m256i h = kMasked ? _mm256_maskz_loadu_epi16(mask, q) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    if constexpr (E == LoraElement::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <LoraElement E, int R, int J>
void shrink_block(const float* const* x, const void* a, std::size_t a0, int n_in, float scale, float* t, int ldt,
                  LoraPrefetch& prefetch) {
  __m512 acc[R][J];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[i][j] = _mm512_setzero_ps();
  for_chunks(n_in, [&]<bool kMasked>(int k, __mmask16 mask) {
    prefetch.step();
    __m512 av[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) av[j] = load_factor<E, kMasked>(a, a0 + std::size_t(j) * n_in + k, mask);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m512 xv = load<kMasked>(x[i] + k, mask);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[i][j] = _mm512_fmadd_ps(xv, av[j], acc[i][j]);
    }
  });
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) t[std::size_t(i) * ldt + j] = _mm512_reduce_add_ps(acc[i][j]) * scale;
}

template <LoraElement E, int R>
void shrink_rows(const float* const* x, const void* a, int rank, int n_in, float scale, float* t, int ldt,
                 LoraPrefetch& prefetch) {
  int j = 0;
  for (; j + kShrinkA <= rank; j += kShrinkA)
    shrink_block<E, R, kShrinkA>(x, a, std::size_t(j) * n_in, n_in, scale, t + j, ldt, prefetch);
  const std::size_t a0 = std::size_t(j) * n_in;
  switch (rank - j) {
    case 3: shrink_block<E, R, 3>(x, a, a0, n_in, scale, t + j, ldt, prefetch); break;
    case 2: shrink_block<E, R, 2>(x, a, a0, n_in, scale, t + j, ldt, prefetch); break;
    case 1: shrink_block<E, R, 1>(x, a, a0, n_in, scale, t + j, ldt, prefetch); break;
    default: break;
  }
}

template <LoraElement E>
void shrink(const float* const* x, int rows, const void* a, int rank, int n_in, float scale, float* t, int ldt,
            LoraPrefetch& prefetch) {
  switch (rows) {
    case 4: return shrink_rows<E, 4>(x, a, rank, n_in, scale, t, ldt, prefetch);
    case 3: return shrink_rows<E, 3>(x, a, rank, n_in, scale, t, ldt, prefetch);
    case 2: return shrink_rows<E, 2>(x, a, rank, n_in, scale, t, ldt, prefetch);
    default: return shrink_rows<E, 1>(x, a, rank, n_in, scale, t, ldt, prefetch);
  }
}

template <LoraElement E, int R, bool kMasked>
void expand_block(const float* t, int ldt, const void* b_t, int rank, int n_out, int n0, float* const* y,
                  LoraPrefetch& prefetch) {
  __mmask16 mask[kExpandVecs];
#pragma GCC unroll 4
  for (int v = 0; v < kExpandVecs; ++v) mask[v] = tail_mask(n_out - n0 - 16 * v);
  __m512 acc[R][kExpandVecs];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kExpandVecs; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int j = 0; j < rank; ++j) {
    prefetch.step();
    const std::size_t b = std::size_t(j) * n_out + n0;
    __m512 bv[kExpandVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kExpandVecs; ++v) bv[v] = load_factor<E, kMasked>(b_t, b + 16 * v, mask[v]);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m512 tv = _mm512_set1_ps(t[std::size_t(i) * ldt + j]);
#pragma GCC unroll 4
      for (int v = 0; v < kExpandVecs; ++v) acc[i][v] = _mm512_fmadd_ps(tv, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kExpandVecs; ++v) {
      float* out = y[i] + n0 + 16 * v;
      store<kMasked>(out, mask[v], _mm512_add_ps(load<kMasked>(out, mask[v]), acc[i][v]));
    }
}

template <LoraElement E, int R>
void expand_rows(const float* t, int ldt, const void* b_t, int rank, int n_out, float* const* y,
                 LoraPrefetch& prefetch) {
  constexpr int kCols = 16 * kExpandVecs;
  int n = 0;
  for (; n + kCols <= n_out; n += kCols) expand_block<E, R, false>(t, ldt, b_t, rank, n_out, n, y, prefetch);
  if (n < n_out) expand_block<E, R, true>(t, ldt, b_t, rank, n_out, n, y, prefetch);
}

template <LoraElement E>
void expand(const float* t, int ldt, int rows, const void* b_t, int rank, int n_out, float* const* y,
            LoraPrefetch& prefetch) {
  switch (rows) {
    case 4: return expand_rows<E, 4>(t, ldt, b_t, rank, n_out, y, prefetch);
    case 3: return expand_rows<E, 3>(t, ldt, b_t, rank, n_out, y, prefetch);
    case 2: return expand_rows<E, 2>(t, ldt, b_t, rank, n_out, y, prefetch);
    default: return expand_rows<E, 1>(t, ldt, b_t, rank, n_out, y, prefetch);
  }
}

}  // namespace

const LoraKernels lora_avx512 = {
    {&shrink<LoraElement::F32>, &shrink<LoraElement::F16>, &shrink<LoraElement::BF16>},
    {&expand<LoraElement::F32>, &expand<LoraElement::F16>, &expand<LoraElement::BF16>}};

}  // namespace pagoda::kernels::detail
