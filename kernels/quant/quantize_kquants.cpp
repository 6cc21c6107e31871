// ggml's reference quantizers for the K-quant super-blocks (no importance matrix). Each
// sub-block first gets its own best-fit scale (and min, for Q4_K/Q5_K) by a small search;
// those are then quantized to 6 (8) bits against one f16 super-block scale, and the values
// are requantized against the scales as stored, so the stored scales and the quants agree.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/half.h"
#include "kernels/quant/quantize_impl.h"

namespace pagoda::kernels::quantize_detail {

float fit_affine_levels(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min, float rmin,
                        float rdelta, int nstep, bool absolute_error) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t(0));
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = uint8_t(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * (absolute_error ? std::fabs(diff) : diff * diff);
  }
  uint8_t trial[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * trial[i] + this_min - x[i];
      error += weights[i] * (absolute_error ? std::fabs(diff) : diff * diff);
    }
    if (error < best_error) {
      std::copy(trial, trial + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

namespace {

// Symmetric levels −nmax..nmax−1 for 16 values, weighted by x², stored in L offset by nmax:
// starts from the grid that puts the value of largest magnitude on −nmax, then tries 18
// slightly stretched or shrunk grids and keeps the least-squares scale of the best one.
// Returns the scale. (ggml's make_qx_quants with rmse_type 1 and no importance weights.)
float fit_symmetric_levels(int n, int nmax, const float* x, int8_t* L) {
  const float max = largest_magnitude(n, x);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t(0));
    return 0.0f;
  }
  float iscale = -nmax / max;
  for (int i = 0; i < n; ++i) L[i] = int8_t(symmetric_level(iscale, x[i], nmax) + nmax);
  const LevelSums first = symmetric_level_sums(n, nmax, x, iscale);
  float scale = first.l2 != 0 ? first.lx / first.l2 : 0.0f;
  float best = scale * first.lx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    const LevelSums sums = symmetric_level_sums(n, nmax, x, iscale);
    if (sums.l2 > 0 && sums.lx * sums.lx > best * sums.l2) {
      for (int i = 0; i < n; ++i) L[i] = int8_t(nmax + symmetric_level(iscale, x[i], nmax));
      scale = sums.lx / sums.l2;
      best = scale * sums.lx;
    }
  }
  return scale;
}

// The 6-bit scale and min of sub-block j, as Q4_K/Q5_K pack them (see BlockQ4_K).
void scale_min_k4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = uint8_t((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    *m = uint8_t((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Shared by Q4_K and Q5_K: fits the 8 sub-blocks of 32, stores d, dmin and the packed 6-bit
// scales, and leaves the levels (0..nmax) of all 256 values, requantized against the stored
// scales, in L.
void quantize_affine_superblock(const float* x, int nmax, float rmin, float rdelta, int nstep, uint16_t* d_out,
                                uint16_t* dmin_out, uint8_t* packed_scales, uint8_t* L) {
  constexpr int kSub = kQK_K / 32;
  float scales[kSub], mins[kSub], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kSub; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_affine_levels(32, nmax, xs, weights, L + 32 * j, &mins[j], rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kSub; ++j) {
    // ggml keeps these in uint8_t before clamping, so a negative level wraps first.
    const auto ls = std::min(uint8_t(63), uint8_t(nearest_int(inv_scale * scales[j])));
    const auto lm = std::min(uint8_t(63), uint8_t(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed_scales[j] = ls;
      packed_scales[j + 4] = lm;
    } else {
      packed_scales[j + 4] = uint8_t((ls & 0x0f) | ((lm & 0x0f) << 4));
      packed_scales[j - 4] |= uint8_t((ls >> 4) << 6);
      packed_scales[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  *d_out = f32_to_f16(max_scale / 63.f);
  *dmin_out = f32_to_f16(max_min / 63.f);
  const float d_all = f16_to_f32(*d_out), dmin_all = f16_to_f32(*dmin_out);
  for (int j = 0; j < kSub; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, packed_scales, &sc, &m);
    const float d = d_all * sc;
    if (d == 0) continue;  // keep the fit's levels, as ggml does
    const float dm = dmin_all * m;
    for (int i = 0; i < 32; ++i) L[32 * j + i] = uint8_t(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
}

}  // namespace

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    quantize_affine_superblock(x, 15, -1.0f, 0.1f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
    // Each 32 bytes hold two sub-blocks: the first in the low nibbles, the second in the high.
    for (int j = 0; j < kQK_K; j += 64) {
      for (int l = 0; l < 32; ++l) y[b].qs[j / 2 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    quantize_affine_superblock(x, 31, -0.5f, 0.1f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
    // As Q4_K, with the fifth bit of the pair p's sub-blocks in bits 2p and 2p + 1 of qh.
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int pair = 0; pair < 4; ++pair) {
      const int base = 64 * pair;
      for (int l = 0; l < 32; ++l) {
        const int lo = L[base + l], hi = L[base + l + 32];
        y[b].qs[32 * pair + l] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
        y[b].qh[l] |= uint8_t(((lo >> 4) << (2 * pair)) | ((hi >> 4) << (2 * pair + 1)));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t blocks) {
  constexpr int kSub = kQK_K / 16;
  for (int64_t b = 0; b < blocks; ++b, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[kSub];
    for (int j = 0; j < kSub; ++j) scales[j] = fit_symmetric_levels(16, 32, x + 16 * j, L + 16 * j);
    const float max_scale = largest_magnitude(kSub, scales);
    if (std::fabs(max_scale) < kGroupMaxEps) {
      std::memset(&y[b], 0, sizeof(y[b]));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[b].d = f32_to_f16(1 / iscale);
    for (int j = 0; j < kSub; ++j) y[b].scales[j] = int8_t(std::min(127, nearest_int(iscale * scales[j])));
    const float d_all = f16_to_f32(y[b].d);
    for (int j = 0; j < kSub; ++j) {
      const float d = d_all * y[b].scales[j];
      if (d == 0) continue;  // keep the fit's levels, as ggml does
      for (int i = 0; i < 16; ++i) L[16 * j + i] = int8_t(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
    }
    // Per half (128 values): ql holds the low nibbles of quarters 0/2 (bytes 0–31) and 1/3
    // (bytes 32–63); qh holds the top two bits of all four quarters, 2 bits per quarter.
    for (int half = 0; half < 2; ++half) {
      const int8_t* q = L + 128 * half;
      uint8_t* ql = y[b].ql + 64 * half;
      uint8_t* qh = y[b].qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = uint8_t((q[l] & 0x0f) | ((q[l + 64] & 0x0f) << 4));
        ql[l + 32] = uint8_t((q[l + 32] & 0x0f) | ((q[l + 96] & 0x0f) << 4));
        qh[l] = uint8_t((q[l] >> 4) | ((q[l + 32] >> 4) << 2) | ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace pagoda::kernels::quantize_detail
