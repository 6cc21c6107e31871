#include "kernels/quant/interleaved.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>

namespace pagoda::kernels::quant {

namespace {

// One row's block in the terms of the layout: its quants as stored (u, or Q8_0's signed q)
// and its scale fields, copied as the file holds them.
struct RowBlock {
  int u[kQK_K];
  uint16_t d, m;  // m: Q4_1 / Q5_1 min, Q4_K / Q5_K dmin
  int8_t sc[16];
  uint8_t mins[8];
};

uint32_t le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void read_nibbles(const uint8_t* qs, int u[32]) {
  for (int j = 0; j < 16; ++j) u[j] = qs[j] & 15, u[j + 16] = qs[j] >> 4;
}
void add_fifth_bits(const uint8_t* qh, int u[32]) {
  const uint32_t bits = le32(qh);
  for (int j = 0; j < 32; ++j) u[j] |= int((bits >> j) & 1) << 4;
}

void read_block(QuantType type, const uint8_t* p, RowBlock& x) {
  switch (type) {
    case QuantType::Q4_0: {
      const auto& b = *reinterpret_cast<const BlockQ4_0*>(p);
      x.d = b.d;
      read_nibbles(b.qs, x.u);
      break;
    }
    case QuantType::Q4_1: {
      const auto& b = *reinterpret_cast<const BlockQ4_1*>(p);
      x.d = b.d, x.m = b.m;
      read_nibbles(b.qs, x.u);
      break;
    }
    case QuantType::Q5_0: {
      const auto& b = *reinterpret_cast<const BlockQ5_0*>(p);
      x.d = b.d;
      read_nibbles(b.qs, x.u);
      add_fifth_bits(b.qh, x.u);
      break;
    }
    case QuantType::Q5_1: {
      const auto& b = *reinterpret_cast<const BlockQ5_1*>(p);
      x.d = b.d, x.m = b.m;
      read_nibbles(b.qs, x.u);
      add_fifth_bits(b.qh, x.u);
      break;
    }
    case QuantType::Q8_0: {
      const auto& b = *reinterpret_cast<const BlockQ8_0*>(p);
      x.d = b.d;
      for (int j = 0; j < kQK; ++j) x.u[j] = b.qs[j];
      break;
    }
    case QuantType::Q4_K: case QuantType::Q5_K: {
      const bool five = type == QuantType::Q5_K;
      const uint8_t* scales = five ? reinterpret_cast<const BlockQ5_K*>(p)->scales : reinterpret_cast<const BlockQ4_K*>(p)->scales;
      const uint8_t* qs = five ? reinterpret_cast<const BlockQ5_K*>(p)->qs : reinterpret_cast<const BlockQ4_K*>(p)->qs;
      std::memcpy(&x.d, p, 2);
      std::memcpy(&x.m, p + 2, 2);
      for (int s = 0; s < 8; ++s) {
        uint8_t sc, m;
        k_scale_min(s, scales, &sc, &m);
        x.sc[s] = int8_t(sc);  // 6 bits: exact as int8
        x.mins[s] = m;
        for (int l = 0; l < 32; ++l) {
          const uint8_t byte = qs[32 * (s / 2) + l];
          x.u[32 * s + l] = s % 2 ? byte >> 4 : byte & 15;
          if (five) x.u[32 * s + l] |= ((reinterpret_cast<const BlockQ5_K*>(p)->qh[l] >> s) & 1) << 4;
        }
      }
      break;
    }
    case QuantType::Q6_K: {
      const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
      x.d = b.d;
      std::memcpy(x.sc, b.scales, 16);
      for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
          const uint8_t ql0 = b.ql[64 * h + l], ql1 = b.ql[64 * h + 32 + l], qh = b.qh[32 * h + l];
          int* u = x.u + 128 * h;
          u[l] = (ql0 & 15) | ((qh & 3) << 4);
          u[l + 32] = (ql1 & 15) | (((qh >> 2) & 3) << 4);
          u[l + 64] = (ql0 >> 4) | (((qh >> 4) & 3) << 4);
          u[l + 96] = (ql1 >> 4) | (((qh >> 6) & 3) << 4);
        }
      break;
    }
    default:
      break;
  }
}

void put_half(uint8_t* field, int r, uint16_t h) { std::memcpy(field + 2 * r, &h, 2); }
void set_bit(uint8_t* mask, int bit) { mask[bit / 8] |= uint8_t(1u << (bit % 8)); }

// Nibble load: byte 4r + e gets (low k-group's element e) | (high k-group's element e) << 4,
// and each value's fifth bit goes to the load's low or high mask.
void put_nibbles(uint8_t* load, uint8_t* masks, int r, const int* low, const int* high) {
  for (int e = 0; e < 4; ++e) {
    load[4 * r + e] = uint8_t((low[e] & 15) | (high[e] & 15) << 4);
    if (masks && (low[e] >> 4)) set_bit(masks, 4 * r + e);
    if (masks && (high[e] >> 4)) set_bit(masks + 8, 4 * r + e);
  }
}

// Row r's block into its place in a (zeroed) tile.
void write_block(QuantType type, const RowBlock& x, int r, uint8_t* t) {
  switch (type) {
    case QuantType::Q8_0:
      put_half(t, r, x.d);
      for (int g = 0; g < 8; ++g)
        for (int e = 0; e < 4; ++e) t[32 + 64 * g + 4 * r + e] = uint8_t(int8_t(x.u[4 * g + e]));
      break;
    case QuantType::Q4_0: case QuantType::Q4_1: case QuantType::Q5_0: case QuantType::Q5_1: {
      const bool min = type == QuantType::Q4_1 || type == QuantType::Q5_1;
      const bool five = type == QuantType::Q5_0 || type == QuantType::Q5_1;
      put_half(t, r, x.d);
      if (min) put_half(t + 32, r, x.m);
      uint8_t* masks = five ? t + (min ? 64 : 32) : nullptr;
      uint8_t* nibbles = t + (min ? 64 : 32) + (five ? 64 : 0);
      for (int i = 0; i < 4; ++i)
        put_nibbles(nibbles + 64 * i, masks ? masks + 16 * i : nullptr, r, x.u + 4 * i, x.u + 16 + 4 * i);
      break;
    }
    case QuantType::Q4_K: case QuantType::Q5_K: {
      const bool five = type == QuantType::Q5_K;
      put_half(t, r, x.d);
      put_half(t + 32, r, x.m);
      for (int s = 0; s < 8; ++s) {
        t[64 + 16 * s + r] = uint8_t(x.sc[s]);
        t[192 + 16 * s + r] = x.mins[s];
      }
      uint8_t* masks = five ? t + 320 : nullptr;
      uint8_t* nibbles = t + (five ? 832 : 320);
      for (int p = 0; p < 4; ++p)
        for (int i = 0; i < 8; ++i)
          put_nibbles(nibbles + 64 * (8 * p + i), masks ? masks + 16 * (8 * p + i) : nullptr, r, x.u + 64 * p + 4 * i,
                      x.u + 64 * p + 32 + 4 * i);
      break;
    }
    case QuantType::Q6_K:
      put_half(t, r, x.d);
      for (int s = 0; s < 16; ++s) t[32 + 16 * s + r] = uint8_t(x.sc[s]);
      for (int i = 0; i < 32; ++i) put_nibbles(t + 288 + 64 * i, nullptr, r, x.u + 4 * i, x.u + 128 + 4 * i);
      for (int tl = 0; tl < 16; ++tl)
        for (int e = 0; e < 4; ++e) {
          uint8_t top = 0;
          for (int c = 0; c < 4; ++c) top |= uint8_t((x.u[4 * (tl + 16 * c) + e] >> 4) << (2 * c));
          t[2336 + 64 * tl + 4 * r + e] = top;
        }
      break;
    default:
      break;
  }
}

}  // namespace

bool interleaved(QuantType type) { return tile_bytes(type) != 0; }

std::size_t tile_bytes(QuantType type) {
  switch (type) {
    case QuantType::Q8_0: return 544;
    case QuantType::Q4_0: return 288;
    case QuantType::Q4_1: return 320;
    case QuantType::Q5_0: return 352;
    case QuantType::Q5_1: return 384;
    case QuantType::Q4_K: return 2368;
    case QuantType::Q5_K: return 2880;
    case QuantType::Q6_K: return 3360;
    default: return 0;
  }
}

std::vector<uint8_t> repack(QuantType type, const uint8_t* data, std::size_t row_bytes, int rows, int cols,
                            const std::function<void(const void*, std::size_t)>& consumed) {
  const BlockShape shape = block_shape(type);
  const int blocks = cols / shape.elements;
  const int groups = (rows + kGroupRows - 1) / kGroupRows;
  const std::size_t tile = tile_bytes(type), group_bytes = tile * std::size_t(blocks);
  std::vector<uint8_t> out(group_bytes * std::size_t(groups));
  // Chunks of about 1 MiB of source, so what is released early comes in whole pages.
  const int grain = std::max<int>(1, int((1 << 20) / std::max<std::size_t>(1, row_bytes * kGroupRows)));
  tbb::parallel_for(tbb::blocked_range<int>(0, groups, grain), [&](const tbb::blocked_range<int>& range) {
    RowBlock x{};
    for (int g = range.begin(); g < range.end(); ++g)
      for (int r = 0; r < kGroupRows && kGroupRows * g + r < rows; ++r) {
        const uint8_t* row = data + row_bytes * std::size_t(kGroupRows * g + r);
        for (int b = 0; b < blocks; ++b) {
          read_block(type, row + std::size_t(shape.bytes) * b, x);
          write_block(type, x, r, out.data() + group_bytes * g + tile * b);
        }
      }
    if (consumed) {
      const int first = kGroupRows * range.begin(), last = std::min(rows, kGroupRows * range.end());
      consumed(data + row_bytes * std::size_t(first), row_bytes * std::size_t(last - first));
    }
  });
  return out;
}

const GroupKernels& group_kernels(Isa isa) {
  switch (isa) {
    case Isa::Portable: return group_portable;
    case Isa::Avx2: return group_avx2;
    case Isa::Avx512: {
      static const bool vnni = (__builtin_cpu_init(), __builtin_cpu_supports("avx512vnni"));
      return vnni ? group_avx512vnni : group_avx512;
    }
  }
  return group_portable;
}

GroupFn group_for(const GroupKernels& k, QuantType type) {
  switch (type) {
    case QuantType::Q4_0: return k.q4_0;
    case QuantType::Q4_1: return k.q4_1;
    case QuantType::Q5_0: return k.q5_0;
    case QuantType::Q5_1: return k.q5_1;
    case QuantType::Q8_0: return k.q8_0;
    case QuantType::Q4_K: return k.q4_k;
    case QuantType::Q5_K: return k.q5_k;
    case QuantType::Q6_K: return k.q6_k;
    default: return nullptr;
  }
}

}  // namespace pagoda::kernels::quant
