// AVX2 row ops: 8 lanes, lane-wise sums reduced in a fixed order.

#include "kernels/dispatch.h"
#include "kernels/half.h"
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

extern const OpsKernels ops_avx2 = {&rmsnorm, &swiglu, &softmax, &to_f16, &to_bf16};

}  // namespace pagoda::kernels::detail
