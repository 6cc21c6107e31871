// AVX-512 quantization of activation rows to Q8_32 blocks, bit for bit the portable code's
// (activations.cpp): the block's max |x| (a maximum is exact in any order; NaN is skipped as
// std::max skips it), the same float product x·(1/d), and round-half-away-from-zero written as
// truncation plus the remainder's comparison with ±0.5, as the portable code writes it.

#include <cmath>

#include "kernels/quant/activations.h"
#include "kernels/simd.h"

namespace pagoda::kernels::quant {

void quantize_q8_32_avx512(const float* x, int cols, ActBlock32* out) {
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 half = _mm512_set1_ps(0.5f), minus_half = _mm512_set1_ps(-0.5f);
  const __m512i one = _mm512_set1_epi32(1);
  for (int b = 0; b < cols / kQK; ++b, x += kQK) {
    const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
    // max(|v|, acc) keeps acc when |v| is NaN (the second operand wins), as std::max(acc, |v|).
    __m512 acc = _mm512_max_ps(_mm512_and_ps(lo, magnitude), _mm512_setzero_ps());
    acc = _mm512_max_ps(_mm512_and_ps(hi, magnitude), acc);
    const float amax = _mm512_reduce_max_ps(acc);
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const bool divide = std::isinf(id);  // a subnormal d, as the portable code handles it
    const __m512 scale = _mm512_set1_ps(divide ? d : id);
    int32_t sum = 0;
    for (int h = 0; h < 2; ++h) {
      const __m512 v = divide ? _mm512_div_ps(h ? hi : lo, scale) : _mm512_mul_ps(h ? hi : lo, scale);
      const __m512i t = _mm512_cvttps_epi32(v);
      const __m512 rest = _mm512_sub_ps(v, _mm512_cvtepi32_ps(t));
      __m512i q = _mm512_mask_add_epi32(t, _mm512_cmp_ps_mask(rest, half, _CMP_GE_OQ), t, one);
      q = _mm512_mask_sub_epi32(q, _mm512_cmp_ps_mask(rest, minus_half, _CMP_LE_OQ), q, one);
      // NaN and ±infinity (fpclass QNaN | +Inf | −Inf | SNaN) quantize to 0.
      q = _mm512_maskz_mov_epi32(~_mm512_fpclass_ps_mask(v, 0x99), q);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16 * h), _mm512_cvtepi32_epi8(q));
      sum += _mm512_reduce_add_epi32(q);
    }
    out[b].d = d;
    out[b].sum = sum;
  }
}

}  // namespace pagoda::kernels::quant
