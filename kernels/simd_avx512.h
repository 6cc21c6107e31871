#pragma once
// Internal, for *_avx512.cpp only: loads and stores of 16 floats with an optional tail mask.
// Masked accesses are slower than plain ones, so loops run plain over whole vectors and
// masked over the tail only (for_chunks). Functions are static so no copy compiled with
// AVX-512 can stand in for another translation unit's.

#include "kernels/simd.h"

namespace pagoda::kernels::detail {

// The first `remaining` lanes (all for 16 or more, none for 0 or less).
static inline __mmask16 tail_mask(int remaining) {
  return remaining >= 16 ? __mmask16(0xFFFF)
         : remaining <= 0 ? __mmask16(0)
                          : __mmask16((1u << remaining) - 1);
}

template <bool kMasked>
[[gnu::always_inline]] static inline __m512 load(const float* p, __mmask16 m) {
  return kMasked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
}

template <bool kMasked>
[[gnu::always_inline]] static inline void store(float* p, __mmask16 m, __m512 x) {
  if (kMasked)
    _mm512_mask_storeu_ps(p, m, x);
  else
    _mm512_storeu_ps(p, x);
}

// Calls f.template operator()<kMasked>(i, mask) for i = 0, 16, ... < n: plain over whole
// vectors, masked over the tail. Masked-off lanes load as 0.
template <class F>
[[gnu::always_inline]] static inline void for_chunks(int n, F&& f) {
  int i = 0;
  for (; i + 16 <= n; i += 16) f.template operator()<false>(i, __mmask16(0xFFFF));
  if (i < n) f.template operator()<true>(i, tail_mask(n - i));
}

}  // namespace pagoda::kernels::detail
