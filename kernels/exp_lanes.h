#pragma once
// Internal, for *_avx2.cpp / *_avx512.cpp only: exp over a vector of floats (simd_lanes.h),
// evaluated in double precision and rounded once, so it is correctly rounded in all but a
// vanishing fraction of cases and agrees with std::exp(float) (glibc: < 0.502 ulp) almost
// always. The same operations in the same order on every ISA; only how 2^k is applied differs
// (vscalefpd, or AVX2's exponent bits), which gives the same double.

#include "kernels/simd_lanes.h"

namespace pagoda::kernels::detail {
namespace {

template <class V>
[[gnu::always_inline]] inline typename V::D exp_pd(typename V::D x) {
  // exp(±150) is 0 or +inf once rounded to float; the clamp keeps 2^k a normal double.
  // Constants first, so a NaN in x propagates through min/max.
  x = V::dmax(V::dset1(-150.0), V::dmin(V::dset1(150.0), x));
  const typename V::D k = V::round_nearest(V::dmul(x, V::dset1(0x1.71547652b82fep0)));
  // Cody-Waite reduction: r = x - k·ln2 with ln2 split so k·ln2_hi is exact; |r| <= ln2/2.
  typename V::D r = V::dfnmadd(k, V::dset1(0x1.62e42fefa3800p-1), x);
  r = V::dfnmadd(k, V::dset1(0x1.ef35793c76730p-45), r);
  // Taylor series to degree 11: truncation error < 1e-14 relative on |r| <= ln2/2.
  typename V::D p = V::dset1(1.0 / 39916800.0);
  p = V::dfmadd(p, r, V::dset1(1.0 / 3628800.0));
  p = V::dfmadd(p, r, V::dset1(1.0 / 362880.0));
  p = V::dfmadd(p, r, V::dset1(1.0 / 40320.0));
  p = V::dfmadd(p, r, V::dset1(1.0 / 5040.0));
  p = V::dfmadd(p, r, V::dset1(1.0 / 720.0));
  p = V::dfmadd(p, r, V::dset1(1.0 / 120.0));
  p = V::dfmadd(p, r, V::dset1(1.0 / 24.0));
  p = V::dfmadd(p, r, V::dset1(1.0 / 6.0));
  p = V::dfmadd(p, r, V::dset1(0.5));
  p = V::dfmadd(p, r, V::dset1(1.0));
  p = V::dfmadd(p, r, V::dset1(1.0));
  // |k| <= 217 after the clamp, so p·2^k is a normal double, exact.
  return V::scale2(p, k);
}

template <class V>
[[gnu::always_inline]] inline typename V::F exp_ps(typename V::F x) {
  const typename V::D lo = exp_pd<V>(V::widen_lo(x));
  const typename V::D hi = exp_pd<V>(V::widen_hi(x));
  return V::narrow(lo, hi);
}

}  // namespace
}  // namespace pagoda::kernels::detail
