#pragma once
// Scalar f16 and bf16 decoding for the kernels (which never include engine/). Both are exact,
// so they give the same floats as the F16C / AVX-512 conversion instructions.

#include <bit>
#include <cstdint>

namespace pagoda::kernels {

// IEEE half bits to float, exact for every input (subnormals, infinities and NaN included).
inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {
    const float magnitude = float(mantissa) * 0x1p-24f;  // zero or subnormal, exact
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

// bfloat16 is the upper half of a float.
inline float bfloat_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

}  // namespace pagoda::kernels
