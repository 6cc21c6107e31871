#pragma once
// Internal, for interleaved_x86.h only: the lanes interleaved.h's x86 kernels are written over,
// "16 int32 lanes" and "16 float lanes", which AVX-512 holds in one register (Lanes512, with or
// without VNNI) and AVX2 in two (Lanes256x2: rows 0–7, rows 8–15; the layout's byte order
// splits the same way). Every lane is one row; the integer block totals are exact whichever
// instructions form them:
//  - vpdpbusd (VNNI) or pmaddubsw + pmaddwd for unsigned × signed bytes. pmaddubsw saturates
//    its pair sums at ±32767, reached only for u > 128: true of Q8_0 alone, whose signed q
//    take the sign route (|q| against a with q's sign) without VNNI, and q + 128 with it
//    (128·Σa subtracted after).
// Everything is in an anonymous namespace so each ISA's copy stays in its own translation unit.

#include <cstring>

#include "kernels/simd.h"  // first: <immintrin.h> without GCC 12's false warnings
#include "kernels/quant/ggml_blocks.h"

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
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))),
                               v);
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
  static I widen_u8(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I low4_32(I v) { return _mm512_and_si512(v, _mm512_set1_epi32(15)); }
  static I high4_32(I v) { return _mm512_srli_epi32(v, 4); }
  static I widen_s8(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }

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

  static I load(const uint8_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))};
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
        _mm256_set1_epi32(int(bits)), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                                       2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
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
  static I add(I a, I b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
  static I sub(I a, I b) { return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)}; }
  static I mul(I a, I b) { return {_mm256_mullo_epi32(a.lo, b.lo), _mm256_mullo_epi32(a.hi, b.hi)}; }
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
  static F fadd(F a, F b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static F fsub(F a, F b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  static F fmul(F a, F b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static void store(float* p, F v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
};

}  // namespace
}  // namespace pagoda::kernels::quant
