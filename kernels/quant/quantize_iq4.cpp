// ggml's quantizers for the non-linear 4-bit types IQ4_NL and IQ4_XS, as llama-quantize runs
// them without an importance matrix (weights x², 7 stretched grids tried each way). Each block
// of 32 gets the least-squares scale of its best grid; IQ4_XS then stores those scales as 6-bit
// multiples of one f16 super-block scale and requantizes against them.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/half.h"
#include "kernels/quant/quantize_impl.h"

namespace pagoda::kernels::quantize_detail {

namespace {

constexpr int kTries = 7;  // ggml's ntry in quantize_iq4_nl / quantize_iq4_xs

// The index of the level of kIq4nlValues nearest x (ties to the upper level as ggml's
// best_index_int8 resolves them).
int nearest_level(float x) {
  const int8_t* v = kIq4nlValues;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int low = 0, high = 15;
  while (high - low > 1) {
    const int mid = (low + high) / 2;
    if (x < v[mid]) high = mid;
    else low = mid;
  }
  return x - v[high - 1] < v[high] - x ? high - 1 : high;
}

// The best scale for 32 values on the non-linear grid (0 for an all-zero block): the fit of
// the grid that puts the largest magnitude on level 0, then of 2·kTries + 1 grids around it.
float fit_block(const float* x) {
  const float max = largest_magnitude(32, x);
  if (std::fabs(max) < kGroupMaxEps) return 0.0f;
  auto sums = [&](float id, float* sumqx, float* sumq2) {
    *sumqx = *sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = kIq4nlValues[nearest_level(id * x[j])];
      const float w = x[j] * x[j];
      *sumqx += w * q * x[j];
      *sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  sums(1 / (-max / kIq4nlValues[0]), &sumqx, &sumq2);
  float d = sumqx / sumq2;
  float best = d * sumqx;
  for (int t = -kTries; t <= kTries; ++t) {
    sums((float(t) + kIq4nlValues[0]) / max, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Element j of the 32 in the low nibble of qs[j], element j + 16 in the high one.
void pack_block(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(L[j] | (L[j + 16] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK) {
    const float d = fit_block(x);
    y[b].d = f32_to_f16(d);
    const float id = d != 0 ? 1 / d : 0.0f;
    uint8_t L[kQK];
    for (int j = 0; j < kQK; ++j) L[j] = uint8_t(nearest_level(id * x[j]));
    pack_block(L, y[b].qs);
  }
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t blocks) {
  constexpr int kSub = kQK_K / 32;
  for (int64_t b = 0; b < blocks; ++b, x += kQK_K) {
    float scales[kSub];
    for (int s = 0; s < kSub; ++s) scales[s] = fit_block(x + 32 * s);
    const float max_scale = largest_magnitude(kSub, scales);
    // ggml requantizes against the unrounded d, not the f16 it stores.
    const float d = -max_scale / 32;
    y[b].d = f32_to_f16(d);
    y[b].scales_h = 0;
    const float id = d != 0 ? 1 / d : 0.0f;
    for (int s = 0; s < kSub; ++s) {
      const int l = std::clamp(nearest_int(id * scales[s]), -32, 31);
      const float dl = d * float(l);
      const float idl = dl != 0 ? 1 / dl : 0.0f;
      uint8_t L[32];
      for (int j = 0; j < 32; ++j) L[j] = uint8_t(nearest_level(idl * x[32 * s + j]));
      pack_block(L, y[b].qs + 16 * s);
      const int stored = l + 32;
      if (s % 2 == 0) y[b].scales_l[s / 2] = uint8_t(stored & 15);
      else y[b].scales_l[s / 2] |= uint8_t((stored & 15) << 4);
      y[b].scales_h = uint16_t(y[b].scales_h | (stored >> 4) << (2 * s));
    }
  }
}

}  // namespace pagoda::kernels::quantize_detail
