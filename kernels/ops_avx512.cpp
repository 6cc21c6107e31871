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

// vcvtps2ph rounds to nearest even and keeps NaN quiet, as f32_to_f16 does.
void to_f16(const float* x, uint16_t* out, int n) {
  for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
    const __m256i h = _mm512_cvtps_ph(load<kMasked>(x + i, m), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(out + i, m, h);
  });
}

// Integer rounding to nearest even on the upper 16 bits, as f32_to_bf16 does.
void to_bf16(const float* x, uint16_t* out, int n) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
    const __m512i v = _mm512_castps_si512(load<kMasked>(x + i, m));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, abs_mask), inf);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(v, 16), one);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(v, _mm512_add_epi32(bias, odd)), 16);
    const __m512i kept = _mm512_or_si512(_mm512_srli_epi32(v, 16), quiet);
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, kept)));
  });
}

}  // namespace

extern const OpsKernels ops_avx512 = {&rmsnorm, &swiglu, &softmax, &to_f16, &to_bf16};

}  // namespace pagoda::kernels::detail
