// AVX-512 row ops: 16 lanes, lane-wise sums reduced in a fixed order.

#include "kernels/dispatch.h"
#include "kernels/exp_avx512.h"
#include "kernels/simd_avx512.h"

namespace pagoda::kernels::detail {

namespace {

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  __m512 acc = _mm512_setzero_ps();
  for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
    const __m512 v = load<kMasked>(x + i, m);
    acc = _mm512_fmadd_ps(v, v, acc);
  });
  const float mean = _mm512_reduce_add_ps(acc) / float(n);
  const __m512 inv = _mm512_set1_ps(1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean + eps))));
  for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
    const __m512 v = _mm512_mul_ps(inv, load<kMasked>(x + i, m));
    store<kMasked>(out + i, m, _mm512_mul_ps(load<kMasked>(weight + i, m), v));
  });
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
    const __m512 g = load<kMasked>(gate + i, m);
    const __m512 e = exp_ps_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    store<kMasked>(out + i, m, _mm512_mul_ps(silu, load<kMasked>(up + i, m)));
  });
}

void softmax(float* x, int n) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 vmax = neg_inf;
  for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
    vmax = _mm512_max_ps(vmax, _mm512_mask_blend_ps(m, neg_inf, load<kMasked>(x + i, m)));
  });
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 sum = _mm512_setzero_ps();
  for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
    const __m512 e = _mm512_maskz_mov_ps(m, exp_ps_avx512(_mm512_sub_ps(load<kMasked>(x + i, m), max)));
    store<kMasked>(x + i, m, e);
    sum = _mm512_add_ps(sum, e);
  });
  const __m512 total = _mm512_set1_ps(_mm512_reduce_add_ps(sum));
  for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
    store<kMasked>(x + i, m, _mm512_div_ps(load<kMasked>(x + i, m), total));
  });
}

}  // namespace

extern const OpsKernels ops_avx512 = {&rmsnorm, &swiglu, &softmax};

}  // namespace pagoda::kernels::detail
