#pragma once
// Internal, for *_avx2.cpp only: loads and stores of 8 floats with an optional tail mask, and
// horizontal reductions in a fixed order. vmaskmovps is slow (very slow as a store on AMD), so
// loops run plain over whole vectors and masked over the tail only (for_chunks). Functions are
// static so no copy compiled with AVX2 can stand in for another translation unit's.

#include "kernels/simd.h"

namespace pagoda::kernels::detail {

// The first `remaining` lanes (all for 8 or more, none for 0 or less).
static inline __m256i tail_mask(int remaining) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(remaining), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <bool kMasked>
[[gnu::always_inline]] static inline __m256 load(const float* p, __m256i m) {
  return kMasked ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
}

template <bool kMasked>
[[gnu::always_inline]] static inline void store(float* p, __m256i m, __m256 x) {
  if (kMasked)
    _mm256_maskstore_ps(p, m, x);
  else
    _mm256_storeu_ps(p, x);
}

// Calls f.template operator()<kMasked>(i, mask) for i = 0, 8, ... < n: plain over whole
// vectors, masked over the tail. Masked-off lanes load as 0.
template <class F>
[[gnu::always_inline]] static inline void for_chunks(int n, F&& f) {
  int i = 0;
  for (; i + 8 <= n; i += 8) f.template operator()<false>(i, _mm256_set1_epi32(-1));
  if (i < n) f.template operator()<true>(i, tail_mask(n - i));
}

static inline float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float reduce_max(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace pagoda::kernels::detail
