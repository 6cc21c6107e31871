// AVX-512 row ops: ops_x86.h's on 16 lanes, and the narrowing conversions (masked over the tail).

#include "kernels/dispatch.h"
#include "kernels/ops_x86.h"

namespace pagoda::kernels::detail {

namespace {

// vcvtps2ph rounds to nearest even and keeps NaN quiet, as f32_to_f16 does.
void to_f16(const float* x, uint16_t* out, int n) {
  for_chunks<Avx512Lanes>(n, [&]<bool kMasked>(int i, __mmask16 m) {
    const __m512 v = Avx512Lanes::load<kMasked>(x + i, m);
    const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(out + i, m, h);
  });
}

// Integer rounding to nearest even on the upper 16 bits, as f32_to_bf16 does.
void to_bf16(const float* x, uint16_t* out, int n) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  for_chunks<Avx512Lanes>(n, [&]<bool kMasked>(int i, __mmask16 m) {
    const __m512i v = _mm512_castps_si512(Avx512Lanes::load<kMasked>(x + i, m));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, abs_mask), inf);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(v, 16), one);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(v, _mm512_add_epi32(bias, odd)), 16);
    const __m512i kept = _mm512_or_si512(_mm512_srli_epi32(v, 16), quiet);
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, kept)));
  });
}

}  // namespace

extern const OpsKernels ops_avx512 = {
    &rmsnorm<Avx512Lanes>, &swiglu<Avx512Lanes>, &softmax<Avx512Lanes>, &gelu<Avx512Lanes>, &to_f16, &to_bf16};

}  // namespace pagoda::kernels::detail
