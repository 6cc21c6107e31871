#include "kernels/quant/interleaved.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>

namespace pagoda::kernels::quant {

namespace {

uint32_t le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void or64(uint8_t* p, uint64_t bits) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  v |= bits;
  std::memcpy(p, &v, 8);
}
void put_half(uint8_t* field, int r, const uint8_t* half) { std::memcpy(field + 2 * r, half, 2); }

// The layout is chosen so that a nibble load's 4 bytes of a row are 4 consecutive bytes of
// ggml's qs (low nibble element j, high nibble element j + 16 for the 32-element types; the
// two sub-blocks of a 32-byte run for Q4_K / Q5_K): the copy is bytes, and fifth bits become
// mask bits 4r … 4r + 3.

void put_block32(QuantType type, const uint8_t* p, int r, uint8_t* t) {
  const bool min = type == QuantType::Q4_1 || type == QuantType::Q5_1;
  const bool five = type == QuantType::Q5_0 || type == QuantType::Q5_1;
  put_half(t, r, p);
  if (min) put_half(t + 32, r, p + 2);
  const uint8_t* qh = p + (min ? 4 : 2);
  const uint8_t* qs = qh + (five ? 4 : 0);
  uint8_t* masks = t + (min ? 64 : 32);
  uint8_t* nibbles = masks + (five ? 64 : 0);
  for (int i = 0; i < 4; ++i) {
    std::memcpy(nibbles + 64 * i + 4 * r, qs + 4 * i, 4);
    if (five) {
      const uint32_t bits = le32(qh);
      or64(masks + 16 * i, uint64_t((bits >> (4 * i)) & 15) << (4 * r));
      or64(masks + 16 * i + 8, uint64_t((bits >> (16 + 4 * i)) & 15) << (4 * r));
    }
  }
}

void put_k45(bool five, const uint8_t* p, int r, uint8_t* t) {
  const uint8_t* scales = p + 4;
  const uint8_t* qh = p + 4 + kKScaleSize;
  const uint8_t* qs = qh + (five ? kQK_K / 8 : 0);
  put_half(t, r, p);
  put_half(t + 32, r, p + 2);
  for (int s = 0; s < 8; ++s) k_scale_min(s, scales, &t[64 + 16 * s + r], &t[192 + 16 * s + r]);
  uint8_t* nibbles = t + (five ? 832 : 320);
  for (int p2 = 0; p2 < 4; ++p2)
    for (int i = 0; i < 8; ++i) {
      const int load = 8 * p2 + i;
      std::memcpy(nibbles + 64 * load + 4 * r, qs + 32 * p2 + 4 * i, 4);
      if (five) {
        uint64_t low = 0, high = 0;
        for (int e = 0; e < 4; ++e) {
          low |= uint64_t((qh[4 * i + e] >> (2 * p2)) & 1) << e;
          high |= uint64_t((qh[4 * i + e] >> (2 * p2 + 1)) & 1) << e;
        }
        or64(t + 320 + 16 * load, low << (4 * r));
        or64(t + 320 + 16 * load + 8, high << (4 * r));
      }
    }
}

void put_q6_k(const uint8_t* p, int r, uint8_t* t) {
  const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
  put_half(t, r, reinterpret_cast<const uint8_t*>(&b.d));
  for (int s = 0; s < 16; ++s) t[32 + 16 * s + r] = uint8_t(b.scales[s]);
  // Element x < 128 of a half: low nibble of ql[x] below 64, else high nibble of ql[x − 64].
  auto low4 = [&](int element) {
    const int h = element / 128, x = element % 128;
    return x < 64 ? b.ql[64 * h + x] & 15 : b.ql[64 * h + x - 64] >> 4;
  };
  auto top2 = [&](int element) {
    const int h = element / 128, x = element % 128;
    return (b.qh[32 * h + x % 32] >> (2 * (x / 32))) & 3;
  };
  for (int i = 0; i < 32; ++i)
    for (int e = 0; e < 4; ++e) t[288 + 64 * i + 4 * r + e] = uint8_t(low4(4 * i + e) | low4(128 + 4 * i + e) << 4);
  for (int g = 0; g < 16; ++g)
    for (int e = 0; e < 4; ++e) {
      int top = 0;
      for (int c = 0; c < 4; ++c) top |= top2(4 * (g + 16 * c) + e) << (2 * c);
      t[2336 + 64 * g + 4 * r + e] = uint8_t(top);
    }
}

// Q2_K / Q3_K: ggml's qs bytes are the crumb loads' bytes (BlockQ2_K); Q3_K's third bits
// become mask bits.
void put_q2_k(const uint8_t* p, int r, uint8_t* t) {
  const auto& b = *reinterpret_cast<const BlockQ2_K*>(p);
  put_half(t, r, reinterpret_cast<const uint8_t*>(&b.d));
  put_half(t + 32, r, reinterpret_cast<const uint8_t*>(&b.dmin));
  for (int s = 0; s < 16; ++s) t[64 + 16 * s + r] = b.scales[s];
  for (int i = 0; i < 16; ++i) std::memcpy(t + 320 + 64 * i + 4 * r, b.qs + 32 * (i / 8) + 4 * (i % 8), 4);
}

void put_q3_k(const uint8_t* p, int r, uint8_t* t) {
  const auto& b = *reinterpret_cast<const BlockQ3_K*>(p);
  put_half(t, r, reinterpret_cast<const uint8_t*>(&b.d));
  for (int s = 0; s < 16; ++s) t[32 + 16 * s + r] = uint8_t(q3_k_scale(s, b.scales) - 32);
  for (int i = 0; i < 16; ++i) {
    std::memcpy(t + 288 + 64 * i + 4 * r, b.qs + 32 * (i / 8) + 4 * (i % 8), 4);
    for (int c = 0; c < 4; ++c) {
      uint64_t bits = 0;
      for (int e = 0; e < 4; ++e) bits |= uint64_t((b.hmask[4 * (i % 8) + e] >> (4 * (i / 8) + c)) & 1) << e;
      or64(t + 1312 + 8 * (4 * i + c), bits << (4 * r));
    }
  }
}

void put_iq4_xs(const uint8_t* p, int r, uint8_t* t) {
  const auto& b = *reinterpret_cast<const BlockIQ4_XS*>(p);
  put_half(t, r, reinterpret_cast<const uint8_t*>(&b.d));
  for (int s = 0; s < 8; ++s) {
    t[32 + 16 * s + r] = uint8_t(iq4_xs_scale(s, b.scales_h, b.scales_l) - 32);
    for (int i = 0; i < 4; ++i) std::memcpy(t + 160 + 64 * (4 * s + i) + 4 * r, b.qs + 16 * s + 4 * i, 4);
  }
}

// Row r's ggml block at p into its place in a (zeroed) tile.
void put_block(QuantType type, const uint8_t* p, int r, uint8_t* t) {
  switch (type) {
    case QuantType::Q8_0:
      put_half(t, r, p);
      for (int g = 0; g < 8; ++g) std::memcpy(t + 32 + 64 * g + 4 * r, p + 2 + 4 * g, 4);
      break;
    case QuantType::Q4_0:
    case QuantType::Q4_1:
    case QuantType::Q5_0:
    case QuantType::Q5_1:
    case QuantType::IQ4_NL:  // Q4_0's layout
      put_block32(type, p, r, t);
      break;
    case QuantType::Q2_K: put_q2_k(p, r, t); break;
    case QuantType::Q3_K: put_q3_k(p, r, t); break;
    case QuantType::IQ4_XS: put_iq4_xs(p, r, t); break;
    case QuantType::Q4_K:
    case QuantType::Q5_K: put_k45(type == QuantType::Q5_K, p, r, t); break;
    case QuantType::Q6_K: put_q6_k(p, r, t); break;
    default: break;
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
    case QuantType::IQ4_NL: return 288;
    case QuantType::Q2_K: return 1344;
    case QuantType::Q3_K: return 1824;
    case QuantType::IQ4_XS: return 2208;
    default: return 0;
  }
}

HugePageMemory repack(QuantType type, const uint8_t* data, std::size_t row_bytes, int rows, int cols,
                      const std::function<void(const void*, std::size_t)>& consumed) {
  const BlockShape shape = block_shape(type);
  const int blocks = cols / shape.elements;
  const int groups = (rows + kGroupRows - 1) / kGroupRows;
  const std::size_t tile = tile_bytes(type), group_bytes = tile * std::size_t(blocks);
  HugePageMemory out = allocate_huge_page_memory(group_bytes * std::size_t(groups));  // zeroed
  // Chunks of about 1 MiB of source, so what is released early comes in whole pages.
  const int grain = std::max<int>(1, int((1 << 20) / std::max<std::size_t>(1, row_bytes * kGroupRows)));
  tbb::parallel_for(tbb::blocked_range<int>(0, groups, grain), [&](const tbb::blocked_range<int>& range) {
    for (int g = range.begin(); g < range.end(); ++g) {
      uint8_t* group = out.get() + group_bytes * g;
      for (int r = 0; r < kGroupRows && kGroupRows * g + r < rows; ++r) {
        const uint8_t* row = data + row_bytes * std::size_t(kGroupRows * g + r);
        for (int b = 0; b < blocks; ++b) put_block(type, row + std::size_t(shape.bytes) * b, r, group + tile * b);
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
    case QuantType::Q2_K: return k.q2_k;
    case QuantType::Q3_K: return k.q3_k;
    case QuantType::IQ4_NL: return k.iq4_nl;
    case QuantType::IQ4_XS: return k.iq4_xs;
    default: return nullptr;
  }
}

}  // namespace pagoda::kernels::quant
