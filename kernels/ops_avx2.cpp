// AVX2 row ops: 8 lanes, lane-wise sums reduced in a fixed order.

#include "kernels/dispatch.h"
#include "kernels/exp_avx2.h"
#include "kernels/simd_avx2.h"

namespace pagoda::kernels::detail {

namespace {

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  __m256 acc = _mm256_setzero_ps();
  for_chunks(n, [&]<bool kMasked>(int i, __m256i m) {
    const __m256 v = load<kMasked>(x + i, m);
    acc = _mm256_fmadd_ps(v, v, acc);
  });
  const float mean = reduce_add(acc) / float(n);
  const __m256 inv = _mm256_set1_ps(1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean + eps))));
  for_chunks(n, [&]<bool kMasked>(int i, __m256i m) {
    const __m256 v = _mm256_mul_ps(inv, load<kMasked>(x + i, m));
    store<kMasked>(out + i, m, _mm256_mul_ps(load<kMasked>(weight + i, m), v));
  });
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for_chunks(n, [&]<bool kMasked>(int i, __m256i m) {
    const __m256 g = load<kMasked>(gate + i, m);
    const __m256 e = exp_ps_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    store<kMasked>(out + i, m, _mm256_mul_ps(silu, load<kMasked>(up + i, m)));
  });
}

void softmax(float* x, int n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 vmax = neg_inf;
  for_chunks(n, [&]<bool kMasked>(int i, __m256i m) {
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, load<kMasked>(x + i, m), _mm256_castsi256_ps(m)));
  });
  const __m256 max = _mm256_set1_ps(reduce_max(vmax));
  __m256 sum = _mm256_setzero_ps();
  for_chunks(n, [&]<bool kMasked>(int i, __m256i m) {
    const __m256 e = _mm256_and_ps(exp_ps_avx2(_mm256_sub_ps(load<kMasked>(x + i, m), max)),
                                   _mm256_castsi256_ps(m));
    store<kMasked>(x + i, m, e);
    sum = _mm256_add_ps(sum, e);
  });
  const __m256 total = _mm256_set1_ps(reduce_add(sum));
  for_chunks(n, [&]<bool kMasked>(int i, __m256i m) {
    store<kMasked>(x + i, m, _mm256_div_ps(load<kMasked>(x + i, m), total));
  });
}

}  // namespace

extern const OpsKernels ops_avx2 = {&rmsnorm, &swiglu, &softmax};

}  // namespace pagoda::kernels::detail
