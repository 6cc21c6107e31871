#pragma once
// Internal, for half_dot_avx512.cpp only: half_dot.h's Rows4Fn (four F16 / BF16 weight rows
// against up to four f32 activation rows) on 512-bit vectors. Each zmm holds one row's 16
// lanes with exactly the structure of half_dot.h, so every output gets the one-row kernel's
// float operations in the same order, bit for bit, while the activation loads, the widening
// and the loop overhead are shared by the rows of a pass.

#include <algorithm>
#include <cstring>

#include "kernels/simd.h"  // first: <immintrin.h> without GCC 12's false warnings
#include "kernels/quant/half_dot_x86.h"

namespace pagoda::kernels::quant {
namespace {

// Four rows read side by side are four short streams, too short for the hardware prefetcher to
// learn: each pass fetches, while it reads a row, the bytes one group of rows (at least 4 KiB)
// further on in the matrix, which is where the next passes read. Into L2, as the quantized
// kernels do (interleaved_x86.h): prefetches into L1 hold its few miss buffers and stall the
// pass's own loads (1B F16 decode on Zen 4: 0.74-0.77 of the roofline into L1, 0.89-0.92 into L2).
inline std::size_t prefetch_distance(std::size_t row_bytes) { return std::max<std::size_t>(4 * row_bytes, 4096); }
inline void prefetch_lines(const void* p, int bytes) {
  for (int i = 0; i < bytes; i += 64) _mm_prefetch(static_cast<const char*>(p) + i, _MM_HINT_T1);
}

struct HalfPass {
  template <bool kBf16, int NA>
  static void run(const uint8_t* w, std::size_t row_bytes, const void* act, std::size_t stride, int cols, float* out) {
    constexpr int kRows = 4;
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
        const __m512 wv =
            kBf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16)) : _mm512_cvtph_ps(raw);
#pragma GCC unroll 8
        for (int j = 0; j < NA; ++j) acc[r][j] = _mm512_fmadd_ps(a[j], wv, acc[r][j]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NA; ++j)
        out[4 * j + r] =
            reduce8_ps(_mm256_add_ps(_mm512_castps512_ps256(acc[r][j]), _mm512_extractf32x8_ps(acc[r][j], 1)));
  }
};

// Rows4Fn: four weight rows a pass for every activation count.
template <bool kBf16>
void rows4(const void* w, std::size_t row_bytes, const void* act, std::size_t stride, int na, int cols, float* out) {
  const auto* rows = static_cast<const uint8_t*>(w);
  switch (na) {
    case 1: HalfPass::run<kBf16, 1>(rows, row_bytes, act, stride, cols, out); break;
    case 2: HalfPass::run<kBf16, 2>(rows, row_bytes, act, stride, cols, out); break;
    case 3: HalfPass::run<kBf16, 3>(rows, row_bytes, act, stride, cols, out); break;
    default: HalfPass::run<kBf16, 4>(rows, row_bytes, act, stride, cols, out); break;
  }
}

// The x86 kernels with the 512-bit Rows4Fn added.
inline DotKernels make_avx512_kernels() {
  DotKernels k = make_x86_kernels();
  k.f16.rows4 = &rows4<false>;
  k.bf16.rows4 = &rows4<true>;
  return k;
}

}  // namespace
}  // namespace pagoda::kernels::quant
