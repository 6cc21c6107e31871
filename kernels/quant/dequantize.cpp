#include "kernels/quant/dequantize.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/half.h"
#include "pagoda/error.h"

namespace pagoda::kernels {

namespace {

// Blocks are packed structs of bytes, so reading them through a typed pointer is only
// guaranteed at their own alignment of 1; all fields are read by value.
template <typename Block>
const Block* blocks(const void* src) {
  return static_cast<const Block*>(src);
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0f) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[i * kQK + j] = float(x0) * d;
      y[i * kQK + j + kQK / 2] = float(x1) * d;
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float m = f16_to_f32(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = x[i].qs[j] & 0x0f;
      const int x1 = x[i].qs[j] >> 4;
      y[i * kQK + j] = float(x0) * d + m;
      y[i * kQK + j + kQK / 2] = float(x1) * d + m;
    }
  }
}

// The fifth bits of Q5_0 / Q5_1: element j's is bit j of qh, element j + 16's bit j + 16.
int q5_low(uint32_t qh, uint8_t qs, int j) { return (qs & 0x0f) | int(((qh >> j) << 4) & 0x10); }
int q5_high(uint32_t qh, uint8_t qs, int j) { return (qs >> 4) | int((qh >> (j + 12)) & 0x10); }

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = float(q5_low(qh, x[i].qs[j], j) - 16) * d;
      y[i * kQK + j + kQK / 2] = float(q5_high(qh, x[i].qs[j], j) - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float m = f16_to_f32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = float(q5_low(qh, x[i].qs[j], j)) * d + m;
      y[i * kQK + j + kQK / 2] = float(q5_high(qh, x[i].qs[j], j)) * d + m;
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = float(x[i].qs[j]) * d;
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = d * float(kIq4nlValues[x[i].qs[j] & 0x0f]);
      y[i * kQK + j + kQK / 2] = d * float(kIq4nlValues[x[i].qs[j] >> 4]);
    }
  }
}

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float dmin = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int j = 0;  // sub-block
    for (int half = 0; half < kQK_K / 128; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part, ++j) {
          const uint8_t sc = x[i].scales[j];
          const float dl = d * float(sc & 0x0f), ml = dmin * float(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * float((q[16 * part + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t high = 1;
    int j = 0;
    for (int half = 0; half < kQK_K / 128; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, high = uint8_t(high << 1)) {
        for (int part = 0; part < 2; ++part, ++j) {
          const float dl = d * float(q3_k_scale(j, x[i].scales) - 32);
          for (int l = 16 * part; l < 16 * part + 16; ++l)
            *y++ = dl * float(((q[l] >> shift) & 3) - (hm[l] & high ? 0 : 4));
        }
      }
    }
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int j = 0; j < kQK_K / 32; ++j, qs += 16, y += 32) {
      const float dl = d * float(iq4_xs_scale(j, x[i].scales_h, x[i].scales_l) - 32);
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * float(kIq4nlValues[qs[l] & 0x0f]);
        y[l + 16] = dl * float(kIq4nlValues[qs[l] >> 4]);
      }
    }
  }
}

// Q4_K and Q5_K: each 32 bytes of qs carry two sub-blocks, low nibbles then high nibbles; Q5_K
// adds a fifth bit, bit 2·pair (low) or 2·pair + 1 (high) of qh[l].
template <typename Block>
void dequantize_k45(const Block* x, float* y, int64_t nb) {
  constexpr bool kFive = std::is_same_v<Block, BlockQ5_K>;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float dmin = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    auto fifth = [&](int l, int bit) {
      if constexpr (kFive) return x[i].qh[l] & (1 << bit) ? 16 : 0;
      return 0;
    };
    for (int j = 0; j < kQK_K / 64; ++j) {
      uint8_t sc, m;
      k_scale_min(2 * j, x[i].scales, &sc, &m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      k_scale_min(2 * j + 1, x[i].scales, &sc, &m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((q[l] & 0x0f) + fifth(l, 2 * j)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((q[l] >> 4) + fifth(l, 2 * j + 1)) - m2;
      q += 32;
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    // Each half of 128 values: 64 bytes of ql (low nibbles, then high) and 32 of qh (2 bits
    // for each of four 32-value groups).
    for (int half = 0; half < kQK_K / 128; ++half) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace

void dequantize_row(QuantType type, const void* src, float* dst, int64_t n) {
  const BlockShape shape = block_shape(type);
  const char* name = ggml_type_id_name(uint32_t(type));
  if (shape.elements == 0 || type == QuantType::Q8_1 || type == QuantType::Q8_K)
    throw Error(std::string("dequantize_row: cannot decode type ") + (name ? name : std::to_string(uint32_t(type))));
  if (n < 0 || n % shape.elements != 0)
    throw Error(std::string("dequantize_row: ") + std::to_string(n) + " " + name + " values are not whole blocks of " +
                std::to_string(shape.elements));
  const int64_t nb = n / shape.elements;
  switch (type) {
    case QuantType::F32:
      if (n > 0) std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case QuantType::F16:
    case QuantType::BF16: {
      const auto* h = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, h + 2 * i, 2);
        dst[i] = type == QuantType::F16 ? f16_to_f32(bits) : bf16_to_f32(bits);
      }
      return;
    }
    case QuantType::Q4_0: return dequantize_q4_0(blocks<BlockQ4_0>(src), dst, nb);
    case QuantType::Q4_1: return dequantize_q4_1(blocks<BlockQ4_1>(src), dst, nb);
    case QuantType::Q5_0: return dequantize_q5_0(blocks<BlockQ5_0>(src), dst, nb);
    case QuantType::Q5_1: return dequantize_q5_1(blocks<BlockQ5_1>(src), dst, nb);
    case QuantType::Q8_0: return dequantize_q8_0(blocks<BlockQ8_0>(src), dst, nb);
    case QuantType::IQ4_NL: return dequantize_iq4_nl(blocks<BlockIQ4_NL>(src), dst, nb);
    case QuantType::Q2_K: return dequantize_q2_k(blocks<BlockQ2_K>(src), dst, nb);
    case QuantType::Q3_K: return dequantize_q3_k(blocks<BlockQ3_K>(src), dst, nb);
    case QuantType::IQ4_XS: return dequantize_iq4_xs(blocks<BlockIQ4_XS>(src), dst, nb);
    case QuantType::Q4_K: return dequantize_k45(blocks<BlockQ4_K>(src), dst, nb);
    case QuantType::Q5_K: return dequantize_k45(blocks<BlockQ5_K>(src), dst, nb);
    case QuantType::Q6_K: return dequantize_q6_k(blocks<BlockQ6_K>(src), dst, nb);
    default: return;  // Q8_1 and Q8_K were refused above
  }
}

}  // namespace pagoda::kernels
