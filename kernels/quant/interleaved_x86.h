#pragma once
// Internal, for interleaved_x86_kernels.h only: interleaved.h's kernels (the low-bit types'
// in interleaved_x86_lowbit.h) written once over "16 int32 lanes" and "16 float lanes", which AVX-512 holds in one
// register and AVX2 in two (rows 0–7, rows 8–15: the layout's byte order splits the same way).
// Every lane is one row; the integer block totals are exact whichever instructions form them:
//  - vpdpbusd (VNNI) or pmaddubsw + pmaddwd for unsigned × signed bytes. pmaddubsw saturates
//    its pair sums at ±32767, reached only for u > 128: true of Q8_0 alone, whose signed q
//    take the sign route (|q| against a with q's sign) without VNNI, and q + 128 with it
//    (128·Σa subtracted after).
// Everything is in an anonymous namespace so each ISA's copy stays in its own translation unit.

#include <cstring>

#include "kernels/simd.h"  // first: <immintrin.h> without GCC 12's false warnings
#include "kernels/quant/interleaved.h"
#include "kernels/quant/activations.h"

namespace pagoda::kernels::quant {
namespace {

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#if defined(__AVX512F__)
template <bool kVnni>
struct Lanes512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int kMaxActs = 4;
  static constexpr int kQ8Bias = kVnni ? 128 : 0;

  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static I zero() { return _mm512_setzero_si512(); }
  static I low4(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(15)); }
  static I high4(I v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(15)); }
  // Bits shift, shift + 1 of each byte, moved to bits 4 and 5.
  static I top2(I v, int shift) {
    return _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(v, shift), _mm512_set1_epi8(3)), 4);
  }
  // Bits shift, shift + 1 of each byte.
  static I crumb(I v, int shift) { return _mm512_and_si512(_mm512_srli_epi16(v, shift), _mm512_set1_epi8(3)); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  // Byte i gains `bit` where bit i of the 64-bit mask at p is set (that bit is clear before).
  static I fifth(I v, const uint8_t* p, char bit = 16) {
    uint64_t bits;
    std::memcpy(&bits, p, 8);
    return _mm512_mask_add_epi8(v, __mmask64(bits), v, _mm512_set1_epi8(bit));
  }
  // Each byte (0 … 15) replaced by its kIq4nlValues entry.
  static I iq4nl(I v) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))), v);
  }
  static I broadcast(const int8_t* a) { return _mm512_set1_epi32(load_i32(a)); }
  // acc + Σ_{i<4} u[4l+i]·a[4l+i] per lane, u unsigned (≤ 128 without VNNI).
  static I dot(I acc, I u, I a) {
    if constexpr (kVnni) {
#if defined(__AVX512VNNI__)
      return _mm512_dpbusd_epi32(acc, u, a);
#endif
    }
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, a), _mm512_set1_epi16(1)));
  }
  // Q8_0's signed q made ready for dot_q8 (q + 128 as unsigned with VNNI).
  static I prepare_q8(I q) {
    if constexpr (kVnni) return _mm512_xor_si512(q, _mm512_set1_epi8(char(0x80)));
    return q;
  }
  // acc + Σ q·a per lane, less kQ8Bias·Σa.
  static I dot_q8(I acc, I q, I a) {
    if constexpr (kVnni) return dot(acc, q, a);
    const I signed_a = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(q), _mm512_setzero_si512(), a);
    return dot(acc, _mm512_abs_epi8(q), signed_a);
  }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I mul(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static I widen_u8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static I low4_32(I v) { return _mm512_and_si512(v, _mm512_set1_epi32(15)); }
  static I high4_32(I v) { return _mm512_srli_epi32(v, 4); }
  static I widen_s8(const uint8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

  static F fzero() { return _mm512_setzero_ps(); }
  static F to_float(I v) { return _mm512_cvtepi32_ps(v); }
  static F halves(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F fset1(float v) { return _mm512_set1_ps(v); }
  static F fadd(F a, F b) { return _mm512_add_ps(a, b); }
  static F fsub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F fmul(F a, F b) { return _mm512_mul_ps(a, b); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
};
#endif

struct Lanes256x2 {
  struct I {
    __m256i lo, hi;
  };
  struct F {
    __m256 lo, hi;
  };
  static constexpr int kMaxActs = 2;
  static constexpr int kQ8Bias = 0;

  template <typename Op>
  static I each(I a, Op op) {
    return {op(a.lo), op(a.hi)};
  }
  template <typename Op>
  static I each(I a, I b, Op op) {
    return {op(a.lo, b.lo), op(a.hi, b.hi)};
  }
  template <typename Op>
  static F feach(F a, F b, Op op) {
    return {op(a.lo, b.lo), op(a.hi, b.hi)};
  }

  static I load(const uint8_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))};
  }
  static I zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  static I low4(I v) {
    return each(v, [](__m256i x) { return _mm256_and_si256(x, _mm256_set1_epi8(15)); });
  }
  static I high4(I v) {
    return each(v, [](__m256i x) { return _mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi8(15)); });
  }
  static I top2(I v, int shift) {
    return each(v, [shift](__m256i x) {
      return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(x, shift), _mm256_set1_epi8(3)), 4);
    });
  }
  static I crumb(I v, int shift) {
    return each(v, [shift](__m256i x) { return _mm256_and_si256(_mm256_srli_epi16(x, shift), _mm256_set1_epi8(3)); });
  }
  static I or_(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_or_si256(x, y); });
  }
  static I iq4nl(I v) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    return each(v, [table](__m256i x) { return _mm256_shuffle_epi8(table, x); });
  }
  // Byte j of a half gains `bit` where bit j of its 32 mask bits is set.
  static __m256i fifth_half(__m256i v, uint32_t bits, char bit) {
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(int(bits)),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i select = _mm256_set1_epi64x(0x8040201008040201);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
    return _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(bit)));
  }
  static I fifth(I v, const uint8_t* p, char bit = 16) {
    return {fifth_half(v.lo, uint32_t(load_i32(p)), bit), fifth_half(v.hi, uint32_t(load_i32(p + 4)), bit)};
  }
  static I broadcast(const int8_t* a) {
    const __m256i v = _mm256_set1_epi32(load_i32(a));
    return {v, v};
  }
  static I dot(I acc, I u, I a) {
    const auto half = [](__m256i s, __m256i x, __m256i y) {
      return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1)));
    };
    return {half(acc.lo, u.lo, a.lo), half(acc.hi, u.hi, a.hi)};
  }
  static I prepare_q8(I q) { return q; }
  static I dot_q8(I acc, I q, I a) {
    const I magnitude = each(q, [](__m256i x) { return _mm256_abs_epi8(x); });
    return dot(acc, magnitude, each(a, q, [](__m256i x, __m256i s) { return _mm256_sign_epi8(x, s); }));
  }
  static I add(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_add_epi32(x, y); });
  }
  static I sub(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_sub_epi32(x, y); });
  }
  static I mul(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_mullo_epi32(x, y); });
  }
  static I set1(int32_t v) { return {_mm256_set1_epi32(v), _mm256_set1_epi32(v)}; }
  static __m128i load8(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
  static I widen_u8(const uint8_t* p) { return {_mm256_cvtepu8_epi32(load8(p)), _mm256_cvtepu8_epi32(load8(p + 8))}; }
  static I widen_s8(const uint8_t* p) { return {_mm256_cvtepi8_epi32(load8(p)), _mm256_cvtepi8_epi32(load8(p + 8))}; }
  static I low4_32(I v) {
    return each(v, [](__m256i x) { return _mm256_and_si256(x, _mm256_set1_epi32(15)); });
  }
  static I high4_32(I v) {
    return each(v, [](__m256i x) { return _mm256_srli_epi32(x, 4); });
  }

  static F fzero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static F to_float(I v) { return {_mm256_cvtepi32_ps(v.lo), _mm256_cvtepi32_ps(v.hi)}; }
  static F halves(const uint8_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
  }
  static F fset1(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
  static F fadd(F a, F b) {
    return feach(a, b, [](__m256 x, __m256 y) { return _mm256_add_ps(x, y); });
  }
  static F fsub(F a, F b) {
    return feach(a, b, [](__m256 x, __m256 y) { return _mm256_sub_ps(x, y); });
  }
  static F fmul(F a, F b) {
    return feach(a, b, [](__m256 x, __m256 y) { return _mm256_mul_ps(x, y); });
  }
  static void store(float* p, F v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
};

// Decode streams tiles faster than the hardware prefetcher, which stops at each 4 KiB page,
// keeps up with: on a streaming pass each block asks for the tile about kPrefetchBytes further
// on (past a group's end, the next group's, which decode's static split gives the same
// thread). A prefetch beyond the matrix never faults. Into L2, not L1: a tile's burst of
// 35–53 line requests fills L1's few miss buffers and stalls the kernel's own loads behind
// them (streaming GEMV on Zen 4: Q6_K 14 → 28 GB/s, Q4_K 24 → 44 GB/s, Q8_0 25 → 30 GB/s).
constexpr std::size_t kPrefetchBytes = 4096;
template <std::size_t kTile>
inline const uint8_t* tile_ahead(const uint8_t* tile) {
  return tile + (kPrefetchBytes + kTile - 1) / kTile * kTile;
}
template <std::size_t kTile>
inline void prefetch_ahead(const uint8_t* tile) {
  const uint8_t* ahead = tile_ahead<kTile>(tile);
  for (std::size_t offset = 0; offset < kTile; offset += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + offset), _MM_HINT_T1);
}
// Part `part` of `parts` of that prefetch, for a kernel that spreads it over its steps. Measured
// on Llama-3.2-1B's matrices (bench_decode_profile): Q6_K's tile, the largest, streams ~10%
// faster spread over its 16 steps; Q4_K's streamed ~10% slower spread, so it keeps the burst.
template <std::size_t kTile>
inline void prefetch_ahead_part(const uint8_t* tile, int part, int parts) {
  const uint8_t* ahead = tile_ahead<kTile>(tile);
  constexpr std::size_t kLines = (kTile + 63) / 64;
  for (std::size_t l = kLines * part / parts; l < kLines * (part + 1) / parts; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T1);
}

template <typename L, int NA>
struct Acts {
  const uint8_t* rows[NA];
  Acts(const uint8_t* act, std::size_t stride) {
    for (int j = 0; j < NA; ++j) rows[j] = act + stride * j;
  }
  const ActBlock32& b32(int j, int b) const { return reinterpret_cast<const ActBlock32*>(rows[j])[b]; }
  const BlockQ8_K& bk(int j, int b) const { return reinterpret_cast<const BlockQ8_K*>(rows[j])[b]; }
};

// acc + float(total) · (d · d_a).
template <typename L>
inline typename L::F add_block(typename L::F acc, typename L::I total, typename L::F d, float da) {
  return L::fadd(acc, L::fmul(L::to_float(total), L::fmul(d, L::fset1(da))));
}

// The pass every kernel makes over a group's tiles: NA float accumulators, and NA more for the
// types with a second series (Q4_1 / Q5_1's offsets, the K-quants' mins; compiled away where
// unused), all zero to start; for each block b its tile t, prefetched ahead on a streaming pass
// (kPrefetch: unless the kernel spreads the prefetch over its steps itself), and
// block(t, b, acc, more); then out[16·j + r] = result(acc[j], more[j]).
template <typename L, int NA, std::size_t kTile, bool kPrefetch, typename Block, typename Result>
[[gnu::always_inline]] inline void over_tiles(const uint8_t* tiles, int blocks, bool streaming, float* out,
                                              Block&& block, Result&& result) {
  typename L::F acc[NA], more[NA];
  for (int j = 0; j < NA; ++j) acc[j] = more[j] = L::fzero();
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* t = tiles + kTile * std::size_t(b);
    if (kPrefetch && streaming) prefetch_ahead<kTile>(t);
    block(t, b, acc, more);
  }
  for (int j = 0; j < NA; ++j) L::store(out + kGroupRows * j, result(acc[j], more[j]));
}

// The result of the types with one series.
template <typename L>
inline typename L::F acc_only(typename L::F acc, typename L::F) {
  return acc;
}

template <typename L, int NA>
void q8_0(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, 544, true>(tiles, blocks, streaming, out, [&](const uint8_t* t, int b, F* acc, F*) {
    I sum[NA];
    for (I& s : sum) s = L::zero();
    #pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const I q = L::prepare_q8(L::load(t + 32 + 64 * g));
      #pragma GCC unroll 4
      for (int j = 0; j < NA; ++j) sum[j] = L::dot_q8(sum[j], q, L::broadcast(y.b32(j, b).qs + 4 * g));
    }
    const F d = L::halves(t);
    #pragma GCC unroll 4
    for (int j = 0; j < NA; ++j) {
      const ActBlock32& a = y.b32(j, b);
      const I total = L::kQ8Bias ? L::sub(sum[j], L::set1(L::kQ8Bias * a.sum)) : sum[j];
      acc[j] = add_block<L>(acc[j], total, d, a.d);
    }
  }, acc_only<L>);
}

// Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (Q4_0's tile; its nibbles index kIq4nlValues, signed, so
// they take Q8_0's route: dot_q8, less kQ8Bias·Σa).
template <typename L, int NA, QuantType kType>
void block32(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  constexpr bool kMin = kType == QuantType::Q4_1 || kType == QuantType::Q5_1;
  constexpr bool kFive = kType == QuantType::Q5_0 || kType == QuantType::Q5_1;
  constexpr bool kTable = kType == QuantType::IQ4_NL;
  constexpr int kOffset = kTable ? L::kQ8Bias : kMin ? 0 : kFive ? 16 : 8;
  constexpr std::size_t kMasks = kMin ? 64 : 32, kNibbles = kMasks + (kFive ? 64 : 0);
  constexpr std::size_t kTile = kNibbles + 256;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, kTile, true>(tiles, blocks, streaming, out, [&](const uint8_t* t, int b, F* acc, F* off) {
    I sum[NA];
    for (I& s : sum) s = L::zero();
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const I v = L::load(t + kNibbles + 64 * i);
      I lo = L::low4(v), hi = L::high4(v);
      if constexpr (kFive) {
        lo = L::fifth(lo, t + kMasks + 16 * i);
        hi = L::fifth(hi, t + kMasks + 16 * i + 8);
      }
      if constexpr (kTable) {
        lo = L::prepare_q8(L::iq4nl(lo));
        hi = L::prepare_q8(L::iq4nl(hi));
      }
      #pragma GCC unroll 4
      for (int j = 0; j < NA; ++j) {
        if constexpr (kTable) {
          sum[j] = L::dot_q8(sum[j], lo, L::broadcast(y.b32(j, b).qs + 4 * i));
          sum[j] = L::dot_q8(sum[j], hi, L::broadcast(y.b32(j, b).qs + 16 + 4 * i));
        } else {
          sum[j] = L::dot(sum[j], lo, L::broadcast(y.b32(j, b).qs + 4 * i));
          sum[j] = L::dot(sum[j], hi, L::broadcast(y.b32(j, b).qs + 16 + 4 * i));
        }
      }
    }
    const F d = L::halves(t);
    #pragma GCC unroll 4
    for (int j = 0; j < NA; ++j) {
      const ActBlock32& a = y.b32(j, b);
      const I total = kOffset ? L::sub(sum[j], L::set1(kOffset * a.sum)) : sum[j];
      acc[j] = add_block<L>(acc[j], total, d, a.d);
      if constexpr (kMin) off[j] = L::fadd(off[j], L::fmul(L::fmul(L::halves(t + 32), L::fset1(a.d)), L::fset1(float(a.sum))));
    }
  }, [](F acc, F off) { return kMin ? L::fadd(acc, off) : acc; });
}

// Q4_K, Q5_K.
template <typename L, int NA, bool kFive>
void k45(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  constexpr std::size_t kNibbles = kFive ? 832 : 320, kTile = kFive ? 2880 : 2368;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, kTile, true>(tiles, blocks, streaming, out, [&](const uint8_t* t, int b, F* acc, F* mins) {
    I total[NA];
    for (I& s : total) s = L::zero();
    for (int p = 0; p < 4; ++p) {
      I lo_sum[NA], hi_sum[NA];
      for (int j = 0; j < NA; ++j) lo_sum[j] = hi_sum[j] = L::zero();
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const int load = 8 * p + i;
        const I v = L::load(t + kNibbles + 64 * load);
        I lo = L::low4(v), hi = L::high4(v);
        if constexpr (kFive) {
          lo = L::fifth(lo, t + 320 + 16 * load);
          hi = L::fifth(hi, t + 320 + 16 * load + 8);
        }
        #pragma GCC unroll 4
        for (int j = 0; j < NA; ++j) {
          const int8_t* a = y.bk(j, b).qs + 64 * p + 4 * i;
          lo_sum[j] = L::dot(lo_sum[j], lo, L::broadcast(a));
          hi_sum[j] = L::dot(hi_sum[j], hi, L::broadcast(a + 32));
        }
      }
      const I sc_lo = L::widen_u8(t + 64 + 16 * (2 * p)), sc_hi = L::widen_u8(t + 64 + 16 * (2 * p + 1));
      #pragma GCC unroll 4
      for (int j = 0; j < NA; ++j) total[j] = L::add(total[j], L::add(L::mul(lo_sum[j], sc_lo), L::mul(hi_sum[j], sc_hi)));
    }
    const F d = L::halves(t), dmin = L::halves(t + 32);
    #pragma GCC unroll 4
    for (int j = 0; j < NA; ++j) {
      const BlockQ8_K& a = y.bk(j, b);
      I m = L::zero();
      for (int s = 0; s < 8; ++s) m = L::add(m, L::mul(L::widen_u8(t + 192 + 16 * s), L::set1(a.bsums[2 * s] + a.bsums[2 * s + 1])));
      acc[j] = add_block<L>(acc[j], total[j], d, a.d);
      mins[j] = add_block<L>(mins[j], m, dmin, a.d);
    }
  }, [](F acc, F mins) { return L::fsub(acc, mins); });
}

// Q6_K spreads its prefetch over its 16 steps.
template <typename L, int NA>
void q6_k(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, 3360, false>(tiles, blocks, streaming, out, [&](const uint8_t* t, int b, F* acc, F*) {
    I total[NA];
    for (I& s : total) s = L::zero();
    for (int s0 = 0; s0 < 4; ++s0) {  // sub-blocks s0 + 4c: k-groups t + 16c for t in 4·s0 … 4·s0 + 3
      I sum[4][NA];
      for (auto& c : sum)
        for (I& s : c) s = L::zero();
      #pragma GCC unroll 4
      for (int tl = 4 * s0; tl < 4 * s0 + 4; ++tl) {
        if (streaming) prefetch_ahead_part<3360>(t, tl, 16);
        const I top = L::load(t + 2336 + 64 * tl);
        const I n0 = L::load(t + 288 + 64 * tl), n1 = L::load(t + 288 + 64 * (tl + 16));
        const I q[4] = {L::or_(L::low4(n0), L::top2(top, 0)), L::or_(L::low4(n1), L::top2(top, 2)),
                        L::or_(L::high4(n0), L::top2(top, 4)), L::or_(L::high4(n1), L::top2(top, 6))};
        #pragma GCC unroll 4
        for (int j = 0; j < NA; ++j) {
          const int8_t* a = y.bk(j, b).qs;
          #pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) sum[c][j] = L::dot(sum[c][j], q[c], L::broadcast(a + 4 * (tl + 16 * c)));
        }
      }
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const int s = s0 + 4 * c;
        const I sc = L::widen_s8(t + 32 + 16 * s);
        #pragma GCC unroll 4
        for (int j = 0; j < NA; ++j)
          total[j] = L::add(total[j], L::mul(L::sub(sum[c][j], L::set1(32 * y.bk(j, b).bsums[s])), sc));
      }
    }
    const F d = L::halves(t);
    #pragma GCC unroll 4
    for (int j = 0; j < NA; ++j) acc[j] = add_block<L>(acc[j], total[j], d, y.bk(j, b).d);
  }, acc_only<L>);
}

}  // namespace
}  // namespace pagoda::kernels::quant
