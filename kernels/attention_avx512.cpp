// AVX-512 attention primitives. Scores: one lane-wise product vector per position, then a
// transpose-and-add tree turns the 16 vectors into the 16 dot products at once. Values: two
// interleaved FMA chains per 16 columns, so the sum over a block is not one long dependency.
// head_dim need not be a multiple of 16 (masked tails).

#include "kernels/attention_impl.h"
#include "kernels/dispatch.h"
#include "kernels/exp_avx512.h"
#include "kernels/simd.h"

namespace pagoda::kernels::detail {

namespace {

static_assert(kAttentionBlock == 16, "one zmm holds a block's scores");

__mmask16 tail_mask(int remaining) {
  return remaining >= 16 ? __mmask16(0xFFFF)
         : remaining <= 0 ? __mmask16(0)
                          : __mmask16((1u << remaining) - 1);
}

// Lane i of the result is the sum of the lanes of p[i].
__m512 transpose_sum(__m512 p[16]) {
  __m512 t[8], u[4], w[2];
  for (int i = 0; i < 8; ++i)  // 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(p[2 * i], p[2 * i + 1]),
                         _mm512_unpackhi_ps(p[2 * i], p[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // 128-bit lane: [a, b, c, d] partial sums
    const __m512d x = _mm512_castps_pd(t[2 * i]), y = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  for (int i = 0; i < 2; ++i)  // pairs of 128-bit lanes added
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88),
                       _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
}

struct Avx512 {
  static void scores(const float* q, const float* const* k, int count, int head_dim, float scale,
                     float* s) {
    constexpr int W = 4;  // zmm of q held in registers per pass over the block's keys
    __m512 p[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) p[i] = _mm512_setzero_ps();
    for (int d = 0; d < head_dim; d += 16 * W) {
      __mmask16 m[W];
      __m512 qd[W];
#pragma GCC unroll 4
      for (int j = 0; j < W; ++j) {
        m[j] = tail_mask(head_dim - d - 16 * j);
        qd[j] = _mm512_maskz_loadu_ps(m[j], q + d + 16 * j);
      }
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const float* ki = k[i] + d;
#pragma GCC unroll 4
        for (int j = 0; j < W; ++j) p[i] = _mm512_fmadd_ps(qd[j], _mm512_maskz_loadu_ps(m[j], ki + 16 * j), p[i]);
      }
    }
    const __m512 r = _mm512_mul_ps(transpose_sum(p), _mm512_set1_ps(scale));
    _mm512_store_ps(s, _mm512_mask_blend_ps(tail_mask(count), _mm512_set1_ps(-__builtin_inff()), r));
  }
  static float max(const float* s) { return _mm512_reduce_max_ps(_mm512_load_ps(s)); }
  static float sum(const float* e) { return _mm512_reduce_add_ps(_mm512_load_ps(e)); }
  static float exp(float x) { return _mm512_cvtss_f32(exp_ps_avx512(_mm512_set1_ps(x))); }
  static void exp_shifted(const float* s, float m, float* e) {
    _mm512_store_ps(e, exp_ps_avx512(_mm512_sub_ps(_mm512_load_ps(s), _mm512_set1_ps(m))));
  }
  static void accumulate(float* out, float alpha, const float* e, const float* const* v,
                         int count, int head_dim) {
    constexpr int W = 4;  // zmm of columns per pass
    for (int d = 0; d < head_dim; d += 16 * W) {
      __mmask16 m[W];
      __m512 even[W], odd[W];
#pragma GCC unroll 4
      for (int j = 0; j < W; ++j) {
        m[j] = tail_mask(head_dim - d - 16 * j);
        even[j] = odd[j] = _mm512_setzero_ps();
      }
      int i = 0;
      for (; i + 1 < count; i += 2) {
        const __m512 e0 = _mm512_set1_ps(e[i]), e1 = _mm512_set1_ps(e[i + 1]);
#pragma GCC unroll 4
        for (int j = 0; j < W; ++j) {
          even[j] = _mm512_fmadd_ps(e0, _mm512_maskz_loadu_ps(m[j], v[i] + d + 16 * j), even[j]);
          odd[j] = _mm512_fmadd_ps(e1, _mm512_maskz_loadu_ps(m[j], v[i + 1] + d + 16 * j), odd[j]);
        }
      }
      if (i < count) {
        const __m512 e0 = _mm512_set1_ps(e[i]);
#pragma GCC unroll 4
        for (int j = 0; j < W; ++j)
          even[j] = _mm512_fmadd_ps(e0, _mm512_maskz_loadu_ps(m[j], v[i] + d + 16 * j), even[j]);
      }
      const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 4
      for (int j = 0; j < W; ++j) {
        float* o = out + d + 16 * j;
        const __m512 block = _mm512_add_ps(even[j], odd[j]);
        _mm512_mask_storeu_ps(o, m[j], _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[j], o), va, block));
      }
    }
  }
  static void divide(float* y, float a, int n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, y + i), va));
    }
  }
};

}  // namespace

extern const AttentionKernels attention_avx512 = {&paged_attention<Avx512>};

}  // namespace pagoda::kernels::detail
