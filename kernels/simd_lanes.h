#pragma once
// Internal, for *_avx2.cpp / *_avx512.cpp only: the float kernels' vector of lanes, one trait
// per ISA, so each kernel is written once over "kLanes floats" and compiled into each ISA's
// translation unit with that unit's flags. Avx2Lanes is 8 floats in a ymm register, Avx512Lanes
// 16 in a zmm. Each member is one fixed instruction sequence, so a kernel's bits on an ISA
// depend on nothing but the kernel and the trait (reductions in particular keep one order).
//
// Masked accesses are slower than plain ones (vmaskmovps very slow as a store on AMD), so
// loops run plain over whole vectors and masked over the tail only (for_chunks); AVX2 has no
// 16-bit masked load, so a tail of halves goes through a zeroed buffer. Everything is in an
// anonymous namespace so no copy compiled for one ISA can stand in for another translation
// unit's.

#include <cstddef>
#include <cstdint>

#include "kernels/simd.h"

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "simd_lanes.h is for the translation units compiled with AVX2, FMA and F16C (or AVX-512)"
#endif

namespace pagoda::kernels::detail {
namespace {

// Members are forced inline, as the intrinsics they stand for are, except the few called
// outside inner loops (tail masks, AVX2's reductions), which are left to the inliner.
#define PAGODA_LANES_FN [[gnu::always_inline]] static inline

struct Avx2Lanes {
  static constexpr int kLanes = 8;
  using F = __m256;        // kLanes floats
  using D = __m256d;       // kLanes / 2 doubles
  using Mask = __m256i;    // the lanes in use: all bits of each set or clear
  using Halves = __m128i;  // kLanes 16-bit values
  // Masked loads and stores cost much more than plain ones: code takes them on a tail only.
  static constexpr bool kCheapMasks = false;

  // The first `remaining` lanes (all for kLanes or more, none for 0 or less).
  static inline Mask tail_mask(int remaining) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(remaining), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  PAGODA_LANES_FN Mask all() { return _mm256_set1_epi32(-1); }
  PAGODA_LANES_FN bool none(Mask m) { return _mm256_testz_si256(m, m); }
  PAGODA_LANES_FN int count(Mask m) { return __builtin_popcount(_mm256_movemask_ps(_mm256_castsi256_ps(m))); }

  // Masked-off lanes load as 0 and are left alone by a store.
  template <bool kMasked>
  PAGODA_LANES_FN F load(const float* p, Mask m) {
    return kMasked ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
  }
  template <bool kMasked>
  PAGODA_LANES_FN void store(float* p, Mask m, F x) {
    if (kMasked) _mm256_maskstore_ps(p, m, x);
    else _mm256_storeu_ps(p, x);
  }
  PAGODA_LANES_FN F load_aligned(const float* p) { return _mm256_load_ps(p); }
  PAGODA_LANES_FN void store_aligned(float* p, F x) { _mm256_store_ps(p, x); }
  PAGODA_LANES_FN F broadcast(const float* p) { return _mm256_broadcast_ss(p); }

  PAGODA_LANES_FN F zero() { return _mm256_setzero_ps(); }
  PAGODA_LANES_FN F set1(float x) { return _mm256_set1_ps(x); }
  PAGODA_LANES_FN F add(F a, F b) { return _mm256_add_ps(a, b); }
  PAGODA_LANES_FN F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  PAGODA_LANES_FN F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  PAGODA_LANES_FN F div(F a, F b) { return _mm256_div_ps(a, b); }
  PAGODA_LANES_FN F max(F a, F b) { return _mm256_max_ps(a, b); }
  PAGODA_LANES_FN F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  // Lanes of `chosen` where m is set, else of `otherwise`.
  PAGODA_LANES_FN F select(Mask m, F chosen, F otherwise) {
    return _mm256_blendv_ps(otherwise, chosen, _mm256_castsi256_ps(m));
  }
  // x with the lanes m leaves out set to 0.
  PAGODA_LANES_FN F keep(Mask m, F x) { return _mm256_and_ps(x, _mm256_castsi256_ps(m)); }
  PAGODA_LANES_FN float first(F x) { return _mm256_cvtss_f32(x); }

  // Sums and maxima over the lanes, halves added first: ((0+4)+(2+6))+((1+5)+(3+7)).
  static inline float reduce_add(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static inline float reduce_max(F v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  // Within each 128-bit block: lanes 0 1 of a and of b interleaved (a0 b0 a1 b1), or lanes 2 3;
  // the "64" forms move pairs of lanes.
  PAGODA_LANES_FN F unpack_lo(F a, F b) { return _mm256_unpacklo_ps(a, b); }
  PAGODA_LANES_FN F unpack_hi(F a, F b) { return _mm256_unpackhi_ps(a, b); }
  PAGODA_LANES_FN F unpack_lo64(F a, F b) {
    return _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  PAGODA_LANES_FN F unpack_hi64(F a, F b) {
    return _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  // Lane 4q + i of the result: the sum over u[q]'s 128-bit blocks of their lane i.
  PAGODA_LANES_FN F add_blocks(const F u[kLanes / 4]) {
    return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20), _mm256_permute2f128_ps(u[0], u[1], 0x31));
  }

  // kLanes 16-bit values from p (masked-off lanes 0, not read).
  template <bool kMasked>
  PAGODA_LANES_FN Halves load_halves(const void* p, Mask m) {
    if (!kMasked) return _mm_loadu_si128(static_cast<const __m128i*>(p));
    alignas(16) uint16_t part[kLanes] = {};
    __builtin_memcpy(part, p, 2 * std::size_t(count(m)));
    return _mm_load_si128(reinterpret_cast<const __m128i*>(part));
  }
  // IEEE halves and bfloat16s widened to floats, both exact.
  PAGODA_LANES_FN F from_f16(Halves h) { return _mm256_cvtph_ps(h); }
  PAGODA_LANES_FN F from_bf16(Halves h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  // kLanes int8 values from p as floats.
  PAGODA_LANES_FN F from_i8(const void* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))));
  }

  PAGODA_LANES_FN D dset1(double x) { return _mm256_set1_pd(x); }
  PAGODA_LANES_FN D dmin(D a, D b) { return _mm256_min_pd(a, b); }
  PAGODA_LANES_FN D dmax(D a, D b) { return _mm256_max_pd(a, b); }
  PAGODA_LANES_FN D dmul(D a, D b) { return _mm256_mul_pd(a, b); }
  PAGODA_LANES_FN D dfmadd(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }
  PAGODA_LANES_FN D dfnmadd(D a, D b, D c) { return _mm256_fnmadd_pd(a, b, c); }
  PAGODA_LANES_FN D round_nearest(D x) { return _mm256_round_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p·2^k for an integral k with |k| <= 1022 (2^k built from its exponent bits: no vscalefpd).
  PAGODA_LANES_FN D scale2(D p, D k) {
    const __m256i k64 = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
    const __m256i two_k = _mm256_slli_epi64(_mm256_add_epi64(k64, _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(two_k));
  }
  // The low and high kLanes / 2 floats as doubles, and back (rounded once).
  PAGODA_LANES_FN D widen_lo(F x) { return _mm256_cvtps_pd(_mm256_castps256_ps128(x)); }
  PAGODA_LANES_FN D widen_hi(F x) { return _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)); }
  PAGODA_LANES_FN F narrow(D lo, D hi) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
  }
};

#if defined(__AVX512F__)
struct Avx512Lanes {
  static constexpr int kLanes = 16;
  using F = __m512;
  using D = __m512d;
  using Mask = __mmask16;
  using Halves = __m256i;
  // A masked access costs about what a plain one does, so code need not branch around them.
  static constexpr bool kCheapMasks = true;

  static inline Mask tail_mask(int remaining) {
    return remaining >= 16 ? __mmask16(0xFFFF) : remaining <= 0 ? __mmask16(0) : __mmask16((1u << remaining) - 1);
  }
  PAGODA_LANES_FN Mask all() { return __mmask16(0xFFFF); }
  PAGODA_LANES_FN bool none(Mask m) { return m == 0; }

  template <bool kMasked>
  PAGODA_LANES_FN F load(const float* p, Mask m) {
    return kMasked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
  }
  template <bool kMasked>
  PAGODA_LANES_FN void store(float* p, Mask m, F x) {
    if (kMasked) _mm512_mask_storeu_ps(p, m, x);
    else _mm512_storeu_ps(p, x);
  }
  PAGODA_LANES_FN F load_aligned(const float* p) { return _mm512_load_ps(p); }
  PAGODA_LANES_FN void store_aligned(float* p, F x) { _mm512_store_ps(p, x); }
  PAGODA_LANES_FN F broadcast(const float* p) { return _mm512_set1_ps(*p); }

  PAGODA_LANES_FN F zero() { return _mm512_setzero_ps(); }
  PAGODA_LANES_FN F set1(float x) { return _mm512_set1_ps(x); }
  PAGODA_LANES_FN F add(F a, F b) { return _mm512_add_ps(a, b); }
  PAGODA_LANES_FN F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  PAGODA_LANES_FN F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  PAGODA_LANES_FN F div(F a, F b) { return _mm512_div_ps(a, b); }
  PAGODA_LANES_FN F max(F a, F b) { return _mm512_max_ps(a, b); }
  PAGODA_LANES_FN F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  PAGODA_LANES_FN F select(Mask m, F chosen, F otherwise) { return _mm512_mask_blend_ps(m, otherwise, chosen); }
  PAGODA_LANES_FN F keep(Mask m, F x) { return _mm512_maskz_mov_ps(m, x); }
  PAGODA_LANES_FN float first(F x) { return _mm512_cvtss_f32(x); }

  // In the order of GCC's _mm512_reduce_*_ps.
  PAGODA_LANES_FN float reduce_add(F v) { return _mm512_reduce_add_ps(v); }
  PAGODA_LANES_FN float reduce_max(F v) { return _mm512_reduce_max_ps(v); }

  PAGODA_LANES_FN F unpack_lo(F a, F b) { return _mm512_unpacklo_ps(a, b); }
  PAGODA_LANES_FN F unpack_hi(F a, F b) { return _mm512_unpackhi_ps(a, b); }
  PAGODA_LANES_FN F unpack_lo64(F a, F b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  }
  PAGODA_LANES_FN F unpack_hi64(F a, F b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  }
  // Blocks 0 + 1 and 2 + 3 of each u[q] first, then their sums.
  PAGODA_LANES_FN F add_blocks(const F u[kLanes / 4]) {
    F w[2];
    for (int i = 0; i < 2; ++i)
      w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0x88),
                           _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
  }

  template <bool kMasked>
  PAGODA_LANES_FN Halves load_halves(const void* p, Mask m) {
    return kMasked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256(static_cast<const __m256i*>(p));
  }
  PAGODA_LANES_FN F from_f16(Halves h) { return _mm512_cvtph_ps(h); }
  PAGODA_LANES_FN F from_bf16(Halves h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  PAGODA_LANES_FN F from_i8(const void* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }

  PAGODA_LANES_FN D dset1(double x) { return _mm512_set1_pd(x); }
  PAGODA_LANES_FN D dmin(D a, D b) { return _mm512_min_pd(a, b); }
  PAGODA_LANES_FN D dmax(D a, D b) { return _mm512_max_pd(a, b); }
  PAGODA_LANES_FN D dmul(D a, D b) { return _mm512_mul_pd(a, b); }
  PAGODA_LANES_FN D dfmadd(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  PAGODA_LANES_FN D dfnmadd(D a, D b, D c) { return _mm512_fnmadd_pd(a, b, c); }
  PAGODA_LANES_FN D round_nearest(D x) {
    return _mm512_roundscale_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  PAGODA_LANES_FN D scale2(D p, D k) { return _mm512_scalef_pd(p, k); }
  PAGODA_LANES_FN D widen_lo(F x) { return _mm512_cvtps_pd(_mm512_castps512_ps256(x)); }
  PAGODA_LANES_FN D widen_hi(F x) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)); }
  PAGODA_LANES_FN F narrow(D lo, D hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
  }
};
#endif

#undef PAGODA_LANES_FN

// Calls f.template operator()<kMasked>(i, mask) for i = 0, kLanes, ... < n: plain over whole
// vectors, masked over the tail.
template <class V, class F>
[[gnu::always_inline]] inline void for_chunks(int n, F&& f) {
  int i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) f.template operator()<false>(i, V::all());
  if (i < n) f.template operator()<true>(i, V::tail_mask(n - i));
}

}  // namespace
}  // namespace pagoda::kernels::detail
