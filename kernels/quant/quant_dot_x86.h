#pragma once
// Internal, for quant_dot_avx2.cpp / _avx512.cpp / _avx512vnni.cpp only: the dot products of
// quant_dot.h on 256-bit vectors (8 lanes, the lane structure every ISA shares). kVnni picks
// vpdpbusd for the 4-product lane sums of the 32-element types, else pmaddubsw + pmaddwd
// (the same exact integers).
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

// Every kernel below computes NA activation rows (act, act + stride, …) against one weight
// row, each pair with exactly the operations of the one-row kernel (NA = 1), so that sharing
// the weight decoding between rows changes no bits.
inline const uint8_t* act_row(const void* act, std::size_t stride, int r) {
  return static_cast<const uint8_t*>(act) + stride * r;
}

template <bool kBf16, int NA>
void dot_half(const void* w, const void* act, std::size_t stride, int cols, float* out) {
  const auto* h = static_cast<const uint8_t*>(w);
  __m256 lo[NA], hi[NA];
  for (int r = 0; r < NA; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  int k = 0;
  for (; k + 16 <= cols; k += 16) {
    const __m256 w0 = load_half8<kBf16>(h + 2 * k), w1 = load_half8<kBf16>(h + 2 * k + 16);
    for (int r = 0; r < NA; ++r) {
      const float* a = reinterpret_cast<const float*>(act_row(act, stride, r)) + k;
      lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(_mm256_loadu_ps(a), w0));
      hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(_mm256_loadu_ps(a + 8), w1));
    }
  }
  if (k < cols) {  // zero-padded tail, as the portable kernel's 0·0 steps
    alignas(32) uint16_t wt[16] = {};
    std::memcpy(wt, h + 2 * k, 2 * std::size_t(cols - k));
    const auto* wb = reinterpret_cast<const uint8_t*>(wt);
    const __m256 w0 = load_half8<kBf16>(wb), w1 = load_half8<kBf16>(wb + 16);
    for (int r = 0; r < NA; ++r) {
      alignas(32) float at[16] = {};
      std::memcpy(at, reinterpret_cast<const float*>(act_row(act, stride, r)) + k, 4 * std::size_t(cols - k));
      lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(_mm256_load_ps(at), w0));
      hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(_mm256_load_ps(at + 8), w1));
    }
  }
  for (int r = 0; r < NA; ++r) out[r] = reduce8_ps(_mm256_add_ps(lo[r], hi[r]));
}

// Block quants in element order, as quant_dot_portable's unpack().
inline __m256i unpack(const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles16(b.qs), _mm256_set1_epi8(8)); }
inline __m256i unpack(const BlockQ4_1& b) { return nibbles16(b.qs); }
inline __m256i unpack(const BlockQ5_0& b) {
  return _mm256_sub_epi8(_mm256_or_si256(nibbles16(b.qs), fifth_bits(b.qh)), _mm256_set1_epi8(16));
}
inline __m256i unpack(const BlockQ5_1& b) { return _mm256_or_si256(nibbles16(b.qs), fifth_bits(b.qh)); }
inline __m256i unpack(const BlockQ8_0& b) { return load32(b.qs); }

template <typename Block, bool kHasMin, bool kVnni, int NA>
void dot_block32(const void* w, const void* act, std::size_t stride, int cols, float* out) {
  const auto* x = static_cast<const Block*>(w);
  __m256 acc[NA];
  float offsets[NA];
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps(), offsets[r] = 0.0f;
  for (int b = 0; b < cols / kQK; ++b) {
    const __m256i q = unpack(x[b]);
    const __m256i magnitude = _mm256_sign_epi8(q, q);  // |q| for the signed types
    const float dw = half(x[b].d);
    for (int r = 0; r < NA; ++r) {
      const ActBlock32& y = reinterpret_cast<const ActBlock32*>(act_row(act, stride, r))[b];
      const __m256i a = load32(y.qs);
      const __m256i lanes = kHasMin ? lanes_us<kVnni>(q, a) : lanes_us<kVnni>(magnitude, _mm256_sign_epi8(a, q));
      acc[r] = add_scaled(acc[r], lanes, dw * y.d);
      if constexpr (kHasMin) offsets[r] = offsets[r] + half(x[b].m) * y.d * float(y.sum);
    }
  }
  for (int r = 0; r < NA; ++r) out[r] = reduce8_ps(acc[r]) + offsets[r];
}

// Lane l = scale · Σ_{i<4} u[4l+i]·s[4l+i]: pmaddwd by the scale both sums the pairs and
// applies it, giving the same exact integers as the portable kernel's scale · lane.
inline __m256i scaled_lanes(__m256i u, __m256i s, __m256i scale16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
}

template <typename Block, int NA>
void dot_k45(const void* w, const void* act, std::size_t stride, int cols, float* out) {
  constexpr bool kFive = sizeof(Block) == sizeof(BlockQ5_K);
  const auto* x = static_cast<const Block*>(w);
  const __m256i low4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
  __m256 acc[NA];
  float mins[NA];
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps(), mins[r] = 0.0f;
  for (int b = 0; b < cols / kQK_K; ++b) {
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) k_scale_min(s, x[b].scales, &sc[s], &m[s]);
    __m256i q[8];
    __m256i high = _mm256_setzero_si256();
    if constexpr (kFive) high = load32(x[b].qh);
    for (int p = 0; p < 4; ++p) {  // 32 bytes of qs: sub-blocks 2p (low nibbles), 2p + 1 (high)
      const __m256i raw = load32(x[b].qs + 32 * p);
      q[2 * p] = _mm256_and_si256(raw, low4);
      q[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      if constexpr (kFive) {
        q[2 * p] = _mm256_or_si256(q[2 * p], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * p), one), 4));
        q[2 * p + 1] =
            _mm256_or_si256(q[2 * p + 1], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * p + 1), one), 4));
      }
    }
    const float d = half(x[b].d), dmin = half(x[b].dmin);
    for (int r = 0; r < NA; ++r) {
      const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(act_row(act, stride, r))[b];
      __m256i sumi = _mm256_setzero_si256();
      int32_t summ = 0;
      for (int s = 0; s < 8; ++s) {
        sumi = _mm256_add_epi32(sumi, scaled_lanes(q[s], load32(y.qs + 32 * s), _mm256_set1_epi16(sc[s])));
        summ += int32_t(m[s]) * (y.bsums[2 * s] + y.bsums[2 * s + 1]);
      }
      acc[r] = add_scaled(acc[r], sumi, d * y.d);
      mins[r] = mins[r] + dmin * y.d * float(summ);
    }
  }
  for (int r = 0; r < NA; ++r) out[r] = reduce8_ps(acc[r]) - mins[r];
}

template <int NA>
void dot_q6_k(const void* w, const void* act, std::size_t stride, int cols, float* out) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
  __m256 acc[NA];
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps();
  for (int b = 0; b < cols / kQK_K; ++b) {
    __m256i q[8], scale[8];
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load32(x[b].ql + 64 * h), ql1 = load32(x[b].ql + 64 * h + 32);
      const __m256i qh = load32(x[b].qh + 32 * h);
      const __m256i nib[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                              _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                              _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
      for (int g = 0; g < 4; ++g) {
        const int c = 4 * h + g;
        const __m256i top = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), two), 4);
        q[c] = _mm256_sub_epi8(_mm256_or_si256(nib[g], top), bias);
        const short s0 = x[b].scales[2 * c], s1 = x[b].scales[2 * c + 1];
        scale[c] = _mm256_setr_epi16(s0, s0, s0, s0, s0, s0, s0, s0, s1, s1, s1, s1, s1, s1, s1, s1);
      }
    }
    const float d = half(x[b].d);
    for (int r = 0; r < NA; ++r) {
      const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(act_row(act, stride, r))[b];
      __m256i sumi = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const __m256i a = load32(y.qs + 32 * c);
        sumi = _mm256_add_epi32(sumi, scaled_lanes(_mm256_sign_epi8(q[c], q[c]), _mm256_sign_epi8(a, q[c]), scale[c]));
      }
      acc[r] = add_scaled(acc[r], sumi, d * y.d);
    }
  }
  for (int r = 0; r < NA; ++r) out[r] = reduce8_ps(acc[r]);
}

// A kernel's one-row form as a DotFn.
template <void (*F)(const void*, const void*, std::size_t, int, float*)>
float one_row(const void* w, const void* act, int cols) {
  float out;
  F(w, act, 0, cols, &out);
  return out;
}

template <bool kVnni>
DotKernels make_x86_kernels() {
  return {{one_row<&dot_half<false, 1>>, &dot_half<false, 4>},
          {one_row<&dot_half<true, 1>>, &dot_half<true, 4>},
          {one_row<&dot_block32<BlockQ4_0, false, kVnni, 1>>, &dot_block32<BlockQ4_0, false, kVnni, 4>},
          {one_row<&dot_block32<BlockQ4_1, true, kVnni, 1>>, &dot_block32<BlockQ4_1, true, kVnni, 4>},
          {one_row<&dot_block32<BlockQ5_0, false, kVnni, 1>>, &dot_block32<BlockQ5_0, false, kVnni, 4>},
          {one_row<&dot_block32<BlockQ5_1, true, kVnni, 1>>, &dot_block32<BlockQ5_1, true, kVnni, 4>},
          {one_row<&dot_block32<BlockQ8_0, false, kVnni, 1>>, &dot_block32<BlockQ8_0, false, kVnni, 4>},
          {one_row<&dot_k45<BlockQ4_K, 1>>, &dot_k45<BlockQ4_K, 4>},
          {one_row<&dot_k45<BlockQ5_K, 1>>, &dot_k45<BlockQ5_K, 4>},
          {one_row<&dot_q6_k<1>>, &dot_q6_k<4>}};
}

}  // namespace
}  // namespace pagoda::kernels::quant
