// AVX2 attention primitives, as in attention_avx512.cpp with 8 lanes: scores by a
// transpose-and-add tree over 8 positions at a time, values by four interleaved FMA chains.
// Keys and values of the narrower cache types become floats in registers: f16 by F16C's
// vcvtph2ps, bf16 by a 16-bit shift, q8_0 by int8 → float times the block's scale.

#include <cstdint>

#include "kernels/attention_impl.h"
#include "kernels/exp_avx2.h"
#include "kernels/simd_avx2.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int B = kAttentionBlock;
constexpr int kGroups = B / 8;  // ymm per block of scores
static_assert(B % 8 == 0);

// Lane i of the result is the sum of the lanes of p[i].
[[gnu::always_inline]] inline __m256 transpose_sum(__m256 (&p)[8]) {
  __m256 t[4], u[2];
  for (int i = 0; i < 4; ++i)  // 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    t[i] = _mm256_add_ps(_mm256_unpacklo_ps(p[2 * i], p[2 * i + 1]),
                         _mm256_unpackhi_ps(p[2 * i], p[2 * i + 1]));
  for (int i = 0; i < 2; ++i) {  // 128-bit lane: [a, b, c, d] partial sums
    const __m256d x = _mm256_castps_pd(t[2 * i]), y = _mm256_castps_pd(t[2 * i + 1]);
    u[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
  }
  return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20),
                       _mm256_permute2f128_ps(u[0], u[1], 0x31));
}

// Values d..d+8 of a row of type T as floats (masked-off lanes 0). Q8_0 rows hold whole
// blocks, so 8 columns are either all in the row or all past it.
template <KvCacheType T, bool kMasked>
[[gnu::always_inline]] inline __m256 load_row(const std::byte* row, int d, __m256i m) {
  if constexpr (T == KvCacheType::F32) {
    return load<kMasked>(reinterpret_cast<const float*>(row) + d, m);
  } else if constexpr (T == KvCacheType::Q8_0) {
    if (kMasked && _mm256_testz_si256(m, m)) return _mm256_setzero_ps();  // past the row: read nothing
    const std::byte* block = row + size_t(d / kQ8_0Block) * kQ8_0BlockBytes;
    uint16_t scale;
    __builtin_memcpy(&scale, block, 2);
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + d % kQ8_0Block));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(_cvtsh_ss(scale)));
  } else {
    __m128i h;
    if (kMasked) {  // AVX2 has no 16-bit masked load: copy the valid values (a tail only)
      alignas(16) uint16_t part[8] = {};
      __builtin_memcpy(part, row + 2 * d, 2 * size_t(__builtin_popcount(_mm256_movemask_ps(_mm256_castsi256_ps(m)))));
      h = _mm_load_si128(reinterpret_cast<const __m128i*>(part));
    } else {
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d));
    }
    if constexpr (T == KvCacheType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// Scores of 8 positions (unscaled).
template <KvCacheType T>
__m256 scores8(const float* q, const std::byte* const* k, int head_dim) {
  __m256 p[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) p[i] = _mm256_setzero_ps();
  for_chunks(head_dim, [&]<bool kMasked>(int d, __m256i m) {
    const __m256 qd = load<kMasked>(q + d, m);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) p[i] = _mm256_fmadd_ps(qd, load_row<T, kMasked>(k[i], d, m), p[i]);
  });
  return transpose_sum(p);
}

// out[d..d+16) = out·alpha + Σ_{i<count} e[i]·v[i][d..d+16), with four FMA chains (positions
// i mod 4) per 8 columns, added pairwise at the end.
template <KvCacheType T, bool kMasked>
[[gnu::always_inline]] inline void accumulate16(float* out, __m256 alpha, const float* e,
                                                const std::byte* const* v, int count, int d,
                                                int head_dim) {
  constexpr int W = 2;
  __m256i m[W];
  __m256 acc[4][W];
#pragma GCC unroll 2
  for (int j = 0; j < W; ++j) {
    m[j] = kMasked ? tail_mask(head_dim - d - 8 * j) : _mm256_set1_epi32(-1);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) acc[c][j] = _mm256_setzero_ps();
  }
  auto step = [&](int c, int i) {
    const __m256 ei = _mm256_set1_ps(e[i]);
#pragma GCC unroll 2
    for (int j = 0; j < W; ++j) acc[c][j] = _mm256_fmadd_ps(ei, load_row<T, kMasked>(v[i], d + 8 * j, m[j]), acc[c][j]);
  };
  int i = 0;
  for (; i + 3 < count; i += 4) step(0, i), step(1, i + 1), step(2, i + 2), step(3, i + 3);
  if (i < count) step(0, i);
  if (i + 1 < count) step(1, i + 1);
  if (i + 2 < count) step(2, i + 2);
#pragma GCC unroll 2
  for (int j = 0; j < W; ++j) {
    float* o = out + d + 8 * j;
    const __m256 block = _mm256_add_ps(_mm256_add_ps(acc[0][j], acc[1][j]), _mm256_add_ps(acc[2][j], acc[3][j]));
    store<kMasked>(o, m[j], _mm256_fmadd_ps(load<kMasked>(o, m[j]), alpha, block));
  }
}

struct Avx2 {
  static constexpr bool kFusedHeads = false;
  template <KvCacheType T>
  static void scores(const float* q, const std::byte* const* k, int count, int head_dim, float scale,
                     float* s) {
    const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
    for (int g = 0; g < kGroups; ++g) {
      __m256 r = neg_inf;
      if (8 * g < count) {
        r = _mm256_mul_ps(scores8<T>(q, k + 8 * g, head_dim), _mm256_set1_ps(scale));
        r = _mm256_blendv_ps(neg_inf, r, _mm256_castsi256_ps(tail_mask(count - 8 * g)));
      }
      _mm256_store_ps(s + 8 * g, r);
    }
  }
  static float max(const float* s) {
    __m256 m = _mm256_load_ps(s);
    for (int g = 1; g < kGroups; ++g) m = _mm256_max_ps(m, _mm256_load_ps(s + 8 * g));
    return reduce_max(m);
  }
  static float sum(const float* e) {
    static_assert(kGroups == 8, "pairwise sum of eight vectors");
    __m256 x[8];
    for (int g = 0; g < 8; ++g) x[g] = _mm256_load_ps(e + 8 * g);
    for (int g = 0; g < 4; ++g) x[g] = _mm256_add_ps(x[2 * g], x[2 * g + 1]);
    for (int g = 0; g < 2; ++g) x[g] = _mm256_add_ps(x[2 * g], x[2 * g + 1]);
    return reduce_add(_mm256_add_ps(x[0], x[1]));
  }
  static float exp(float x) { return _mm256_cvtss_f32(exp_ps_avx2(_mm256_set1_ps(x))); }
  static void exp_shifted(const float* s, float m, int count, float* e) {
    const __m256 vm = _mm256_set1_ps(m);
    for (int g = 0; g < kGroups; ++g)
      _mm256_store_ps(e + 8 * g, 8 * g < count ? exp_ps_avx2(_mm256_sub_ps(_mm256_load_ps(s + 8 * g), vm))
                                               : _mm256_setzero_ps());
  }
  template <KvCacheType T>
  static void accumulate(float* out, float alpha, const float* e, const std::byte* const* v,
                         int count, int head_dim) {
    const __m256 va = _mm256_set1_ps(alpha);
    int d = 0;
    for (; d + 16 <= head_dim; d += 16) accumulate16<T, false>(out, va, e, v, count, d, head_dim);
    if (d < head_dim) accumulate16<T, true>(out, va, e, v, count, d, head_dim);
  }
  template <KvCacheType T>
  static void widen(const std::byte* row, int head_dim, float* f) {
    for_chunks(head_dim, [&]<bool kMasked>(int d, __m256i m) { store<kMasked>(f + d, m, load_row<T, kMasked>(row, d, m)); });
  }
  static void divide(float* y, float a, int n) {
    const __m256 va = _mm256_set1_ps(a);
    for_chunks(n, [&]<bool kMasked>(int i, __m256i m) {
      store<kMasked>(y + i, m, _mm256_div_ps(load<kMasked>(y + i, m), va));
    });
  }
};

}  // namespace

extern const AttentionKernels attention_avx2 = attention_kernels_of<Avx2>();

}  // namespace pagoda::kernels::detail
