#pragma once
// Internal, for *_avx2.cpp only: exp over 8 floats, the same double-precision evaluation as
// exp_avx512.h (see there), building 2^k from its bits since AVX2 has no vscalefpd.

#include "kernels/simd.h"

namespace pagoda::kernels::detail {

static inline __m256d exp_pd_avx2(__m256d x) {
  x = _mm256_max_pd(_mm256_set1_pd(-150.0), _mm256_min_pd(_mm256_set1_pd(150.0), x));
  const __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(0x1.71547652b82fep0)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.62e42fefa3800p-1), x);
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.ef35793c76730p-45), r);
  __m256d p = _mm256_set1_pd(1.0 / 39916800.0);
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 3628800.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 362880.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 40320.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 5040.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 720.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 120.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 24.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 6.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  // |k| <= 217 after the clamp, so 2^k is a normal double: exponent field k + 1023.
  const __m256i k64 = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
  const __m256i two_k = _mm256_slli_epi64(_mm256_add_epi64(k64, _mm256_set1_epi64x(1023)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(two_k));
}

static inline __m256 exp_ps_avx2(__m256 x) {
  const __m256d lo = exp_pd_avx2(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
  const __m256d hi = exp_pd_avx2(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
}

}  // namespace pagoda::kernels::detail
