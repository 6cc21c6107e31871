// AVX2 row ops: ops_x86.h's on 8 lanes, and the narrowing conversions.

#include "kernels/dispatch.h"
#include "kernels/half.h"
#include "kernels/ops_x86.h"

namespace pagoda::kernels::detail {

namespace {

// Eight values at a time with F16C's vcvtps2ph (round to nearest even, NaN kept quiet), the
// tail with the scalar conversion, which gives the same bits.
void to_f16(const float* x, uint16_t* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

void to_bf16(const float* x, uint16_t* out, int n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);  // both positive
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(v, 16), one);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(v, _mm256_add_epi32(bias, odd)), 16);
    const __m256i kept = _mm256_or_si256(_mm256_srli_epi32(v, 16), quiet);
    const __m256i r = _mm256_blendv_epi8(rounded, kept, nan);
    // Values fit 16 bits, so the unsigned-saturating pack is exact; then its two lanes in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0b1000);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

}  // namespace

extern const OpsKernels ops_avx2 = {
    &rmsnorm<Avx2Lanes>, &swiglu<Avx2Lanes>, &softmax<Avx2Lanes>, &gelu<Avx2Lanes>, &to_f16, &to_bf16};

}  // namespace pagoda::kernels::detail
