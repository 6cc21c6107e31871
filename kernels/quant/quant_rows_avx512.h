#pragma once
// Internal, for quant_dot_avx512.cpp / _avx512vnni.cpp only: quant_dot.h's Rows4Fn (four
// weight rows against up to four activation rows) on 512-bit vectors, for the types decode
// streams most (F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K).
//
// A zmm holds two weight rows side by side, row n in the low 256 bits and row n + 1 in the
// high, each half with exactly the 8-lane structure of quant_dot.h (F16 / BF16: one row per
// zmm, its 16 lanes). So every output gets the one-row kernel's float operations in the same
// order, bit for bit, while the activation loads and broadcasts, the scale decoding and the
// loop overhead are shared by the rows of a pass. The integer parts differ only in how the
// exact per-lane sums are formed:
//  - Q4_K / Q5_K: pmaddubsw then pmaddwd by the sub-block scale (as the AVX2 kernel); the mins
//    term's integer Σ m·bsums as a vector product.
//  - Q4_0: q kept unsigned (0…15) and 8·Σa subtracted per lane.
//  - Q6_K: q kept unsigned (0…63) and 32·Σa subtracted per 16-bit pair, which is the exact
//    Σ (q − 32)·a the one-row kernel forms with sign tricks.
//  - Q8_0: |q| against a with q's sign (AVX-512 has no vpsignb: a masked negation).

#include <algorithm>
#include <cstring>

#include "kernels/simd.h"  // first: <immintrin.h> without GCC 12's false warnings
#include "kernels/quant/quant_dot_x86.h"

namespace pagoda::kernels::quant {
namespace {

inline __m512i load_row_pair(const uint8_t* low, const uint8_t* high) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(load32(low)), load32(high), 1);
}
inline __m512i broadcast32(const void* p) { return _mm512_broadcast_i64x4(load32(p)); }

// [float(h0) × 8 | float(h1) × 8] from two f16 values.
inline __m512 halves_pair(const void* h0, const void* h1) {
  uint16_t a, b;
  std::memcpy(&a, h0, 2);
  std::memcpy(&b, h1, 2);
  return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(short(b)), _mm_set1_epi16(short(a))));
}

// quant_dot.h's reduce8 of each 256-bit half.
inline void store_halves(__m512 acc, float* low, float* high) {
  *low = reduce8_ps(_mm512_castps512_ps256(acc));
  *high = reduce8_ps(_mm512_extractf32x8_ps(acc, 1));
}

// Lane l of each half = Σ_{i<4} u[4l+i]·s[4l+i], u unsigned bytes, s signed.
template <bool kVnni>
inline __m512i lanes512(__m512i u, __m512i s) {
  if constexpr (kVnni) {
#if defined(__AVX512VNNI__)
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#endif
  }
  return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
}

// Four interleaved rows are four short streams, too short for the hardware prefetcher to
// learn: each pass fetches, while it reads a row, the bytes one group of rows (at least 4 KiB)
// further on in the matrix, which is where the next passes read.
inline std::size_t prefetch_distance(std::size_t row_bytes) { return std::max<std::size_t>(4 * row_bytes, 4096); }
inline void prefetch_lines(const void* p, int bytes) {
  for (int i = 0; i < bytes; i += 64) _mm_prefetch(static_cast<const char*>(p) + i, _MM_HINT_T0);
}

// sum + Σ of each int32 lane's two int16 products a·b (vpdpwssd where VNNI has it).
template <bool kVnni>
inline __m512i add_pair_products(__m512i sum, __m512i a, __m512i b) {
  if constexpr (kVnni) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(sum, a, b);
#endif
  }
  return _mm512_add_epi32(sum, _mm512_madd_epi16(a, b));
}

// Every pass type below computes 2·NP consecutive weight rows (w + r·row_bytes) against NA
// activation rows (act + a·stride) into out[a·4 + r].

struct HalfPass {
  static constexpr bool kFourRowsAtFourActs = true;
  template <bool kBf16, int NP, int NA>
  static void run(const uint8_t* w, std::size_t row_bytes, const void* act, std::size_t stride, int cols, float* out) {
    constexpr int kRows = 2 * NP;
    __m512 acc[kRows][NA];
    #pragma GCC unroll 8
    for (auto& r : acc)
      #pragma GCC unroll 8
      for (__m512& v : r) v = _mm512_setzero_ps();
    const std::size_t ahead = prefetch_distance(row_bytes);
    for (int k = 0; k < cols; k += 16) {
      if (k % 32 == 0)
        for (int r = 0; r < kRows; ++r) prefetch_lines(w + row_bytes * r + 2 * std::size_t(k) + ahead, 64);
      const int n = cols - k < 16 ? cols - k : 16;  // the tail pads with 0·0, as the portable kernel
      const __mmask16 mask = __mmask16((1u << n) - 1);
      __m512 a[NA];
      #pragma GCC unroll 8
      for (int j = 0; j < NA; ++j)
        a[j] = _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(act_row(act, stride, j)) + k);
      #pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const __m256i raw = _mm256_maskz_loadu_epi16(mask, w + row_bytes * r + 2 * std::size_t(k));
        const __m512 wv = kBf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16)) : _mm512_cvtph_ps(raw);
        #pragma GCC unroll 8
        for (int j = 0; j < NA; ++j) acc[r][j] = _mm512_add_ps(acc[r][j], _mm512_mul_ps(a[j], wv));
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
      #pragma GCC unroll 8
      for (int j = 0; j < NA; ++j)
        out[4 * j + r] = reduce8_ps(_mm256_add_ps(_mm512_castps512_ps256(acc[r][j]), _mm512_extractf32x8_ps(acc[r][j], 1)));
  }
};

template <bool kBf16>
struct HalfPassOf {
  static constexpr bool kFourRowsAtFourActs = true;
  template <bool kVnni, int NP, int NA>
  static void run(const uint8_t* w, std::size_t row_bytes, const void* act, std::size_t stride, int cols, float* out) {
    HalfPass::run<kBf16, NP, NA>(w, row_bytes, act, stride, cols, out);
  }
};

struct Q8_0Pass {
  static constexpr bool kFourRowsAtFourActs = true;
  template <bool kVnni, int NP, int NA>
  static void run(const uint8_t* w, std::size_t row_bytes, const void* act, std::size_t stride, int cols, float* out) {
    __m512 acc[NP][NA];
#pragma GCC unroll 8
    for (auto& p : acc)
#pragma GCC unroll 8
      for (__m512& v : p) v = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    const std::size_t ahead = prefetch_distance(row_bytes);
    for (int b = 0; b < cols / kQK; ++b) {
      if (b % 2 == 0)
#pragma GCC unroll 8
        for (int r = 0; r < 2 * NP; ++r) prefetch_lines(w + row_bytes * r + sizeof(BlockQ8_0) * b + ahead, 64);
      __m512i magnitude[NP];
      __mmask64 negative[NP];
      __m512 dw[NP];
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        const BlockQ8_0& x0 = reinterpret_cast<const BlockQ8_0*>(w + row_bytes * (2 * p))[b];
        const BlockQ8_0& x1 = reinterpret_cast<const BlockQ8_0*>(w + row_bytes * (2 * p + 1))[b];
        const __m512i q = load_row_pair(reinterpret_cast<const uint8_t*>(x0.qs), reinterpret_cast<const uint8_t*>(x1.qs));
        magnitude[p] = _mm512_abs_epi8(q);
        negative[p] = _mm512_movepi8_mask(q);
        dw[p] = halves_pair(&x0.d, &x1.d);
      }
#pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) {
        const ActBlock32& y = reinterpret_cast<const ActBlock32*>(act_row(act, stride, j))[b];
        const __m512i a = broadcast32(y.qs);
        const __m512 yd = _mm512_set1_ps(y.d);
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
          const __m512i lanes = lanes512<kVnni>(magnitude[p], _mm512_mask_sub_epi8(a, negative[p], zero, a));
          acc[p][j] = _mm512_add_ps(acc[p][j], _mm512_mul_ps(_mm512_cvtepi32_ps(lanes), _mm512_mul_ps(dw[p], yd)));
        }
      }
    }
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) store_halves(acc[p][j], &out[4 * j + 2 * p], &out[4 * j + 2 * p + 1]);
  }
};

struct Q4_0Pass {
  static constexpr bool kFourRowsAtFourActs = true;
  template <bool kVnni, int NP, int NA>
  static void run(const uint8_t* w, std::size_t row_bytes, const void* act, std::size_t stride, int cols, float* out) {
    __m512 acc[NP][NA];
#pragma GCC unroll 8
    for (auto& p : acc)
#pragma GCC unroll 8
      for (__m512& v : p) v = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);
    // 16 bytes of nibbles per row, each 128-bit lane twice: lanes 0 and 2 keep the low
    // nibbles (elements 0–15), lanes 1 and 3 the high ones (16–31).
    const __m512i twice = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);
    const __m512i shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    const std::size_t ahead = prefetch_distance(row_bytes);
    for (int b = 0; b < cols / kQK; ++b) {
      if (b % 4 == 0)
#pragma GCC unroll 8
        for (int r = 0; r < 2 * NP; ++r) prefetch_lines(w + row_bytes * r + sizeof(BlockQ4_0) * b + ahead, 64);
      __m512i q[NP];
      __m512 dw[NP];
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        const BlockQ4_0& x0 = reinterpret_cast<const BlockQ4_0*>(w + row_bytes * (2 * p))[b];
        const BlockQ4_0& x1 = reinterpret_cast<const BlockQ4_0*>(w + row_bytes * (2 * p + 1))[b];
        const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x0.qs))),
                                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(x1.qs)), 1);
        const __m512i spread = _mm512_permutexvar_epi64(twice, _mm512_zextsi256_si512(both));
        q[p] = _mm512_and_si512(_mm512_srlv_epi64(spread, shifts), low4);
        dw[p] = halves_pair(&x0.d, &x1.d);
      }
#pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) {
        const ActBlock32& y = reinterpret_cast<const ActBlock32*>(act_row(act, stride, j))[b];
        const __m512i a = broadcast32(y.qs);
        const __m512i offset = lanes512<kVnni>(eight, a);  // 8·Σa per lane: q − 8 is the signed quant
        const __m512 yd = _mm512_set1_ps(y.d);
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
          const __m512i lanes = _mm512_sub_epi32(lanes512<kVnni>(q[p], a), offset);
          acc[p][j] = _mm512_add_ps(acc[p][j], _mm512_mul_ps(_mm512_cvtepi32_ps(lanes), _mm512_mul_ps(dw[p], yd)));
        }
      }
    }
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) store_halves(acc[p][j], &out[4 * j + 2 * p], &out[4 * j + 2 * p + 1]);
  }
};

// A Q4_K / Q5_K `scales` array as 8 scale bytes and 8 min bytes (sub-block order; the layout
// in ggml_blocks.h's k_scale_min).
inline void k_scales_mins(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
  const uint32_t scales_hi = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
  const uint32_t mins_hi = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
  *scales = (u[0] & low6) | uint64_t(scales_hi) << 32;
  *mins = (u[1] & low6) | uint64_t(mins_hi) << 32;
}

// Each half's 8 int32 lanes summed, the sum in every lane of the half (exact integers).
inline __m512i sum_halves(__m512i v) {
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
  return _mm512_add_epi32(v, _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Q4_K, or Q5_K (Block = BlockQ5_K) with each element's fifth bit from qh.
template <typename Block>
struct K45Pass {
  static constexpr bool kFive = sizeof(Block) == sizeof(BlockQ5_K);
  static constexpr bool kFourRowsAtFourActs = false;  // 24 accumulators: two rows a pass
  template <bool kVnni, int NP, int NA>
  static void run(const uint8_t* w, std::size_t row_bytes, const void* act, std::size_t stride, int cols, float* out) {
    __m512 acc[NP][NA], mins[NP][NA];
    #pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
      #pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) acc[p][j] = mins[p][j] = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(15);
    // pshufb control picking sub-block s's scale byte as an int16: row n's (byte s) in the
    // low half, row n + 1's (byte 8 + s) in the high.
    const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi16(short(0x8000)), _mm256_set1_epi16(short(0x8008)), 1);
    const __m512i d_index = _mm512_inserti64x4(_mm512_set1_epi32(0), _mm256_set1_epi32(2), 1);
    const __m512i dmin_index = _mm512_inserti64x4(_mm512_set1_epi32(1), _mm256_set1_epi32(3), 1);
    const std::size_t ahead = prefetch_distance(row_bytes);
    for (int b = 0; b < cols / kQK_K; ++b) {
      for (int r = 0; r < 2 * NP; ++r) prefetch_lines(w + row_bytes * r + sizeof(Block) * b + ahead, sizeof(Block));
      const Block* x[NP][2];
      __m512i scales[NP], sub_mins[NP], high[NP];
      __m128 d_dmin[NP];  // d(row n), dmin(row n), d(row n + 1), dmin(row n + 1)
      #pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        uint64_t sc[2], m[2];
        uint32_t dd[2];
        #pragma GCC unroll 8
        for (int i = 0; i < 2; ++i) {
          x[p][i] = reinterpret_cast<const Block*>(w + row_bytes * (2 * p + i)) + b;
          k_scales_mins(x[p][i]->scales, &sc[i], &m[i]);
          std::memcpy(&dd[i], &x[p][i]->d, 4);
        }
        scales[p] = _mm512_broadcast_i32x4(_mm_set_epi64x(int64_t(sc[1]), int64_t(sc[0])));
        sub_mins[p] = _mm512_cvtepu8_epi32(_mm_set_epi64x(int64_t(m[1]), int64_t(m[0])));
        d_dmin[p] = _mm_cvtph_ps(_mm_set_epi32(0, 0, int(dd[1]), int(dd[0])));
        if constexpr (kFive) high[p] = load_row_pair(x[p][0]->qh, x[p][1]->qh);
      }
      __m512i sumi[NP][NA];
      #pragma GCC unroll 8
      for (int p = 0; p < NP; ++p)
        #pragma GCC unroll 8
        for (int j = 0; j < NA; ++j) sumi[p][j] = _mm512_setzero_si512();
      for (int pair = 0; pair < 4; ++pair) {  // 32 bytes of qs: sub-blocks 2·pair (low nibbles), 2·pair + 1
        __m512i lo[NP], hi[NP], scale_lo[NP], scale_hi[NP];
        #pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
          const __m512i raw = load_row_pair(x[p][0]->qs + 32 * pair, x[p][1]->qs + 32 * pair);
          lo[p] = _mm512_and_si512(raw, low4);
          hi[p] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
          if constexpr (kFive) {  // bit s of qh[l] is element l of sub-block s's fifth bit
            const __m512i one = _mm512_set1_epi8(1);
            lo[p] = _mm512_or_si512(lo[p], _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(high[p], 2 * pair), one), 4));
            hi[p] = _mm512_or_si512(hi[p], _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(high[p], 2 * pair + 1), one), 4));
          }
          scale_lo[p] = _mm512_shuffle_epi8(scales[p], _mm512_add_epi16(pick, _mm512_set1_epi16(short(2 * pair))));
          scale_hi[p] = _mm512_shuffle_epi8(scales[p], _mm512_add_epi16(pick, _mm512_set1_epi16(short(2 * pair + 1))));
        }
        #pragma GCC unroll 8
        for (int j = 0; j < NA; ++j) {
          const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(act_row(act, stride, j))[b];
          const __m512i a_lo = broadcast32(y.qs + 64 * pair), a_hi = broadcast32(y.qs + 64 * pair + 32);
          #pragma GCC unroll 8
          for (int p = 0; p < NP; ++p) {
            sumi[p][j] = add_pair_products<kVnni>(sumi[p][j], _mm512_maddubs_epi16(lo[p], a_lo), scale_lo[p]);
            sumi[p][j] = add_pair_products<kVnni>(sumi[p][j], _mm512_maddubs_epi16(hi[p], a_hi), scale_hi[p]);
          }
        }
      }
      #pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) {
        const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(act_row(act, stride, j))[b];
        // bsums of each sub-block (two 16-element groups), in both halves.
        const __m512i sub_sums = _mm512_broadcast_i64x4(_mm256_madd_epi16(load32(y.bsums), _mm256_set1_epi16(1)));
        const __m128 yd = _mm_set1_ps(y.d);
        #pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
          const __m512 scale = _mm512_zextps128_ps512(_mm_mul_ps(d_dmin[p], yd));
          const __m512 d = _mm512_permutexvar_ps(d_index, scale), dmin = _mm512_permutexvar_ps(dmin_index, scale);
          acc[p][j] = _mm512_add_ps(acc[p][j], _mm512_mul_ps(_mm512_cvtepi32_ps(sumi[p][j]), d));
          const __m512i summ = sum_halves(_mm512_mullo_epi32(sub_mins[p], sub_sums));
          mins[p][j] = _mm512_add_ps(mins[p][j], _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ)));
        }
      }
    }
    #pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
      #pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) {
        float r0, r1;
        store_halves(acc[p][j], &r0, &r1);
        out[4 * j + 2 * p] = r0 - _mm512_cvtss_f32(mins[p][j]);
        out[4 * j + 2 * p + 1] = r1 - _mm_cvtss_f32(_mm512_extractf32x4_ps(mins[p][j], 2));
      }
  }
};

struct Q6_KPass {
  static constexpr bool kFourRowsAtFourActs = true;
  template <bool kVnni, int NP, int NA>
  static void run(const uint8_t* w, std::size_t row_bytes, const void* act, std::size_t stride, int cols, float* out) {
    __m512 acc[NP][NA];
    #pragma GCC unroll 8
    for (auto& p : acc)
      #pragma GCC unroll 8
      for (__m512& v : p) v = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(15), low2 = _mm512_set1_epi8(3), bias = _mm512_set1_epi8(32);
    // vpermw indices of sub-block c's two 16-element scales: words 0–7 take scale 2c, 8–15
    // scale 2c + 1 (row n's, words 0–15 of the table), then the same for row n + 1 (16–31).
    const __m512i first_index = _mm512_set_epi16(17, 17, 17, 17, 17, 17, 17, 17, 16, 16, 16, 16, 16, 16, 16, 16, 1, 1, 1, 1,
                                                 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const std::size_t ahead = prefetch_distance(row_bytes);
    for (int b = 0; b < cols / kQK_K; ++b) {
      for (int r = 0; r < 2 * NP; ++r) prefetch_lines(w + row_bytes * r + sizeof(BlockQ6_K) * b + ahead, sizeof(BlockQ6_K));
      const BlockQ6_K* x[NP][2];
      __m512i scale_table[NP];
      __m512 dw[NP];
      #pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        for (int i = 0; i < 2; ++i) x[p][i] = reinterpret_cast<const BlockQ6_K*>(w + row_bytes * (2 * p + i)) + b;
        scale_table[p] = _mm512_inserti64x4(
            _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[p][0]->scales)))),
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[p][1]->scales))), 1);
        dw[p] = halves_pair(&x[p][0]->d, &x[p][1]->d);
      }
      __m512i sumi[NP][NA];
      #pragma GCC unroll 8
      for (int p = 0; p < NP; ++p)
        #pragma GCC unroll 8
        for (int j = 0; j < NA; ++j) sumi[p][j] = _mm512_setzero_si512();
      #pragma GCC unroll 8
      for (int h = 0; h < 2; ++h) {
        __m512i ql0[NP], ql1[NP], qh[NP];
        #pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
          ql0[p] = load_row_pair(x[p][0]->ql + 64 * h, x[p][1]->ql + 64 * h);
          ql1[p] = load_row_pair(x[p][0]->ql + 64 * h + 32, x[p][1]->ql + 64 * h + 32);
          qh[p] = load_row_pair(x[p][0]->qh + 32 * h, x[p][1]->qh + 32 * h);
        }
        #pragma GCC unroll 8
        for (int g = 0; g < 4; ++g) {
          const int c = 4 * h + g;
          __m512i q[NP], scale[NP];
          #pragma GCC unroll 8
          for (int p = 0; p < NP; ++p) {
            const __m512i source = g & 1 ? ql1[p] : ql0[p];
            const __m512i nibble = _mm512_and_si512(g & 2 ? _mm512_srli_epi16(source, 4) : source, low4);
            const __m512i top = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh[p], 2 * g), low2), 4);
            q[p] = _mm512_or_si512(nibble, top);
            scale[p] = _mm512_permutexvar_epi16(_mm512_add_epi16(first_index, _mm512_set1_epi16(short(2 * c))), scale_table[p]);
          }
          #pragma GCC unroll 8
          for (int j = 0; j < NA; ++j) {
            const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(act_row(act, stride, j))[b];
            const __m512i a = broadcast32(y.qs + 32 * c);
            const __m512i a32 = _mm512_maddubs_epi16(bias, a);
            #pragma GCC unroll 8
            for (int p = 0; p < NP; ++p) {
              const __m512i pairs = _mm512_sub_epi16(_mm512_maddubs_epi16(q[p], a), a32);
              sumi[p][j] = add_pair_products<kVnni>(sumi[p][j], pairs, scale[p]);
            }
          }
        }
      }
      #pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) {
        const __m512 yd = _mm512_set1_ps(reinterpret_cast<const BlockQ8_K*>(act_row(act, stride, j))[b].d);
        #pragma GCC unroll 8
        for (int p = 0; p < NP; ++p)
          acc[p][j] = _mm512_add_ps(acc[p][j], _mm512_mul_ps(_mm512_cvtepi32_ps(sumi[p][j]), _mm512_mul_ps(dw[p], yd)));
      }
    }
    #pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
      #pragma GCC unroll 8
      for (int j = 0; j < NA; ++j) store_halves(acc[p][j], &out[4 * j + 2 * p], &out[4 * j + 2 * p + 1]);
  }
};

// Rows4Fn from a pass type: one pass of four rows for one or two activation rows, and for
// three or four where the pass's accumulators fit the 32 registers (kFourRowsAtFourActs),
// else two passes of two rows.
template <typename Pass, bool kVnni>
void rows4(const void* w, std::size_t row_bytes, const void* act, std::size_t stride, int na, int cols, float* out) {
  const auto* rows = static_cast<const uint8_t*>(w);
  const uint8_t* second = rows + 2 * row_bytes;
  if constexpr (Pass::kFourRowsAtFourActs) {
    if (na == 3) return Pass::template run<kVnni, 2, 3>(rows, row_bytes, act, stride, cols, out);
    if (na == 4) return Pass::template run<kVnni, 2, 4>(rows, row_bytes, act, stride, cols, out);
  }
  switch (na) {
    case 1: Pass::template run<kVnni, 2, 1>(rows, row_bytes, act, stride, cols, out); break;
    case 2: Pass::template run<kVnni, 2, 2>(rows, row_bytes, act, stride, cols, out); break;
    case 3:
      Pass::template run<kVnni, 1, 3>(rows, row_bytes, act, stride, cols, out);
      Pass::template run<kVnni, 1, 3>(second, row_bytes, act, stride, cols, out + 2);
      break;
    default:
      Pass::template run<kVnni, 1, 4>(rows, row_bytes, act, stride, cols, out);
      Pass::template run<kVnni, 1, 4>(second, row_bytes, act, stride, cols, out + 2);
      break;
  }
}

// The x86 kernels with the 512-bit Rows4Fn added.
template <bool kVnni>
DotKernels make_avx512_kernels() {
  DotKernels k = make_x86_kernels<kVnni>();
  k.f16.rows4 = &rows4<HalfPassOf<false>, kVnni>;
  k.bf16.rows4 = &rows4<HalfPassOf<true>, kVnni>;
  k.q8_0.rows4 = &rows4<Q8_0Pass, kVnni>;
  k.q4_0.rows4 = &rows4<Q4_0Pass, kVnni>;
  k.q4_k.rows4 = &rows4<K45Pass<BlockQ4_K>, kVnni>;
  k.q5_k.rows4 = &rows4<K45Pass<BlockQ5_K>, kVnni>;
  k.q6_k.rows4 = &rows4<Q6_KPass, kVnni>;
  return k;
}

}  // namespace
}  // namespace pagoda::kernels::quant
