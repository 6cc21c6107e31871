// ggml's reference quantizers for the 32-element block types. The symmetric types (Q4_0, Q5_0)
// scale by the value of largest magnitude *with its sign*, so that value lands exactly on the
// extreme level −8 (−16); the affine types (Q4_1, Q5_1) map [min, max] onto all levels.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/half.h"
#include "kernels/quant/quantize_impl.h"

namespace pagoda::kernels::quantize_detail {

namespace {

// Truncation toward zero of a value in [0, top], as ggml's (int8_t) casts of the already offset
// values; clamping first keeps a NaN or out-of-range input defined.
int truncate_level(float v, int top) { return int(std::fmin(std::fmax(v, 0.0f), float(top))); }

struct Range {
  float min, max;
};
Range value_range(const float* x) {
  Range r{FLT_MAX, -FLT_MAX};
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

// Q5_0 / Q5_1's levels: element j of a block goes to the low nibble of byte j, element j + 16 to
// the high nibble (as Q4_0 / Q4_1's); the fifth bit goes to bit j (j + 16) of the 32-bit qh.
void pack_5bit(const int (&q)[kQK], uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = uint8_t((q[j] & 0x0f) | ((q[j + kQK / 2] & 0x0f) << 4));
    qh |= uint32_t((q[j] >> 4) & 1) << j;
    qh |= uint32_t((q[j + kQK / 2] >> 4) & 1) << (j + kQK / 2);
  }
  std::memcpy(qh_bytes, &qh, sizeof(qh));
}

}  // namespace

template <typename Block>
void quantize_blocks32(const float* x, Block* y, int64_t blocks) {
  constexpr bool kMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
  constexpr bool kFive = std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>;
  constexpr int kTop = kFive ? 31 : 15;           // the highest level
  constexpr float kZero = (kTop + 1) / 2 + 0.5f;  // the symmetric types' level of 0, plus ½
  for (int64_t b = 0; b < blocks; ++b, x += kQK) {
    int q[kQK];
    if constexpr (kMin) {
      const Range r = value_range(x);
      const float d = (r.max - r.min) / kTop;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      y[b].d = f32_to_f16(d);
      y[b].m = f32_to_f16(r.min);
      for (int j = 0; j < kQK; ++j) q[j] = truncate_level((x[j] - r.min) * id + 0.5f, kTop);
    } else {
      const float d = largest_magnitude(kQK, x) / -((kTop + 1) / 2);
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      y[b].d = f32_to_f16(d);
      for (int j = 0; j < kQK; ++j) q[j] = truncate_level(x[j] * id + kZero, kTop);
    }
    if constexpr (kFive) {
      pack_5bit(q, y[b].qs, y[b].qh);
    } else {
      for (int j = 0; j < kQK / 2; ++j) y[b].qs[j] = uint8_t(q[j] | (q[j + kQK / 2] << 4));
    }
  }
}

template void quantize_blocks32(const float* x, BlockQ4_0* y, int64_t blocks);
template void quantize_blocks32(const float* x, BlockQ4_1* y, int64_t blocks);
template void quantize_blocks32(const float* x, BlockQ5_0* y, int64_t blocks);
template void quantize_blocks32(const float* x, BlockQ5_1* y, int64_t blocks);

namespace {

// Q8_0 and Q8_1 share their rounding: d = max|x| / 127, q = round-half-away(x / d) by way of
// the reciprocal, as ggml computes it.
float quantize_int8_block(const float* x, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) qs[j] = int8_t(std::fmin(std::fmax(std::round(x[j] * id), -128.0f), 127.0f));
  return d;
}

}  // namespace

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK) y[b].d = f32_to_f16(quantize_int8_block(x, y[b].qs));
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK) {
    const float d = quantize_int8_block(x, y[b].qs);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += y[b].qs[j];
    y[b].d = f32_to_f16(d);
    y[b].s = f32_to_f16(float(sum) * d);
  }
}

}  // namespace pagoda::kernels::quantize_detail
