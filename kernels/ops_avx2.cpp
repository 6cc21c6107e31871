// AVX2 row ops: 8 lanes with a masked tail, lane-wise sums reduced in a fixed order.

#include "kernels/simd.h"

#include "kernels/dispatch.h"
#include "kernels/exp_avx2.h"

namespace pagoda::kernels::detail {

namespace {

__m256i tail_mask(int remaining) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(remaining), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float reduce_max(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256 v = _mm256_maskload_ps(x + i, tail_mask(n - i));
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  const float mean = reduce_add(acc) / float(n);
  const float inv = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean + eps)));
  const __m256 scale = _mm256_set1_ps(inv);
  for (int i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 v = _mm256_mul_ps(scale, _mm256_maskload_ps(x + i, m));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(_mm256_maskload_ps(weight + i, m), v));
  }
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 e = exp_ps_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(silu, _mm256_maskload_ps(up + i, m)));
  }
}

void softmax(float* x, int n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 vmax = neg_inf;
  for (int i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
  }
  const __m256 max = _mm256_set1_ps(reduce_max(vmax));
  __m256 sum = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 e = _mm256_and_ps(exp_ps_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), max)),
                                   _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(x + i, m, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 total = _mm256_set1_ps(reduce_add(sum));
  for (int i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_div_ps(_mm256_maskload_ps(x + i, m), total));
  }
}

}  // namespace

extern const OpsKernels ops_avx2 = {&rmsnorm, &swiglu, &softmax};

}  // namespace pagoda::kernels::detail
