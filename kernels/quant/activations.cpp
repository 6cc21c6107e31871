#include "kernels/quant/activations.h"

#include <algorithm>

#include <cmath>
#include <cstring>

namespace pagoda::kernels::quant {

namespace {

// Round to nearest, ties to even (as ggml's nearest_int), for |v| < 2^22.
int nearest(float v) {
  const float shifted = v + 12582912.0f;  // 1.5 · 2^23: the integer lands in the mantissa
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// std::round (halves away from zero) for |v| < 2^23 without the libm call: truncation is exact
// there, and so is v − trunc(v).
int round_half_away(float v) {
  const int t = int(v);
  const float rest = v - float(t);
  return t + (rest >= 0.5f) - (rest <= -0.5f);
}

void quantize_q8_32(const float* x, int cols, ActBlock32* out) {
  for (int b = 0; b < cols / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::abs(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    // A block whose values all lie below about 4e-37 has a subnormal d, whose inverse overflows:
    // it divides instead. A NaN or infinite activation quantizes to 0.
    const bool divide = std::isinf(id);
    int32_t sum = 0;
    for (int j = 0; j < kQK; ++j) {
      const float v = divide ? x[j] / d : x[j] * id;
      out[b].qs[j] = int8_t(std::isfinite(v) ? round_half_away(v) : 0);
      sum += out[b].qs[j];
    }
    out[b].d = d;
    out[b].sum = sum;
  }
}

void quantize_q8_k(const float* x, int cols, BlockQ8_K* out) {
  for (int b = 0; b < cols / kQK_K; ++b, x += kQK_K) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j)
      if (std::abs(x[j]) > amax) amax = std::abs(x[j]), max = x[j];
    BlockQ8_K& y = out[b];
    if (amax == 0.0f) {
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) y.qs[j] = int8_t(std::min(127, nearest(iscale * x[j])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y.qs[16 * g + j];
      y.bsums[g] = int16_t(sum);
    }
    y.d = 1.0f / iscale;
  }
}

}  // namespace

ActFormat act_format(QuantType weight_type) {
  switch (weight_type) {
    case QuantType::F32:
    case QuantType::F16:
    case QuantType::BF16: return ActFormat::F32;
    case QuantType::Q2_K:
    case QuantType::Q3_K:
    case QuantType::Q4_K:
    case QuantType::Q5_K:
    case QuantType::Q6_K:
    case QuantType::IQ4_XS: return ActFormat::Q8_K;
    default: return ActFormat::Q8_32;
  }
}

std::size_t act_row_bytes(ActFormat format, int cols) {
  switch (format) {
    case ActFormat::F32: return 0;
    case ActFormat::Q8_32: return std::size_t(cols / kQK) * sizeof(ActBlock32);
    case ActFormat::Q8_K: return std::size_t(cols / kQK_K) * sizeof(BlockQ8_K);
  }
  return 0;
}

void quantize_act_row(ActFormat format, const float* x, int cols, void* out, Isa isa) {
  if (format == ActFormat::Q8_32 && isa == Isa::Avx512) quantize_q8_32_avx512(x, cols, static_cast<ActBlock32*>(out));
  else if (format == ActFormat::Q8_32) quantize_q8_32(x, cols, static_cast<ActBlock32*>(out));
  if (format == ActFormat::Q8_K) quantize_q8_k(x, cols, static_cast<BlockQ8_K*>(out));
}

}  // namespace pagoda::kernels::quant
