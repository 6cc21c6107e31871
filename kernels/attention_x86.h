#pragma once
// Internal, for attention_avx2.cpp / attention_avx512.cpp only: attention_impl.h's block
// primitives written once over a vector of lanes (simd_lanes.h), taking a token's query heads
// through a block together (fused heads: each key and value chunk is read and widened once for
// all of them, and a decode token prefetches the next blocks' rows as it goes). Scores: one
// lane-wise product chain per head and position, then a transpose-and-add tree turns kLanes
// such chains into kLanes dot products at once. Values: four interleaved FMA chains per vector
// of columns, so a block's weighted sum is not one long dependency.
// head_dim need not be a multiple of kLanes: its tail is handled with (slower) masked loads.
// Keys and values of the narrower cache types become floats in registers: f16 by vcvtph2ps,
// bf16 by a 16-bit shift, q8_0 by int8 → float times the block's scale.
//
// An ISA's unit instantiates FusedHeadsAttention with what its registers hold: V (the vector of
// lanes), kHeadsAtOnce (query heads taken together) and kLonePositions (key positions one pass
// of scores takes for a lone head; several heads take 4 a pass).

#include <cstdint>
#include <type_traits>

#include "kernels/attention_impl.h"
#include "kernels/exp_lanes.h"
#include "kernels/simd_lanes.h"

namespace pagoda::kernels::detail {
namespace {

// Values d..d+kLanes of a row of type T as floats (masked-off lanes 0). Q8_0 rows hold whole
// blocks of 32, a multiple of kLanes, so kLanes columns are either all in the row or all past it.
template <class V, KvCacheType T, bool kMasked>
[[gnu::always_inline]] inline typename V::F load_row(const std::byte* row, int d, typename V::Mask m) {
  if constexpr (T == KvCacheType::F32) {
    return V::template load<kMasked>(reinterpret_cast<const float*>(row) + d, m);
  } else if constexpr (T == KvCacheType::Q8_0) {
    if (kMasked && V::none(m)) return V::zero();  // columns past the row: read nothing
    const std::byte* block = row + size_t(d / kQ8_0Block) * kQ8_0BlockBytes;
    uint16_t scale;
    __builtin_memcpy(&scale, block, 2);
    return V::mul(V::from_i8(block + 2 + d % kQ8_0Block), V::set1(_cvtsh_ss(scale)));
  } else {
    const typename V::Halves h = V::template load_halves<kMasked>(row + 2 * d, m);
    if constexpr (T == KvCacheType::F16) return V::from_f16(h);
    return V::from_bf16(h);
  }
}

template <class V, int kHeadsAtOnce, int kLonePositions>
struct FusedHeadsAttention {
  using F = typename V::F;
  using Mask = typename V::Mask;
  static constexpr int L = V::kLanes;
  static constexpr int B = kAttentionBlock;
  static constexpr int kGroups = B / L;  // vectors per block of scores
  static_assert(B % L == 0);

  // Scores (unscaled) of L positions for H query heads (rows q + h·head_dim): per head and
  // position one vector chain over the columns in order, p = fma(q[d..d+L), k[d..d+L), p) from
  // zero, then a fixed transpose-and-add tree (unpack ps, unpack pd, then V::add_blocks over
  // the 128-bit blocks) turns a head's L chains into its L dot products at once. Every key
  // chunk is loaded and widened once for all H heads (four positions' chunks before their
  // FMAs), every query chunk once for the P positions of a pass.
  template <KvCacheType T, int H>
  static void scores_lanes(const float* q, const std::byte* const* k, int head_dim, F* result,
                           const std::byte* const* next) {
    constexpr int P = H == 1 ? kLonePositions : 4;
    static_assert(P % 4 == 0 && L % P == 0);
    F u[H][L / 4];
    for (int pass = 0; pass < L / P; ++pass) {
      const std::byte* const* kp = k + P * pass;
      if (next)
        for (int j = 0; j < P; ++j) prefetch_row(next[P * pass + j], kv_row_bytes(T, head_dim));
      F a[H][P];
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
        for (int j = 0; j < P; ++j) a[h][j] = V::zero();
      for_chunks<V>(head_dim, [&]<bool kMasked>(int d, Mask m) {
        F qd[H];
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h) qd[h] = V::template load<kMasked>(q + h * head_dim + d, m);
#pragma GCC unroll 2
        for (int quad = 0; quad < P / 4; ++quad) {
          F x[4];
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) x[j] = load_row<V, T, kMasked>(kp[4 * quad + j], d, m);
#pragma GCC unroll 8
          for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) a[h][4 * quad + j] = V::fmadd(qd[h], x[j], a[h][4 * quad + j]);
        }
      });
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
        for (int quad = 0; quad < P / 4; ++quad) {
          const F* aq = a[h] + 4 * quad;
          const F t0 = V::add(V::unpack_lo(aq[0], aq[1]), V::unpack_hi(aq[0], aq[1]));
          const F t1 = V::add(V::unpack_lo(aq[2], aq[3]), V::unpack_hi(aq[2], aq[3]));
          u[h][P / 4 * pass + quad] = V::add(V::unpack_lo64(t0, t1), V::unpack_hi64(t0, t1));
        }
    }
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) result[h] = V::add_blocks(u[h]);
  }

  // out_h[d..d+L·W) = out_h·alpha_h + Σ_{i<count} e_h[i]·v[i][d..d+L·W) for H heads (rows
  // out + h·head_dim, weights e + h·B), with four FMA chains per head and L columns
  // (positions i mod 4), added pairwise at the end. Each value chunk is loaded and widened once
  // for all H, each weight broadcast once for all W chunks; columns past head_dim are masked
  // off when kMasked.
  template <KvCacheType T, int H, int W, bool kMasked>
  [[gnu::always_inline]] static inline void accumulate_chunks(float* out, const float* alpha, const float* e,
                                                              const std::byte* const* v, int count, int d, int head_dim,
                                                              const std::byte* const* next) {
    Mask m[W];
    F acc[H][4][W];
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) {
      m[w] = kMasked ? V::tail_mask(head_dim - d - L * w) : V::all();
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) acc[h][c][w] = V::zero();
    }
    auto step = [&](int c, int i) {
      F vi[W];
#pragma GCC unroll 4
      for (int w = 0; w < W; ++w) vi[w] = load_row<V, T, kMasked>(v[i], d + L * w, m[w]);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        const F eh = V::set1(e[h * B + i]);
#pragma GCC unroll 4
        for (int w = 0; w < W; ++w) acc[h][c][w] = V::fmadd(eh, vi[w], acc[h][c][w]);
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
        float* o = out + h * head_dim + d + L * w;
        const F block = V::add(V::add(acc[h][0][w], acc[h][1][w]), V::add(acc[h][2][w], acc[h][3][w]));
        V::template store<kMasked>(o, m[w], V::fmadd(V::template load<kMasked>(o, m[w]), V::set1(alpha[h]), block));
      }
  }

  // f(h0, integral_constant<H>) for H = min(kHeadsAtOnce, heads − h0), h0 = 0, kHeadsAtOnce, ….
  template <int H, class Fn>
  [[gnu::always_inline]] static inline void with_heads(int left, int h0, Fn& f) {
    if constexpr (H > 1)
      if (left < H) return with_heads<H - 1>(left, h0, f);
    f(h0, std::integral_constant<int, H>());
  }
  template <class Fn>
  [[gnu::always_inline]] static inline void by_head_groups(int heads, Fn&& f) {
    for (int h0 = 0; h0 < heads; h0 += kHeadsAtOnce) with_heads<kHeadsAtOnce>(heads - h0, h0, f);
  }

  static constexpr bool kFusedHeads = true;

  template <KvCacheType T>
  static void scores_heads(const float* q, int heads, const std::byte* const* k, int count, int head_dim, float scale,
                           float* s, const std::byte* const* next) {
    const F neg_inf = V::set1(-__builtin_inff());
    by_head_groups(heads, [&]<int H>(int h0, std::integral_constant<int, H>) {
      for (int g = 0; g < kGroups; ++g) {
        F r[H];
        if (L * g < count) {
          scores_lanes<T, H>(q + h0 * head_dim, k + L * g, head_dim, r, h0 == 0 && next ? next + L * g : nullptr);
          for (int h = 0; h < H; ++h)
            r[h] = V::select(V::tail_mask(count - L * g), V::mul(r[h], V::set1(scale)), neg_inf);
        } else {
          for (int h = 0; h < H; ++h) r[h] = neg_inf;
        }
        for (int h = 0; h < H; ++h) V::store_aligned(s + (h0 + h) * B + L * g, r[h]);
      }
    });
  }
  static float max(const float* s) {
    F m = V::load_aligned(s);
    for (int g = 1; g < kGroups; ++g) m = V::max(m, V::load_aligned(s + L * g));
    return V::reduce_max(m);
  }
  // Pairwise over the block's vectors, then across the lanes.
  static float sum(const float* e) {
    F x[kGroups];
    for (int g = 0; g < kGroups; ++g) x[g] = V::load_aligned(e + L * g);
    for (int n = kGroups / 2; n >= 1; n /= 2)
      for (int g = 0; g < n; ++g) x[g] = V::add(x[2 * g], x[2 * g + 1]);
    return V::reduce_add(x[0]);
  }
  static float exp(float x) { return V::first(exp_ps<V>(V::set1(x))); }
  static void exp_shifted(const float* s, float m, int count, float* e) {
    const F vm = V::set1(m);
    for (int g = 0; g < kGroups; ++g)
      V::store_aligned(e + L * g, L * g < count ? exp_ps<V>(V::sub(V::load_aligned(s + L * g), vm)) : V::zero());
  }
  template <KvCacheType T>
  static void accumulate_heads(float* out, int heads, const float* alpha, const float* e, const std::byte* const* v,
                               int count, int head_dim, const std::byte* const* next) {
    by_head_groups(heads, [&]<int H>(int h0, std::integral_constant<int, H>) {
      // Column chunks a pass: as many as the registers hold beside the heads' chains.
      constexpr int W = kHeadsAtOnce / H;
      int d = 0;
      for (; d + L * W <= head_dim; d += L * W)
        accumulate_chunks<T, H, W, false>(out + h0 * head_dim, alpha + h0, e + h0 * B, v, count, d, head_dim,
                                          h0 == 0 && d == 0 ? next : nullptr);
      if (d < head_dim)
        accumulate_chunks<T, H, W, true>(out + h0 * head_dim, alpha + h0, e + h0 * B, v, count, d, head_dim,
                                         h0 == 0 && d == 0 ? next : nullptr);
    });
  }
  template <KvCacheType T>
  static void widen(const std::byte* row, int head_dim, float* f) {
    for_chunks<V>(head_dim, [&]<bool kMasked>(int d, Mask m) {
      V::template store<kMasked>(f + d, m, load_row<V, T, kMasked>(row, d, m));
    });
  }
  static void divide(float* y, float a, int n) {
    const F va = V::set1(a);
    for_chunks<V>(n, [&]<bool kMasked>(int i, Mask m) {
      V::template store<kMasked>(y + i, m, V::div(V::template load<kMasked>(y + i, m), va));
    });
  }
};

}  // namespace
}  // namespace pagoda::kernels::detail
