#pragma once
// The per-type quantizers behind quantize_row (kernels/quant/quantize.h). Each encodes whole
// blocks; the arithmetic follows ggml's reference quantizers operation by operation (same
// order, same float rounding), because a different but "equivalent" order rounds some values
// differently and then the bytes no longer match llama-quantize's.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels::quantize_detail {

// Rounds to the nearest integer, ties to even, for |v| < 2^22 (ggml's nearest_int): adding
// 1.5 · 2^23 leaves the rounded value in the low mantissa bits. Any other input gives some
// integer, never undefined behaviour; callers clamp the result.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  return int(std::bit_cast<uint32_t>(shifted) & 0x7fffff) - 0x400000;
}

inline constexpr float kGroupMaxEps = 1e-15f;  // below this a group counts as all zeros (ggml's GROUP_MAX_EPS)

// The value of largest magnitude among x[0..n): the first of equal magnitudes, 0 when none is
// above 0. A magnitude below kGroupMaxEps makes the group all zeros.
inline float largest_magnitude(int n, const float* x) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// x's level on the symmetric grid of step 1 / iscale: round(iscale·x) within −nmax … nmax − 1.
inline int symmetric_level(float iscale, float x, int nmax) {
  return std::clamp(nearest_int(iscale * x), -nmax, nmax - 1);
}

// The x²-weighted least-squares sums of x[0..n) on that grid: Σ w·x·l and Σ w·l² (w = x²).
struct LevelSums {
  float lx, l2;
};
inline LevelSums symmetric_level_sums(int n, int nmax, const float* x, float iscale) {
  LevelSums sums{0, 0};
  for (int i = 0; i < n; ++i) {
    const int l = symmetric_level(iscale, x[i], nmax);
    const float w = x[i] * x[i];
    sums.lx += w * x[i] * l;
    sums.l2 += w * l * l;
  }
  return sums;
}

// Affine levels 0..nmax for n ≤ 32 values: finds scale and min (min ≤ 0) minimising the
// weighted error (squared, or absolute when absolute_error), trying the plain max−min fit, then
// nstep + 1 stretched grids (nmax + rmin + rdelta·is levels across the range) with a
// least-squares refit of each. Returns the scale; *neg_min receives −min. (ggml's
// make_qkx2_quants; use_mad is absolute_error.) In quantize_kquants.cpp.
float fit_affine_levels(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min, float rmin,
                        float rdelta, int nstep, bool absolute_error);

// Blocks of 32 (quantize_blocks32.cpp): Block is BlockQ4_0, BlockQ4_1, BlockQ5_0 or BlockQ5_1.
template <typename Block>
void quantize_blocks32(const float* x, Block* y, int64_t blocks);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t blocks);
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t blocks);

// The non-linear 4-bit types (quantize_iq4.cpp).
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t blocks);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t blocks);

// The 2- and 3-bit super-blocks (quantize_kquants_lowbit.cpp).
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t blocks);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t blocks);

// Super-blocks of 256 (quantize_kquants.cpp).
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t blocks);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t blocks);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t blocks);

}  // namespace pagoda::kernels::quantize_detail
