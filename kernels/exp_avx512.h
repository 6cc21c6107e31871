#pragma once
// Internal, for *_avx512.cpp only: exp over 16 floats, evaluated in double precision and
// rounded once, so it is correctly rounded in all but a vanishing fraction of cases and agrees
// with std::exp(float) (glibc: < 0.502 ulp) almost always. Functions are static so no copy
// compiled with AVX-512 can stand in for another translation unit's.

#include "kernels/simd.h"

namespace pagoda::kernels::detail {

static inline __m512d exp_pd_avx512(__m512d x) {
  // exp(±150) is 0 or +inf once rounded to float; the clamp keeps 2^k a normal double.
  // Constants first, so a NaN in x propagates through min/max.
  x = _mm512_max_pd(_mm512_set1_pd(-150.0), _mm512_min_pd(_mm512_set1_pd(150.0), x));
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(0x1.71547652b82fep0)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // Cody-Waite reduction: r = x - k·ln2 with ln2 split so k·ln2_hi is exact; |r| <= ln2/2.
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.62e42fefa3800p-1), x);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.ef35793c76730p-45), r);
  // Taylor series to degree 11: truncation error < 1e-14 relative on |r| <= ln2/2.
  __m512d p = _mm512_set1_pd(1.0 / 39916800.0);
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 3628800.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 362880.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 40320.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 5040.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 720.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 120.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 24.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 6.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
  return _mm512_scalef_pd(p, k);
}

static inline __m512 exp_ps_avx512(__m512 x) {
  const __m512d lo = exp_pd_avx512(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
  const __m512d hi = exp_pd_avx512(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)));
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

}  // namespace pagoda::kernels::detail
