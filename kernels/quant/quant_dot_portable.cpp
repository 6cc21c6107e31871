// Portable dot products: the reference statement of the lane arithmetic in quant_dot.h, which
// the AVX2 and AVX-512 kernels reproduce bit for bit.

#include <cstring>

#include "kernels/half.h"
#include "kernels/quant/quant_dot.h"

namespace pagoda::kernels::quant {

namespace {

template <bool kBf16>
float dot_half(const void* w, const void* act, int cols) {
  const auto* h = static_cast<const uint8_t*>(w);
  const auto* a = static_cast<const float*>(act);
  float acc[16] = {};
  const int padded = (cols + 15) / 16 * 16;
  for (int k = 0; k < padded; ++k) {
    float wk = 0.0f, ak = 0.0f;
    if (k < cols) {
      uint16_t bits;
      std::memcpy(&bits, h + 2 * k, 2);
      wk = kBf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      ak = a[k];
    }
    acc[k % 16] = acc[k % 16] + ak * wk;
  }
  float half[8];
  for (int l = 0; l < 8; ++l) half[l] = acc[l] + acc[l + 8];
  return reduce8(half);
}

// The 8 lane sums of one 32-element block: lane l = Σ w[4l + i]·a[4l + i].
void lanes32(const int w[32], const int8_t* a, int32_t out[8]) {
  for (int l = 0; l < 8; ++l) out[l] = w[4 * l] * a[4 * l] + w[4 * l + 1] * a[4 * l + 1] + w[4 * l + 2] * a[4 * l + 2] + w[4 * l + 3] * a[4 * l + 3];
}

void add_scaled(float acc[8], const int32_t lanes[8], float scale) {
  for (int l = 0; l < 8; ++l) acc[l] = acc[l] + float(lanes[l]) * scale;
}

// Quants of a 32-element block in element order: signed for Q4_0 / Q5_0 / Q8_0 (the offset
// removed), unsigned for Q4_1 / Q5_1 (the offset is the block's min m).
void unpack(const BlockQ4_0& b, int q[32]) {
  for (int j = 0; j < 16; ++j) q[j] = (b.qs[j] & 15) - 8, q[j + 16] = (b.qs[j] >> 4) - 8;
}
void unpack(const BlockQ4_1& b, int q[32]) {
  for (int j = 0; j < 16; ++j) q[j] = b.qs[j] & 15, q[j + 16] = b.qs[j] >> 4;
}
template <typename Block>
void unpack5(const Block& b, int q[32]) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = (b.qs[j] & 15) | int(((qh >> j) & 1) << 4);
    q[j + 16] = (b.qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
  }
}
void unpack(const BlockQ5_0& b, int q[32]) {
  unpack5(b, q);
  for (int j = 0; j < 32; ++j) q[j] -= 16;
}
void unpack(const BlockQ5_1& b, int q[32]) { unpack5(b, q); }
void unpack(const BlockQ8_0& b, int q[32]) {
  for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
}

template <typename Block, bool kHasMin>
float dot_block32(const void* w, const void* act, int cols) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const ActBlock32*>(act);
  float acc[8] = {}, offsets = 0.0f;
  for (int b = 0; b < cols / kQK; ++b) {
    int q[32];
    int32_t lanes[8];
    unpack(x[b], q);
    lanes32(q, y[b].qs, lanes);
    add_scaled(acc, lanes, f16_to_f32(x[b].d) * y[b].d);
    if constexpr (kHasMin) offsets = offsets + f16_to_f32(x[b].m) * y[b].d * float(y[b].sum);
  }
  return reduce8(acc) + offsets;
}

// Q4_K / Q5_K: the 8 sub-blocks' lanes weighted by their integer scales, the mins against the
// activation's 32-element sums.
template <typename Block>
float dot_k45(const void* w, const void* act, int cols) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  float acc[8] = {}, mins = 0.0f;
  for (int b = 0; b < cols / kQK_K; ++b) {
    int32_t sumi[8] = {};
    int32_t summ = 0;
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      k_scale_min(s, x[b].scales, &sc, &m);
      int q[32];
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = x[b].qs[32 * (s / 2) + l];
        q[l] = s % 2 ? byte >> 4 : byte & 15;
        if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) q[l] |= ((x[b].qh[l] >> s) & 1) << 4;
      }
      int32_t lanes[8];
      lanes32(q, y[b].qs + 32 * s, lanes);
      for (int l = 0; l < 8; ++l) sumi[l] += int32_t(sc) * lanes[l];
      summ += int32_t(m) * (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]);
    }
    add_scaled(acc, sumi, f16_to_f32(x[b].d) * y[b].d);
    mins = mins + f16_to_f32(x[b].dmin) * y[b].d * float(summ);
  }
  return reduce8(acc) - mins;
}

float dot_q6_k(const void* w, const void* act, int cols) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  float acc[8] = {};
  for (int b = 0; b < cols / kQK_K; ++b) {
    int32_t sumi[8] = {};
    for (int c = 0; c < 8; ++c) {  // 32 elements: group g of half h
      const int h = c / 4, g = c % 4;
      const uint8_t* ql = x[b].ql + 64 * h + 32 * (g & 1);
      const uint8_t* qh = x[b].qh + 32 * h;
      int q[32];
      for (int l = 0; l < 32; ++l) q[l] = (((g & 2) ? ql[l] >> 4 : ql[l] & 15) | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
      int32_t lanes[8];
      lanes32(q, y[b].qs + 32 * c, lanes);
      for (int l = 0; l < 8; ++l) sumi[l] += int32_t(x[b].scales[2 * c + l / 4]) * lanes[l];
    }
    add_scaled(acc, sumi, f16_to_f32(x[b].d) * y[b].d);
  }
  return reduce8(acc);
}

// Four rows are four one-row dot products.
template <DotFn F>
constexpr TypeKernels rows() {
  return {F, [](const void* w, const void* act, std::size_t stride, int cols, float* out) {
            for (int r = 0; r < 4; ++r) out[r] = F(w, static_cast<const uint8_t*>(act) + stride * r, cols);
          }};
}

}  // namespace

extern const DotKernels dot_portable = {
    rows<dot_half<false>>(), rows<dot_half<true>>(), rows<dot_block32<BlockQ4_0, false>>(),
    rows<dot_block32<BlockQ4_1, true>>(), rows<dot_block32<BlockQ5_0, false>>(), rows<dot_block32<BlockQ5_1, true>>(),
    rows<dot_block32<BlockQ8_0, false>>(), rows<dot_k45<BlockQ4_K>>(), rows<dot_k45<BlockQ5_K>>(), rows<dot_q6_k>(),
};

}  // namespace pagoda::kernels::quant
