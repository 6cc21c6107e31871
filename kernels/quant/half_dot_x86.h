#pragma once
// Internal, for half_dot_avx2.cpp / _avx512.cpp only: the F16 / BF16 dot products of
// half_dot.h on 256-bit vectors (8 lanes × 2, the lane structure every ISA shares).
// Everything is in an anonymous namespace so each ISA's copy stays in its own translation unit.

#include <cstring>

#include "kernels/simd.h"  // first: <immintrin.h> without GCC 12's false warnings
#include "kernels/quant/half_dot.h"

namespace pagoda::kernels::quant {
namespace {

inline float reduce8_ps(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // v_l + v_{l+4}
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                               // s4_0+s4_2, s4_1+s4_3
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

template <bool kBf16>
inline __m256 load_half8(const uint8_t* h) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
  if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  return _mm256_cvtph_ps(raw);
}

// Every kernel below computes NA activation rows (act, act + stride, …) against one weight
// row, each pair with exactly the operations of the one-row kernel (NA = 1), so that sharing
// the weight decoding between rows changes no bits.
inline const uint8_t* act_row(const void* act, std::size_t stride, int r) {
  return static_cast<const uint8_t*>(act) + stride * r;
}

template <bool kBf16, int NA>
void dot_half(const void* w, const void* act, std::size_t stride, int cols, float* out) {
  const auto* h = static_cast<const uint8_t*>(w);
  __m256 lo[NA], hi[NA];
  for (int r = 0; r < NA; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  int k = 0;
  for (; k + 16 <= cols; k += 16) {
    const __m256 w0 = load_half8<kBf16>(h + 2 * k), w1 = load_half8<kBf16>(h + 2 * k + 16);
    for (int r = 0; r < NA; ++r) {
      const float* a = reinterpret_cast<const float*>(act_row(act, stride, r)) + k;
      lo[r] = _mm256_fmadd_ps(_mm256_loadu_ps(a), w0, lo[r]);
      hi[r] = _mm256_fmadd_ps(_mm256_loadu_ps(a + 8), w1, hi[r]);
    }
  }
  if (k < cols) {  // zero-padded tail, as the portable kernel's 0·0 steps
    alignas(32) uint16_t wt[16] = {};
    std::memcpy(wt, h + 2 * k, 2 * std::size_t(cols - k));
    const auto* wb = reinterpret_cast<const uint8_t*>(wt);
    const __m256 w0 = load_half8<kBf16>(wb), w1 = load_half8<kBf16>(wb + 16);
    for (int r = 0; r < NA; ++r) {
      alignas(32) float at[16] = {};
      std::memcpy(at, reinterpret_cast<const float*>(act_row(act, stride, r)) + k, 4 * std::size_t(cols - k));
      lo[r] = _mm256_fmadd_ps(_mm256_load_ps(at), w0, lo[r]);
      hi[r] = _mm256_fmadd_ps(_mm256_load_ps(at + 8), w1, hi[r]);
    }
  }
  for (int r = 0; r < NA; ++r) out[r] = reduce8_ps(_mm256_add_ps(lo[r], hi[r]));
}

// A kernel's one-row form as a DotFn.
template <void (*F)(const void*, const void*, std::size_t, int, float*)>
float one_row(const void* w, const void* act, int cols) {
  float out;
  F(w, act, 0, cols, &out);
  return out;
}

inline DotKernels make_x86_kernels() {
  return {{one_row<&dot_half<false, 1>>, &dot_half<false, 4>}, {one_row<&dot_half<true, 1>>, &dot_half<true, 4>}};
}

}  // namespace
}  // namespace pagoda::kernels::quant
