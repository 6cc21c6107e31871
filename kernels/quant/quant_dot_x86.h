#pragma once
// Internal, for quant_dot_avx2.cpp / _avx512.cpp / _avx512vnni.cpp only: the dot products of
// quant_dot.h on 256-bit vectors (8 lanes, the lane structure every ISA shares). kVnni picks
// vpdpbusd for the 4-product lane sums, else pmaddubsw + pmaddwd (the same exact integers).
// Everything is in an anonymous namespace so each ISA's copy stays in its own translation unit.

#include <immintrin.h>

#include <cstring>

#include "kernels/quant/quant_dot.h"

namespace pagoda::kernels::quant {
namespace {

inline float reduce8_ps(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // v_l + v_{l+4}
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                                // s4_0+s4_2, s4_1+s4_3
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// Lane l = Σ_{i<4} u[4l+i]·s[4l+i], u unsigned bytes, s signed.
template <bool kVnni>
inline __m256i lanes_us(__m256i u, __m256i s) {
  if constexpr (kVnni) {
#if defined(__AVX512VNNI__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#endif
  }
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// The same for two signed operands: |w| times a with w's sign.
template <bool kVnni>
inline __m256i lanes_ss(__m256i w, __m256i a) {
  return lanes_us<kVnni>(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

inline __m256 add_scaled(__m256 acc, __m256i lanes, float scale) {
  return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(scale)));
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 bytes of nibbles → 32 bytes in element order (low nibbles, then high).
inline __m256i nibbles16(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m), _mm_and_si128(raw, m));
}
// Byte j = 16 when bit j of the 32 bits at qh is set, else 0.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

template <bool kBf16>
inline __m256 load_half8(const uint8_t* h) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
  if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  return _mm256_cvtph_ps(raw);
}

template <bool kBf16>
float dot_half(const void* w, const void* act, int cols) {
  const auto* h = static_cast<const uint8_t*>(w);
  const auto* a = static_cast<const float*>(act);
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int k = 0;
  for (; k + 16 <= cols; k += 16) {
    lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(a + k), load_half8<kBf16>(h + 2 * k)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(a + k + 8), load_half8<kBf16>(h + 2 * k + 16)));
  }
  if (k < cols) {  // zero-padded tail, as the portable kernel's 0·0 steps
    alignas(32) float at[16] = {};
    alignas(32) uint16_t wt[16] = {};
    std::memcpy(at, a + k, 4 * std::size_t(cols - k));
    std::memcpy(wt, h + 2 * k, 2 * std::size_t(cols - k));
    const auto* wb = reinterpret_cast<const uint8_t*>(wt);
    lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_load_ps(at), load_half8<kBf16>(wb)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_load_ps(at + 8), load_half8<kBf16>(wb + 16)));
  }
  return reduce8_ps(_mm256_add_ps(lo, hi));
}

// Block quants in element order, as quant_dot_portable's unpack().
inline __m256i unpack(const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles16(b.qs), _mm256_set1_epi8(8)); }
inline __m256i unpack(const BlockQ4_1& b) { return nibbles16(b.qs); }
inline __m256i unpack(const BlockQ5_0& b) {
  return _mm256_sub_epi8(_mm256_or_si256(nibbles16(b.qs), fifth_bits(b.qh)), _mm256_set1_epi8(16));
}
inline __m256i unpack(const BlockQ5_1& b) { return _mm256_or_si256(nibbles16(b.qs), fifth_bits(b.qh)); }
inline __m256i unpack(const BlockQ8_0& b) { return load32(b.qs); }

template <typename Block, bool kHasMin, bool kVnni>
float dot_block32(const void* w, const void* act, int cols) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const ActBlock32*>(act);
  __m256 acc = _mm256_setzero_ps();
  float offsets = 0.0f;
  for (int b = 0; b < cols / kQK; ++b) {
    const __m256i q = unpack(x[b]);
    const __m256i a = load32(y[b].qs);
    const __m256i lanes = kHasMin ? lanes_us<kVnni>(q, a) : lanes_ss<kVnni>(q, a);
    acc = add_scaled(acc, lanes, half(x[b].d) * y[b].d);
    if constexpr (kHasMin) offsets = offsets + half(x[b].m) * y[b].d * float(y[b].sum);
  }
  return reduce8_ps(acc) + offsets;
}

template <typename Block, bool kVnni>
float dot_k45(const void* w, const void* act, int cols) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m256i low4 = _mm256_set1_epi8(15);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0.0f;
  for (int b = 0; b < cols / kQK_K; ++b) {
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) k_scale_min(s, x[b].scales, &sc[s], &m[s]);
    __m256i sumi = _mm256_setzero_si256();
    __m256i high = _mm256_setzero_si256();
    if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) high = load32(x[b].qh);
    int32_t summ = 0;
    for (int p = 0; p < 4; ++p) {  // 32 bytes of qs: sub-blocks 2p (low nibbles), 2p + 1 (high)
      const __m256i raw = load32(x[b].qs + 32 * p);
      __m256i q0 = _mm256_and_si256(raw, low4);
      __m256i q1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) {
        const __m256i one = _mm256_set1_epi8(1);
        q0 = _mm256_or_si256(q0, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * p), one), 4));
        q1 = _mm256_or_si256(q1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * p + 1), one), 4));
      }
      const __m256i l0 = lanes_us<kVnni>(q0, load32(y[b].qs + 64 * p));
      const __m256i l1 = lanes_us<kVnni>(q1, load32(y[b].qs + 64 * p + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(l0, _mm256_set1_epi32(sc[2 * p])));
      sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(l1, _mm256_set1_epi32(sc[2 * p + 1])));
    }
    for (int s = 0; s < 8; ++s) summ += int32_t(m[s]) * (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]);
    acc = add_scaled(acc, sumi, half(x[b].d) * y[b].d);
    mins = mins + half(x[b].dmin) * y[b].d * float(summ);
  }
  return reduce8_ps(acc) - mins;
}

template <bool kVnni>
float dot_q6_k(const void* w, const void* act, int cols) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
  __m256 acc = _mm256_setzero_ps();
  for (int b = 0; b < cols / kQK_K; ++b) {
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load32(x[b].ql + 64 * h), ql1 = load32(x[b].ql + 64 * h + 32);
      const __m256i qh = load32(x[b].qh + 32 * h);
      const __m256i nib[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                              _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                              _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
      for (int g = 0; g < 4; ++g) {
        const int c = 4 * h + g;
        const __m256i top = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), two), 4);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nib[g], top), bias);
        const __m256i lanes = lanes_ss<kVnni>(q, load32(y[b].qs + 32 * c));
        const int s0 = x[b].scales[2 * c], s1 = x[b].scales[2 * c + 1];
        sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(lanes, _mm256_setr_epi32(s0, s0, s0, s0, s1, s1, s1, s1)));
      }
    }
    acc = add_scaled(acc, sumi, half(x[b].d) * y[b].d);
  }
  return reduce8_ps(acc);
}

template <bool kVnni>
constexpr DotKernels make_x86_kernels() {
  return {dot_half<false>,
          dot_half<true>,
          dot_block32<BlockQ4_0, false, kVnni>,
          dot_block32<BlockQ4_1, true, kVnni>,
          dot_block32<BlockQ5_0, false, kVnni>,
          dot_block32<BlockQ5_1, true, kVnni>,
          dot_block32<BlockQ8_0, false, kVnni>,
          dot_k45<BlockQ4_K, kVnni>,
          dot_k45<BlockQ5_K, kVnni>,
          dot_q6_k<kVnni>};
}

}  // namespace
}  // namespace pagoda::kernels::quant
