// AVX-512 attention primitives, taking a token's query heads through a block together (fused
// heads: each key and value chunk is read and widened once for all of them, and a decode
// token prefetches the next block's rows as it goes). Scores: one lane-wise product vector per
// position, then a transpose-and-add tree turns 16 such vectors into 16 dot products at once.
// Values: four interleaved FMA chains per 16 columns, so a block's weighted sum is not one
// long dependency.
// head_dim need not be a multiple of 16: its tail is handled with (slower) masked loads.
// Keys and values of the narrower cache types become floats in registers: f16 by vcvtph2ps,
// bf16 by a 16-bit shift, q8_0 by int8 → float times the block's scale.

#include <type_traits>

#include "kernels/attention_impl.h"
#include "kernels/exp_avx512.h"
#include "kernels/simd_avx512.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int B = kAttentionBlock;
constexpr int kGroups = B / 16;  // zmm per block of scores
static_assert(B % 16 == 0);

// Values d..d+16 of a row of type T as floats (masked-off lanes 0). Q8_0 rows hold whole
// blocks, so d is 0 or 16 within a block and 16 columns are either all in the row or all past it.
template <KvCacheType T, bool kMasked>
[[gnu::always_inline]] inline __m512 load_row(const std::byte* row, int d, __mmask16 m) {
  if constexpr (T == KvCacheType::F32) {
    return load<kMasked>(reinterpret_cast<const float*>(row) + d, m);
  } else if constexpr (T == KvCacheType::Q8_0) {
    if (kMasked && m == 0) return _mm512_setzero_ps();  // columns past the row: read nothing
    const std::byte* block = row + size_t(d / kQ8_0Block) * kQ8_0BlockBytes;
    uint16_t scale;
    __builtin_memcpy(&scale, block, 2);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + d % kQ8_0Block));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(_cvtsh_ss(scale)));
  } else {
    const auto* p = reinterpret_cast<const __m256i*>(row + 2 * d);
    const __m256i h = kMasked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256(p);
    if constexpr (T == KvCacheType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Scores (unscaled) of 16 positions for H query heads (rows q + h·head_dim): per head and
// position one vector chain over the columns in order, p = fma(q[d..d+16), k[d..d+16), p)
// from zero, then a fixed transpose-and-add tree (unpack ps, unpack pd, two 128-bit-lane
// shuffles) turns a head's 16 chains into its 16 dot products at once. Every key chunk is
// loaded and widened once for all H heads, every query chunk once for four positions.
template <KvCacheType T, int H>
void scores16_heads(const float* q, const std::byte* const* k, int head_dim, __m512* result,
                    const std::byte* const* next) {
  __m512 u[H][4];
  for (int quad = 0; quad < 4; ++quad) {
    const std::byte* const* kq = k + 4 * quad;
    if (next)
      for (int j = 0; j < 4; ++j) prefetch_row(next[4 * quad + j], kv_row_bytes(T, head_dim));
    __m512 a[H][4];
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) a[h][j] = _mm512_setzero_ps();
    for_chunks(head_dim, [&]<bool kMasked>(int d, __mmask16 m) {
      __m512 x[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) x[j] = load_row<T, kMasked>(kq[j], d, m);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) {
        const __m512 qd = load<kMasked>(q + h * head_dim + d, m);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) a[h][j] = _mm512_fmadd_ps(qd, x[j], a[h][j]);
      }
    });
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(a[h][0], a[h][1]), _mm512_unpackhi_ps(a[h][0], a[h][1]));
      const __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(a[h][2], a[h][3]), _mm512_unpackhi_ps(a[h][2], a[h][3]));
      const __m512d x = _mm512_castps_pd(t0), y = _mm512_castps_pd(t1);
      u[h][quad] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h) {
    __m512 w[2];
    for (int i = 0; i < 2; ++i)
      w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[h][2 * i], u[h][2 * i + 1], 0x88),
                           _mm512_shuffle_f32x4(u[h][2 * i], u[h][2 * i + 1], 0xDD));
    result[h] = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
  }
}

// out_h[d..d+16·W) = out_h·alpha_h + Σ_{i<count} e_h[i]·v[i][d..d+16·W) for H heads (rows
// out + h·head_dim, weights e + h·B), with four FMA chains per head and 16 columns
// (positions i mod 4), added pairwise at the end, so a block's weighted sum is not one long
// dependency. Each value chunk is loaded and widened once for all H, each weight broadcast once
// for all W chunks; columns past head_dim are masked off when kMasked.
template <KvCacheType T, int H, int W, bool kMasked>
[[gnu::always_inline]] inline void accumulate_heads_chunks(float* out, const float* alpha, const float* e,
                                                 const std::byte* const* v, int count, int d, int head_dim,
                                                 const std::byte* const* next) {
  __mmask16 m[W];
  __m512 acc[H][4][W];
#pragma GCC unroll 4
  for (int w = 0; w < W; ++w) {
    m[w] = kMasked ? tail_mask(head_dim - d - 16 * w) : __mmask16(0xFFFF);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[h][c][w] = _mm512_setzero_ps();
  }
  auto step = [&](int c, int i) {
    __m512 vi[W];
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) vi[w] = load_row<T, kMasked>(v[i], d + 16 * w, m[w]);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m512 eh = _mm512_set1_ps(e[h * B + i]);
#pragma GCC unroll 4
      for (int w = 0; w < W; ++w) acc[h][c][w] = _mm512_fmadd_ps(eh, vi[w], acc[h][c][w]);
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
      float* o = out + h * head_dim + d + 16 * w;
      const __m512 block = _mm512_add_ps(_mm512_add_ps(acc[h][0][w], acc[h][1][w]), _mm512_add_ps(acc[h][2][w], acc[h][3][w]));
      store<kMasked>(o, m[w], _mm512_fmadd_ps(load<kMasked>(o, m[w]), _mm512_set1_ps(alpha[h]), block));
    }
}

// Heads are taken kHeadsAtOnce at a time: their chains fill the registers.
constexpr int kHeadsAtOnce = 4;

// f(integral_constant<H>) for H = min(kHeadsAtOnce, heads − h0), h0 = 0, kHeadsAtOnce, ….
template <class F>
[[gnu::always_inline]] inline void by_head_groups(int heads, F&& f) {
  for (int h0 = 0; h0 < heads; h0 += kHeadsAtOnce) {
    switch (heads - h0 < kHeadsAtOnce ? heads - h0 : kHeadsAtOnce) {
      case 1: f(h0, std::integral_constant<int, 1>()); break;
      case 2: f(h0, std::integral_constant<int, 2>()); break;
      case 3: f(h0, std::integral_constant<int, 3>()); break;
      default: f(h0, std::integral_constant<int, 4>()); break;
    }
  }
}

struct Avx512 {
  static constexpr bool kFusedHeads = true;
  template <KvCacheType T>
  static void scores_heads(const float* q, int heads, const std::byte* const* k, int count, int head_dim,
                           float scale, float* s, const std::byte* const* next) {
    const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
    by_head_groups(heads, [&]<int H>(int h0, std::integral_constant<int, H>) {
      for (int g = 0; g < kGroups; ++g) {
        __m512 r[H];
        if (16 * g < count) {
          scores16_heads<T, H>(q + h0 * head_dim, k + 16 * g, head_dim, r, h0 == 0 && next ? next + 16 * g : nullptr);
          for (int h = 0; h < H; ++h)
            r[h] = _mm512_mask_blend_ps(tail_mask(count - 16 * g), neg_inf, _mm512_mul_ps(r[h], _mm512_set1_ps(scale)));
        } else {
          for (int h = 0; h < H; ++h) r[h] = neg_inf;
        }
        for (int h = 0; h < H; ++h) _mm512_store_ps(s + (h0 + h) * B + 16 * g, r[h]);
      }
    });
  }
  static float max(const float* s) {
    __m512 m = _mm512_load_ps(s);
    for (int g = 1; g < kGroups; ++g) m = _mm512_max_ps(m, _mm512_load_ps(s + 16 * g));
    return _mm512_reduce_max_ps(m);
  }
  static float sum(const float* e) {
    static_assert(kGroups == 4, "pairwise sum of four vectors");
    const __m512 a = _mm512_add_ps(_mm512_load_ps(e), _mm512_load_ps(e + 16));
    const __m512 b = _mm512_add_ps(_mm512_load_ps(e + 32), _mm512_load_ps(e + 48));
    return _mm512_reduce_add_ps(_mm512_add_ps(a, b));
  }
  static float exp(float x) { return _mm512_cvtss_f32(exp_ps_avx512(_mm512_set1_ps(x))); }
  static void exp_shifted(const float* s, float m, int count, float* e) {
    const __m512 vm = _mm512_set1_ps(m);
    for (int g = 0; g < kGroups; ++g)
      _mm512_store_ps(e + 16 * g, 16 * g < count ? exp_ps_avx512(_mm512_sub_ps(_mm512_load_ps(s + 16 * g), vm))
                                                 : _mm512_setzero_ps());
  }
  template <KvCacheType T>
  static void accumulate_heads(float* out, int heads, const float* alpha, const float* e, const std::byte* const* v,
                               int count, int head_dim, const std::byte* const* next) {
    by_head_groups(heads, [&]<int H>(int h0, std::integral_constant<int, H>) {
      constexpr int W = H == 1 ? 4 : H == 2 ? 2 : 1;  // column chunks a pass: (4 chains · W) · H accumulators
      int d = 0;
      for (; d + 16 * W <= head_dim; d += 16 * W)
        accumulate_heads_chunks<T, H, W, false>(out + h0 * head_dim, alpha + h0, e + h0 * B, v, count, d, head_dim,
                                         h0 == 0 && d == 0 ? next : nullptr);
      if (d < head_dim)
        accumulate_heads_chunks<T, H, W, true>(out + h0 * head_dim, alpha + h0, e + h0 * B, v, count, d, head_dim,
                                        h0 == 0 && d == 0 ? next : nullptr);
    });
  }
  template <KvCacheType T>
  static void widen(const std::byte* row, int head_dim, float* f) {
    for_chunks(head_dim, [&]<bool kMasked>(int d, __mmask16 m) { store<kMasked>(f + d, m, load_row<T, kMasked>(row, d, m)); });
  }
  static void divide(float* y, float a, int n) {
    const __m512 va = _mm512_set1_ps(a);
    for_chunks(n, [&]<bool kMasked>(int i, __mmask16 m) {
      store<kMasked>(y + i, m, _mm512_div_ps(load<kMasked>(y + i, m), va));
    });
  }
};

}  // namespace

extern const AttentionKernels attention_avx512 = attention_kernels_of<Avx512>();

}  // namespace pagoda::kernels::detail
