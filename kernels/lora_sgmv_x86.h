#pragma once
// Internal, for lora_sgmv_avx2.cpp / lora_sgmv_avx512.cpp only: the halves of lora_sgmv
// (lora_sgmv_impl.h) written once over a vector of lanes (simd_lanes.h). Shrink: R rows × J
// rows of A in R·J accumulators, kLanes lanes of k each, summed across lanes at the end.
// Expand: R rows × kExpandVecs vectors of output columns, one broadcast of t per row and rank
// step. 16-bit factors are widened as they are loaded (vcvtph2ps, or a shift for bfloat16),
// both exact. Each ISA's unit picks the block sizes that fill its registers.

#include <cstddef>
#include <cstdint>

#include "kernels/lora_sgmv_impl.h"
#include "kernels/simd_lanes.h"

namespace pagoda::kernels::detail {
namespace {

// kLanes factor elements from element index i of p, widened to floats; masked-off lanes are 0.
template <class V, LoraElement E, bool kMasked>
[[gnu::always_inline]] inline typename V::F load_factor(const void* p, std::size_t i, typename V::Mask mask) {
  if constexpr (E == LoraElement::F32) {
    return V::template load<kMasked>(static_cast<const float*>(p) + i, mask);
  } else {
    const typename V::Halves h = V::template load_halves<kMasked>(static_cast<const uint16_t*>(p) + i, mask);
    if constexpr (E == LoraElement::F16) return V::from_f16(h);
    return V::from_bf16(h);
  }
}

template <class V, LoraElement E, int R, int J>
void shrink_block(const float* const* x, const void* a, std::size_t a0, int n_in, float scale, float* t, int ldt,
                  LoraPrefetch& prefetch) {
  typename V::F acc[R][J];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[i][j] = V::zero();
  for_chunks<V>(n_in, [&]<bool kMasked>(int k, typename V::Mask mask) {
    prefetch.step();
    typename V::F av[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) av[j] = load_factor<V, E, kMasked>(a, a0 + std::size_t(j) * n_in + k, mask);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const typename V::F xv = V::template load<kMasked>(x[i] + k, mask);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[i][j] = V::fmadd(xv, av[j], acc[i][j]);
    }
  });
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) t[std::size_t(i) * ldt + j] = V::reduce_add(acc[i][j]) * scale;
}

template <class V, int kShrinkA, LoraElement E, int R>
void shrink_rows(const float* const* x, const void* a, int rank, int n_in, float scale, float* t, int ldt,
                 LoraPrefetch& prefetch) {
  static_assert(kShrinkA <= 4, "a rest of at most 3 rows of A");
  int j = 0;
  for (; j + kShrinkA <= rank; j += kShrinkA)
    shrink_block<V, E, R, kShrinkA>(x, a, std::size_t(j) * n_in, n_in, scale, t + j, ldt, prefetch);
  // The rest, fewer than kShrinkA rows of A, as one block of that many.
  const std::size_t a0 = std::size_t(j) * n_in;
  switch (rank - j) {
    case 3:
      if constexpr (kShrinkA > 3) shrink_block<V, E, R, 3>(x, a, a0, n_in, scale, t + j, ldt, prefetch);
      break;
    case 2:
      if constexpr (kShrinkA > 2) shrink_block<V, E, R, 2>(x, a, a0, n_in, scale, t + j, ldt, prefetch);
      break;
    case 1: shrink_block<V, E, R, 1>(x, a, a0, n_in, scale, t + j, ldt, prefetch); break;
    default: break;
  }
}

template <class V, int kShrinkA, LoraElement E>
void shrink(const float* const* x, int rows, const void* a, int rank, int n_in, float scale, float* t, int ldt,
            LoraPrefetch& prefetch) {
  switch (rows) {
    case 4: return shrink_rows<V, kShrinkA, E, 4>(x, a, rank, n_in, scale, t, ldt, prefetch);
    case 3: return shrink_rows<V, kShrinkA, E, 3>(x, a, rank, n_in, scale, t, ldt, prefetch);
    case 2: return shrink_rows<V, kShrinkA, E, 2>(x, a, rank, n_in, scale, t, ldt, prefetch);
    default: return shrink_rows<V, kShrinkA, E, 1>(x, a, rank, n_in, scale, t, ldt, prefetch);
  }
}

template <class V, int kExpandVecs, LoraElement E, int R, bool kMasked>
void expand_block(const float* t, int ldt, const void* b_t, int rank, int n_out, int n0, float* const* y,
                  LoraPrefetch& prefetch) {
  constexpr int L = V::kLanes;
  typename V::Mask mask[kExpandVecs];
#pragma GCC unroll 4
  for (int v = 0; v < kExpandVecs; ++v) mask[v] = V::tail_mask(n_out - n0 - L * v);
  typename V::F acc[R][kExpandVecs];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kExpandVecs; ++v) acc[i][v] = V::zero();
  for (int j = 0; j < rank; ++j) {
    prefetch.step();
    const std::size_t b = std::size_t(j) * n_out + n0;
    typename V::F bv[kExpandVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kExpandVecs; ++v) bv[v] = load_factor<V, E, kMasked>(b_t, b + L * v, mask[v]);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const typename V::F tv = V::set1(t[std::size_t(i) * ldt + j]);
#pragma GCC unroll 4
      for (int v = 0; v < kExpandVecs; ++v) acc[i][v] = V::fmadd(tv, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kExpandVecs; ++v) {
      float* out = y[i] + n0 + L * v;
      V::template store<kMasked>(out, mask[v], V::add(V::template load<kMasked>(out, mask[v]), acc[i][v]));
    }
}

template <class V, int kExpandVecs, LoraElement E, int R>
void expand_rows(const float* t, int ldt, const void* b_t, int rank, int n_out, float* const* y,
                 LoraPrefetch& prefetch) {
  constexpr int kCols = V::kLanes * kExpandVecs;
  int n = 0;
  for (; n + kCols <= n_out; n += kCols)
    expand_block<V, kExpandVecs, E, R, false>(t, ldt, b_t, rank, n_out, n, y, prefetch);
  if (n < n_out) expand_block<V, kExpandVecs, E, R, true>(t, ldt, b_t, rank, n_out, n, y, prefetch);
}

template <class V, int kExpandVecs, LoraElement E>
void expand(const float* t, int ldt, int rows, const void* b_t, int rank, int n_out, float* const* y,
            LoraPrefetch& prefetch) {
  switch (rows) {
    case 4: return expand_rows<V, kExpandVecs, E, 4>(t, ldt, b_t, rank, n_out, y, prefetch);
    case 3: return expand_rows<V, kExpandVecs, E, 3>(t, ldt, b_t, rank, n_out, y, prefetch);
    case 2: return expand_rows<V, kExpandVecs, E, 2>(t, ldt, b_t, rank, n_out, y, prefetch);
    default: return expand_rows<V, kExpandVecs, E, 1>(t, ldt, b_t, rank, n_out, y, prefetch);
  }
}

// The table: shrink blocks of kShrinkA rows of A, expand blocks of kExpandVecs vectors.
template <class V, int kShrinkA, int kExpandVecs>
constexpr LoraKernels lora_kernels_of() {
  return {{&shrink<V, kShrinkA, LoraElement::F32>, &shrink<V, kShrinkA, LoraElement::F16>,
           &shrink<V, kShrinkA, LoraElement::BF16>},
          {&expand<V, kExpandVecs, LoraElement::F32>, &expand<V, kExpandVecs, LoraElement::F16>,
           &expand<V, kExpandVecs, LoraElement::BF16>}};
}

}  // namespace
}  // namespace pagoda::kernels::detail
