// AVX2 attention primitives, as in attention_avx512.cpp with 8 lanes and two query heads at a
// time: scores by a transpose-and-add tree over 8 positions at a time, values by four
// interleaved FMA chains.
// Keys and values of the narrower cache types become floats in registers: f16 by F16C's
// vcvtph2ps, bf16 by a 16-bit shift, q8_0 by int8 → float times the block's scale.

#include <cstdint>
#include <type_traits>

#include "kernels/attention_impl.h"
#include "kernels/exp_avx2.h"
#include "kernels/simd_avx2.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int B = kAttentionBlock;
constexpr int kGroups = B / 8;  // ymm per block of scores
static_assert(B % 8 == 0);

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

// Scores (unscaled) of 8 positions for H query heads (rows q + h·head_dim): per head and
// position one vector chain over the columns in order, p = fma(q[d..d+8), k[d..d+8), p) from
// zero, then a fixed transpose-and-add tree (unpack ps, unpack pd, 128-bit halves) turns a
// head's 8 chains into its 8 dot products at once. Every key chunk is loaded and widened once
// for all H heads, every query chunk once for the P positions of a pass (as many as the
// registers hold beside the H·P chains).
template <KvCacheType T, int H>
void scores8_heads(const float* q, const std::byte* const* k, int head_dim, __m256* result,
                   const std::byte* const* next) {
  constexpr int P = H == 1 ? 8 : 4;
  __m256 u[H][2];
  for (int pass = 0; pass < 8 / P; ++pass) {
    const std::byte* const* kp = k + P * pass;
    if (next)
      for (int j = 0; j < P; ++j) prefetch_row(next[P * pass + j], kv_row_bytes(T, head_dim));
    __m256 a[H][P];
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
      for (int j = 0; j < P; ++j) a[h][j] = _mm256_setzero_ps();
    for_chunks(head_dim, [&]<bool kMasked>(int d, __m256i m) {
      __m256 qd[H];
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) qd[h] = load<kMasked>(q + h * head_dim + d, m);
#pragma GCC unroll 8
      for (int j = 0; j < P; ++j) {
        const __m256 x = load_row<T, kMasked>(kp[j], d, m);
#pragma GCC unroll 4
        for (int h = 0; h < H; ++h) a[h][j] = _mm256_fmadd_ps(qd[h], x, a[h][j]);
      }
    });
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 2
      for (int quad = 0; quad < P / 4; ++quad) {
        const __m256* aq = a[h] + 4 * quad;
        const __m256 t0 = _mm256_add_ps(_mm256_unpacklo_ps(aq[0], aq[1]), _mm256_unpackhi_ps(aq[0], aq[1]));
        const __m256 t1 = _mm256_add_ps(_mm256_unpacklo_ps(aq[2], aq[3]), _mm256_unpackhi_ps(aq[2], aq[3]));
        const __m256d x = _mm256_castps_pd(t0), y = _mm256_castps_pd(t1);
        u[h][P / 4 * pass + quad] =
            _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)), _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
      }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    result[h] = _mm256_add_ps(_mm256_permute2f128_ps(u[h][0], u[h][1], 0x20), _mm256_permute2f128_ps(u[h][0], u[h][1], 0x31));
}

// out_h[d..d+8·W) = out_h·alpha_h + Σ_{i<count} e_h[i]·v[i][d..d+8·W) for H heads (rows
// out + h·head_dim, weights e + h·B), with four FMA chains per head and 8 columns
// (positions i mod 4), added pairwise at the end, so a block's weighted sum is not one long
// dependency. Each value chunk is loaded and widened once for all H, each weight broadcast once
// for all W chunks; columns past head_dim are masked off when kMasked.
template <KvCacheType T, int H, int W, bool kMasked>
[[gnu::always_inline]] inline void accumulate_heads_chunks(float* out, const float* alpha, const float* e,
                                                 const std::byte* const* v, int count, int d, int head_dim,
                                                 const std::byte* const* next) {
  __m256i m[W];
  __m256 acc[H][4][W];
#pragma GCC unroll 4
  for (int w = 0; w < W; ++w) {
    m[w] = kMasked ? tail_mask(head_dim - d - 8 * w) : _mm256_set1_epi32(-1);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[h][c][w] = _mm256_setzero_ps();
  }
  auto step = [&](int c, int i) {
    __m256 vi[W];
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) vi[w] = load_row<T, kMasked>(v[i], d + 8 * w, m[w]);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m256 eh = _mm256_set1_ps(e[h * B + i]);
#pragma GCC unroll 4
      for (int w = 0; w < W; ++w) acc[h][c][w] = _mm256_fmadd_ps(eh, vi[w], acc[h][c][w]);
    }
  };
  int i = 0;
  for (; i + 3 < count; i += 4) {
    if (next)
      for (int j = 0; j < 4; ++j) prefetch_row(next[i + j], kv_row_bytes(T, head_dim));
    step(0, i), step(1, i + 1), step(2, i + 2), step(3, i + 3);
  }
  if (i < count) step(0, i);
  if (i + 1 < count) step(1, i + 1);
  if (i + 2 < count) step(2, i + 2);
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) {
      float* o = out + h * head_dim + d + 8 * w;
      const __m256 block = _mm256_add_ps(_mm256_add_ps(acc[h][0][w], acc[h][1][w]), _mm256_add_ps(acc[h][2][w], acc[h][3][w]));
      store<kMasked>(o, m[w], _mm256_fmadd_ps(load<kMasked>(o, m[w]), _mm256_set1_ps(alpha[h]), block));
    }
}

// Heads are taken two at a time: their chains fill AVX2's sixteen registers.
template <class F>
[[gnu::always_inline]] inline void by_head_pairs(int heads, F&& f) {
  for (int h0 = 0; h0 < heads; h0 += 2) {
    if (heads - h0 == 1) f(h0, std::integral_constant<int, 1>());
    else f(h0, std::integral_constant<int, 2>());
  }
}

struct Avx2 {
  static constexpr bool kFusedHeads = true;
  template <KvCacheType T>
  static void scores_heads(const float* q, int heads, const std::byte* const* k, int count, int head_dim,
                           float scale, float* s, const std::byte* const* next) {
    const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
    by_head_pairs(heads, [&]<int H>(int h0, std::integral_constant<int, H>) {
      for (int g = 0; g < kGroups; ++g) {
        __m256 r[H];
        if (8 * g < count) {
          scores8_heads<T, H>(q + h0 * head_dim, k + 8 * g, head_dim, r, h0 == 0 && next ? next + 8 * g : nullptr);
          for (int h = 0; h < H; ++h)
            r[h] = _mm256_blendv_ps(neg_inf, _mm256_mul_ps(r[h], _mm256_set1_ps(scale)),
                                    _mm256_castsi256_ps(tail_mask(count - 8 * g)));
        } else {
          for (int h = 0; h < H; ++h) r[h] = neg_inf;
        }
        for (int h = 0; h < H; ++h) _mm256_store_ps(s + (h0 + h) * B + 8 * g, r[h]);
      }
    });
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
  static void accumulate_heads(float* out, int heads, const float* alpha, const float* e, const std::byte* const* v,
                               int count, int head_dim, const std::byte* const* next) {
    by_head_pairs(heads, [&]<int H>(int h0, std::integral_constant<int, H>) {
      constexpr int W = H == 1 ? 2 : 1;  // column chunks a pass: (4 chains · W) · H accumulators
      int d = 0;
      for (; d + 8 * W <= head_dim; d += 8 * W)
        accumulate_heads_chunks<T, H, W, false>(out + h0 * head_dim, alpha + h0, e + h0 * B, v, count, d, head_dim,
                                         h0 == 0 && d == 0 ? next : nullptr);
      if (d < head_dim)
        accumulate_heads_chunks<T, H, W, true>(out + h0 * head_dim, alpha + h0, e + h0 * B, v, count, d, head_dim,
                                        h0 == 0 && d == 0 ? next : nullptr);
    });
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
