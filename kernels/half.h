#pragma once
// Scalar conversions between float and the 16-bit float formats (IEEE half and bfloat16), for
// code that stores or reads one value at a time. Narrowing rounds to nearest even.

#include <bit>
#include <cstdint>

namespace pagoda::kernels {

// Half precision to float, exact for every input (subnormals, infinities, NaN included).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = float(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

// Float to half precision; overflow gives infinity.
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t magnitude = x & 0x7fffffff;
  // NaN stays a quiet NaN with its payload's upper bits, as F16C's vcvtps2ph converts it.
  if (magnitude > 0x7f800000) return sign | 0x7e00 | uint16_t((magnitude >> 13) & 0x3ff);
  if (magnitude >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds to infinity
  if (magnitude >= 0x38800000) {                      // >= 2^-14: a normal half
    // Rebias the exponent (127 -> 15), then round the 13 dropped bits to nearest even; a
    // carry out of the mantissa correctly bumps the exponent.
    const uint32_t rebiased = magnitude - ((127u - 15u) << 23);
    return sign | uint16_t((rebiased + 0xfff + ((rebiased >> 13) & 1)) >> 13);
  }
  // A subnormal half counts units of 2^-24; anything up to 2^-25 rounds to zero.
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return sign;
  const uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
  const uint32_t shift = 126 - exponent;  // mantissa * 2^(exponent - 150) in units of 2^-24
  uint32_t h = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1))) ++h;
  return sign | uint16_t(h);
}

// bfloat16 is the upper half of a float.
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // keep NaN a quiet NaN
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace pagoda::kernels
