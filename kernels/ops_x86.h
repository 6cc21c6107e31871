#pragma once
// Internal, for ops_avx2.cpp / ops_avx512.cpp only: the row ops written once over a vector of
// lanes (simd_lanes.h): lane-wise sums and maxima over the row, then reduced across the lanes
// in the ISA's fixed order. The narrowing conversions to f16 / bf16 differ by ISA (AVX-512
// stores 16-bit lanes masked) and stay in each unit.

#include "kernels/exp_lanes.h"
#include "kernels/simd_lanes.h"

namespace pagoda::kernels::detail {
namespace {

template <class V>
void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  using F = typename V::F;
  using Mask = typename V::Mask;
  F acc = V::zero();
  for_chunks<V>(n, [&]<bool kMasked>(int i, Mask m) {
    const F v = V::template load<kMasked>(x + i, m);
    acc = V::fmadd(v, v, acc);
  });
  const float mean = V::reduce_add(acc) / float(n);
  const F inv = V::set1(1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean + eps))));
  for_chunks<V>(n, [&]<bool kMasked>(int i, Mask m) {
    const F v = V::mul(inv, V::template load<kMasked>(x + i, m));
    V::template store<kMasked>(out + i, m, V::mul(V::template load<kMasked>(weight + i, m), v));
  });
}

template <class V>
void swiglu(const float* gate, const float* up, float* out, int n) {
  using F = typename V::F;
  const F one = V::set1(1.0f);
  for_chunks<V>(n, [&]<bool kMasked>(int i, typename V::Mask m) {
    const F g = V::template load<kMasked>(gate + i, m);
    const F e = exp_ps<V>(V::sub(V::zero(), g));
    const F silu = V::div(g, V::add(one, e));
    V::template store<kMasked>(out + i, m, V::mul(silu, V::template load<kMasked>(up + i, m)));
  });
}

// gelu(x) = 0.5·x·(1 + tanh(u)) = x / (1 + exp(-2u)), u = √(2/π)·(x + 0.044715·x³).
template <class V>
void gelu(const float* x, float* out, int n) {
  using F = typename V::F;
  const F one = V::set1(1.0f), scale = V::set1(-2.0f * 0.7978845608f), cubic = V::set1(0.044715f);
  for_chunks<V>(n, [&]<bool kMasked>(int i, typename V::Mask m) {
    const F v = V::template load<kMasked>(x + i, m);
    const F inner = V::fmadd(cubic, V::mul(V::mul(v, v), v), v);
    const F e = exp_ps<V>(V::mul(scale, inner));
    V::template store<kMasked>(out + i, m, V::div(v, V::add(one, e)));
  });
}

template <class V>
void softmax(float* x, int n) {
  using F = typename V::F;
  using Mask = typename V::Mask;
  const F neg_inf = V::set1(-__builtin_inff());
  F vmax = neg_inf;
  for_chunks<V>(n, [&]<bool kMasked>(int i, Mask m) {
    vmax = V::max(vmax, V::select(m, V::template load<kMasked>(x + i, m), neg_inf));
  });
  const F max = V::set1(V::reduce_max(vmax));
  F sum = V::zero();
  for_chunks<V>(n, [&]<bool kMasked>(int i, Mask m) {
    const F e = V::keep(m, exp_ps<V>(V::sub(V::template load<kMasked>(x + i, m), max)));
    V::template store<kMasked>(x + i, m, e);
    sum = V::add(sum, e);
  });
  const F total = V::set1(V::reduce_add(sum));
  for_chunks<V>(n, [&]<bool kMasked>(int i, Mask m) {
    V::template store<kMasked>(x + i, m, V::div(V::template load<kMasked>(x + i, m), total));
  });
}

}  // namespace
}  // namespace pagoda::kernels::detail
