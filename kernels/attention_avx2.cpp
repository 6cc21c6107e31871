// AVX2 attention primitives: 8 lanes with a masked tail, dot products reduced in a fixed order.

#include "kernels/simd.h"

#include "kernels/attention_impl.h"
#include "kernels/dispatch.h"
#include "kernels/exp_avx2.h"

namespace pagoda::kernels::detail {

namespace {

static_assert(kAttentionBlock == 16, "exp_shifted handles two ymm of scores");

__m256i tail_mask(int remaining) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(remaining), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

struct Avx2 {
  static float dot(const float* a, const float* b, int n) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
      const __m256i m = tail_mask(n - i);
      acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc);
    }
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static void axpy(float* y, float a, const float* x, int n) {
    const __m256 va = _mm256_set1_ps(a);
    for (int i = 0; i < n; i += 8) {
      const __m256i m = tail_mask(n - i);
      _mm256_maskstore_ps(y + i, m, _mm256_fmadd_ps(va, _mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m)));
    }
  }
  static void scale(float* y, float a, int n) {
    const __m256 va = _mm256_set1_ps(a);
    for (int i = 0; i < n; i += 8) {
      const __m256i m = tail_mask(n - i);
      _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(_mm256_maskload_ps(y + i, m), va));
    }
  }
  static void divide(float* y, float a, int n) {
    const __m256 va = _mm256_set1_ps(a);
    for (int i = 0; i < n; i += 8) {
      const __m256i m = tail_mask(n - i);
      _mm256_maskstore_ps(y + i, m, _mm256_div_ps(_mm256_maskload_ps(y + i, m), va));
    }
  }
  static float exp(float x) { return _mm256_cvtss_f32(exp_ps_avx2(_mm256_set1_ps(x))); }
  static void exp_shifted(const float* s, float m, float* e) {
    const __m256 vm = _mm256_set1_ps(m);
    _mm256_store_ps(e, exp_ps_avx2(_mm256_sub_ps(_mm256_load_ps(s), vm)));
    _mm256_store_ps(e + 8, exp_ps_avx2(_mm256_sub_ps(_mm256_load_ps(s + 8), vm)));
  }
};

}  // namespace

extern const AttentionKernels attention_avx2 = {&paged_attention<Avx2>};

}  // namespace pagoda::kernels::detail
