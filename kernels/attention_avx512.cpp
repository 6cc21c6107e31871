// AVX-512 attention primitives: 16 lanes with a masked tail (head_dim need not be a multiple
// of 16), dot products reduced in a fixed order.

#include "kernels/simd.h"

#include "kernels/attention_impl.h"
#include "kernels/dispatch.h"
#include "kernels/exp_avx512.h"

namespace pagoda::kernels::detail {

namespace {

static_assert(kAttentionBlock == 16, "exp_shifted handles one zmm of scores");

__mmask16 tail_mask(int remaining) {
  return remaining >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << remaining) - 1);
}

struct Avx512 {
  static float dot(const float* a, const float* b, int n) {
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
    }
    return _mm512_reduce_add_ps(acc);
  }
  static void axpy(float* y, float a, const float* x, int n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __m512 r = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
      _mm512_mask_storeu_ps(y + i, m, r);
    }
  }
  static void scale(float* y, float a, int n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), va));
    }
  }
  static void divide(float* y, float a, int n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, y + i), va));
    }
  }
  static float exp(float x) { return _mm512_cvtss_f32(exp_ps_avx512(_mm512_set1_ps(x))); }
  static void exp_shifted(const float* s, float m, float* e) {
    _mm512_store_ps(e, exp_ps_avx512(_mm512_sub_ps(_mm512_load_ps(s), _mm512_set1_ps(m))));
  }
};

}  // namespace

extern const AttentionKernels attention_avx512 = {&paged_attention<Avx512>};

}  // namespace pagoda::kernels::detail
