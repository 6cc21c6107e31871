// Portable kernels over the interleaved layout: the reference statement of interleaved.h's
// arithmetic, which the AVX2 and AVX-512 kernels reproduce bit for bit. Each tile row is
// decoded back to its quants and scales, then dotted with each activation row.

#include <cstring>

#include "kernels/half.h"
#include "kernels/quant/interleaved.h"
#include "kernels/quant/activations.h"

namespace pagoda::kernels::quant {

namespace {

constexpr int kMaxActs = 4;

float half_at(const uint8_t* field, int r) {
  uint16_t h;
  std::memcpy(&h, field + 2 * r, 2);
  return f16_to_f32(h);
}
bool bit_at(const uint8_t* mask, int bit) { return (mask[bit / 8] >> (bit % 8)) & 1; }

// Row r's value e of a nibble load, with its fifth bit when there are masks.
int nibble(const uint8_t* load, const uint8_t* masks, bool high, int r, int e) {
  const uint8_t byte = load[4 * r + e];
  int v = high ? byte >> 4 : byte & 15;
  if (masks && bit_at(masks + (high ? 8 : 0), 4 * r + e)) v |= 16;
  return v;
}

// Row r's quants of one tile of the linear 4- to 8-bit types, in element order.
void decode_linear(QuantType type, const uint8_t* t, int r, int u[kQK_K]) {
  switch (type) {
    case QuantType::Q8_0:
      for (int k = 0; k < kQK; ++k) u[k] = int8_t(t[32 + 64 * (k / 4) + 4 * r + k % 4]);
      break;
    case QuantType::Q4_0:
    case QuantType::Q4_1:
    case QuantType::Q5_0:
    case QuantType::Q5_1: {
      const bool min = type == QuantType::Q4_1 || type == QuantType::Q5_1;
      const bool five = type == QuantType::Q5_0 || type == QuantType::Q5_1;
      const uint8_t* masks = five ? t + (min ? 64 : 32) : nullptr;
      const uint8_t* nibbles = t + (min ? 64 : 32) + (five ? 64 : 0);
      for (int k = 0; k < kQK; ++k) {
        const int i = (k / 4) % 4;
        u[k] = nibble(nibbles + 64 * i, masks ? masks + 16 * i : nullptr, k >= 16, r, k % 4);
      }
      break;
    }
    case QuantType::Q4_K:
    case QuantType::Q5_K: {
      const bool five = type == QuantType::Q5_K;
      for (int k = 0; k < kQK_K; ++k) {
        const int p = k / 64, within = k % 64, load = 8 * p + (within % 32) / 4;
        u[k] = nibble(t + (five ? 832 : 320) + 64 * load, five ? t + 320 + 16 * load : nullptr, within >= 32, r, k % 4);
      }
      break;
    }
    case QuantType::Q6_K:
      for (int k = 0; k < kQK_K; ++k) {
        const int g = k / 4, e = k % 4;
        const int top = (t[2336 + 64 * (g % 16) + 4 * r + e] >> (2 * (g / 16))) & 3;
        u[k] = nibble(t + 288 + 64 * (g % 32), nullptr, g >= 32, r, e) | top << 4;
      }
      break;
    default: break;
  }
}

// Row r's 2-bit quant of element k of a Q2_K / Q3_K tile (crumbs at `crumbs`), with Q3_K's
// third bit from `masks` when given.
int crumb(const uint8_t* crumbs, const uint8_t* masks, int r, int k) {
  const int half = k / 128, c = (k % 128) / 32, w = k % 32, load = 8 * half + w / 4, e = w % 4;
  int v = (crumbs[64 * load + 4 * r + e] >> (2 * c)) & 3;
  if (masks && bit_at(masks + 8 * (4 * load + c), 4 * r + e)) v |= 4;
  return v;
}

// Row r's quants of one tile, in element order (the IQ4 types: their table values).
void decode(QuantType type, const uint8_t* t, int r, int u[kQK_K]) {
  switch (type) {
    case QuantType::IQ4_NL:
      decode_linear(QuantType::Q4_0, t, r, u);
      for (int k = 0; k < kQK; ++k) u[k] = kIq4nlValues[u[k]];
      return;
    case QuantType::IQ4_XS:
      for (int k = 0; k < kQK_K; ++k) {
        const int s = k / 32, w = k % 32;
        u[k] = kIq4nlValues[nibble(t + 160 + 64 * (4 * s + (w % 16) / 4), nullptr, w >= 16, r, k % 4)];
      }
      return;
    case QuantType::Q2_K:
      for (int k = 0; k < kQK_K; ++k) u[k] = crumb(t + 320, nullptr, r, k);
      return;
    case QuantType::Q3_K:
      for (int k = 0; k < kQK_K; ++k) u[k] = crumb(t + 288, t + 1312, r, k);
      return;
    default: decode_linear(type, t, r, u);
  }
}

int32_t dot_ints(const int* u, const int8_t* a, int n) {
  int32_t sum = 0;
  for (int k = 0; k < n; ++k) sum += u[k] * a[k];
  return sum;
}

template <QuantType kType>
void group(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, int na, bool /*streaming*/,
           float* out) {
  constexpr bool kK45 = kType == QuantType::Q4_K || kType == QuantType::Q5_K || kType == QuantType::Q2_K;
  constexpr bool kMin = kType == QuantType::Q4_1 || kType == QuantType::Q5_1;
  constexpr int kOffset = kType == QuantType::Q4_0 ? 8 : kType == QuantType::Q5_0 ? 16 : 0;
  // Q3_K and Q6_K: 16 signed sub-block scales, quants offset by kZero; IQ4_XS: 8, table values.
  constexpr bool kSignedScales = kType == QuantType::Q3_K || kType == QuantType::Q6_K || kType == QuantType::IQ4_XS;
  constexpr int kSubs = kType == QuantType::IQ4_XS ? 8 : 16, kLen = kQK_K / kSubs;
  constexpr int kZero = kType == QuantType::Q3_K ? 4 : kType == QuantType::Q6_K ? 32 : 0;
  const std::size_t bytes = tile_bytes(kType);
  for (int r = 0; r < kGroupRows; ++r) {
    float acc[kMaxActs] = {}, extra[kMaxActs] = {};
    for (int b = 0; b < blocks; ++b) {
      const uint8_t* t = tiles + bytes * b;
      int u[kQK_K];
      decode(kType, t, r, u);
      const float d = half_at(t, r);
      for (int j = 0; j < na; ++j) {
        const uint8_t* row = act + stride * j;
        if constexpr (kType == QuantType::Q2_K) {
          const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(row)[b];
          int32_t total = 0, mins = 0;
          for (int s = 0; s < 16; ++s) {
            total += (t[64 + 16 * s + r] & 15) * dot_ints(u + 16 * s, y.qs + 16 * s, 16);
            mins += (t[64 + 16 * s + r] >> 4) * y.bsums[s];
          }
          acc[j] = acc[j] + float(total) * (d * y.d);
          extra[j] = extra[j] + float(mins) * (half_at(t + 32, r) * y.d);
        } else if constexpr (kSignedScales) {
          const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(row)[b];
          int32_t total = 0;
          for (int s = 0; s < kSubs; ++s)
            total += int8_t(t[32 + 16 * s + r]) * (dot_ints(u + kLen * s, y.qs + kLen * s, kLen) - kZero * y.bsums[s]);
          acc[j] = acc[j] + float(total) * (d * y.d);
        } else if constexpr (kK45) {
          const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(row)[b];
          int32_t total = 0, mins = 0;
          for (int s = 0; s < 8; ++s) {
            total += t[64 + 16 * s + r] * dot_ints(u + 32 * s, y.qs + 32 * s, 32);
            mins += t[192 + 16 * s + r] * (y.bsums[2 * s] + y.bsums[2 * s + 1]);
          }
          acc[j] = acc[j] + float(total) * (d * y.d);
          extra[j] = extra[j] + float(mins) * (half_at(t + 32, r) * y.d);
        } else {
          const ActBlock32& y = reinterpret_cast<const ActBlock32*>(row)[b];
          const int32_t total = dot_ints(u, y.qs, kQK) - kOffset * y.sum;
          acc[j] = acc[j] + float(total) * (d * y.d);
          if constexpr (kMin) extra[j] = extra[j] + (half_at(t + 32, r) * y.d) * float(y.sum);
        }
      }
    }
    for (int j = 0; j < na; ++j) out[kGroupRows * j + r] = kK45 ? acc[j] - extra[j] : kMin ? acc[j] + extra[j] : acc[j];
  }
}

}  // namespace

extern const GroupKernels group_portable = {
    group<QuantType::Q4_0>,
    group<QuantType::Q4_1>,
    group<QuantType::Q5_0>,
    group<QuantType::Q5_1>,
    group<QuantType::Q8_0>,
    group<QuantType::Q4_K>,
    group<QuantType::Q5_K>,
    group<QuantType::Q6_K>,
    group<QuantType::Q2_K>,
    group<QuantType::Q3_K>,
    group<QuantType::IQ4_NL>,
    group<QuantType::IQ4_XS>,
    kMaxActs,
};

}  // namespace pagoda::kernels::quant
