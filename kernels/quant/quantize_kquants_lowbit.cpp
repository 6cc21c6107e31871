// ggml's reference quantizers for the 2- and 3-bit K-quant super-blocks (no importance
// matrix), 16 sub-blocks of 16 values each. Q2_K fits each sub-block an affine grid of 4
// levels (scale and min, weighted by |x|, absolute error); Q3_K a symmetric grid of 8 levels,
// refined value by value. The sub-block scales (and mins) are then quantized against one f16
// super-block scale (4 bits for Q2_K, 6 for Q3_K) and the values requantized against them.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/half.h"
#include "kernels/quant/quantize_impl.h"

namespace pagoda::kernels::quantize_detail {

namespace {

constexpr int kSub = kQK_K / 16;

// Levels −nmax … nmax − 1 for n values, stored in L offset by nmax (all 0, unoffset, for an
// all-zero group): starts from the grid that puts the largest magnitude on −nmax, then moves
// single values to the level that most raises the x²-weighted fit, up to 5 sweeps. Returns
// the least-squares scale. (ggml's make_q3_quants with do_rmse.)
float fit_q3_levels(int n, int nmax, const float* x, int8_t* L) {
  const float max = largest_magnitude(n, x);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t(0));
    return 0.0f;
  }
  const float iscale = -nmax / max;
  for (int i = 0; i < n; ++i) L[i] = int8_t(symmetric_level(iscale, x[i], nmax));
  const LevelSums first = symmetric_level_sums(n, nmax, x, iscale);
  float sumlx = first.lx, suml2 = first.l2;
  for (int sweep = 0; sweep < 5; ++sweep) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * L[i] * L[i];
      const int l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      slx += w * x[i] * l;
      sl2 += w * l * l;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = int8_t(l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
  return sumlx / suml2;
}

// Four 2-bit levels per byte: element 32c + l of each half of 128 in bits 2c, 2c + 1 of byte l.
void pack_crumbs(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
  }
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t blocks) {
  constexpr float kLevels = 15.f;  // of the 4-bit scales and mins
  for (int64_t b = 0; b < blocks; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    float scales[kSub], mins[kSub], weights[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kSub; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_affine_levels(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    y[b].d = f32_to_f16(0.f);
    y[b].dmin = f32_to_f16(0.f);
    if (max_scale > 0) {
      const float iscale = kLevels / max_scale;
      for (int j = 0; j < kSub; ++j) y[b].scales[j] = uint8_t(nearest_int(iscale * scales[j]));
      y[b].d = f32_to_f16(max_scale / kLevels);
    }
    if (max_min > 0) {
      const float iscale = kLevels / max_min;
      for (int j = 0; j < kSub; ++j) y[b].scales[j] = uint8_t(y[b].scales[j] | nearest_int(iscale * mins[j]) << 4);
      y[b].dmin = f32_to_f16(max_min / kLevels);
    }
    const float d_all = f16_to_f32(y[b].d), dmin_all = f16_to_f32(y[b].dmin);
    for (int j = 0; j < kSub; ++j) {
      const float d = d_all * float(y[b].scales[j] & 0x0f);
      if (d == 0) continue;  // keep the fit's levels, as ggml does
      const float dm = dmin_all * float(y[b].scales[j] >> 4);
      for (int i = 0; i < 16; ++i) L[16 * j + i] = uint8_t(std::clamp(nearest_int((x[16 * j + i] + dm) / d), 0, 3));
    }
    pack_crumbs(L, y[b].qs);
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[kSub];
    for (int j = 0; j < kSub; ++j) scales[j] = fit_q3_levels(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = largest_magnitude(kSub, scales);
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kSub; ++j) {
        // ggml narrows to int8_t before clamping; |iscale · scale| ≤ 32, so nothing wraps.
        const int l = std::clamp(int(int8_t(nearest_int(iscale * scales[j]))), -32, 31) + 32;
        if (j < 8) y[b].scales[j] = uint8_t(l & 0x0f);
        else y[b].scales[j - 8] = uint8_t(y[b].scales[j - 8] | (l & 0x0f) << 4);
        y[b].scales[8 + j % 4] = uint8_t(y[b].scales[8 + j % 4] | (l >> 4) << (2 * (j / 4)));
      }
      y[b].d = f32_to_f16(1 / iscale);
    } else {
      y[b].d = f32_to_f16(0.f);
    }
    const float d_all = f16_to_f32(y[b].d);
    for (int j = 0; j < kSub; ++j) {
      const float d = d_all * float(q3_k_scale(j, y[b].scales) - 32);
      if (d == 0) continue;  // keep the fit's levels, as ggml does
      for (int i = 0; i < 16; ++i) L[16 * j + i] = int8_t(std::clamp(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
    }
    // The third bit of element k goes to bit k / 32 of hmask[k % 32]; the low two as Q2_K's.
    std::memset(y[b].hmask, 0, sizeof(y[b].hmask));
    uint8_t low[kQK_K];
    for (int k = 0; k < kQK_K; ++k) {
      if (L[k] > 3) y[b].hmask[k % 32] = uint8_t(y[b].hmask[k % 32] | 1 << (k / 32));
      low[k] = uint8_t(L[k] > 3 ? L[k] - 4 : L[k]);
    }
    pack_crumbs(low, y[b].qs);
  }
}

}  // namespace pagoda::kernels::quantize_detail
