#include "kernels/kv_rows.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/half.h"

namespace pagoda::kernels {

namespace {

uint16_t u16_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void put_u16(std::byte* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace

void store_kv_row(KvCacheType type, const float* x, int head_dim, std::byte* row) {
  switch (type) {
    case KvCacheType::F32: std::memcpy(row, x, size_t(head_dim) * 4); return;
    case KvCacheType::F16: detail::active_table().ops->to_f16(x, reinterpret_cast<uint16_t*>(row), head_dim); return;
    case KvCacheType::BF16: detail::active_table().ops->to_bf16(x, reinterpret_cast<uint16_t*>(row), head_dim); return;
    case KvCacheType::Q8_0:
      for (int b = 0; b < head_dim / kQ8_0Block; ++b, x += kQ8_0Block, row += kQ8_0BlockBytes) {
        float amax = 0.0f;
        for (int i = 0; i < kQ8_0Block; ++i) amax = std::fmax(amax, std::fabs(x[i]));
        // As ggml: quantize with the exact scale, store the scale rounded to f16.
        const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
        put_u16(row, f32_to_f16(d));
        for (int i = 0; i < kQ8_0Block; ++i) {
          row[2 + i] = std::byte(uint8_t(int8_t(std::lround(x[i] * inverse))));
        }
      }
      return;
  }
}

void load_kv_row(KvCacheType type, const std::byte* row, int head_dim, float* y) {
  switch (type) {
    case KvCacheType::F32: std::memcpy(y, row, size_t(head_dim) * 4); return;
    case KvCacheType::F16:
      for (int i = 0; i < head_dim; ++i) y[i] = f16_to_f32(u16_at(row + 2 * i));
      return;
    case KvCacheType::BF16:
      for (int i = 0; i < head_dim; ++i) y[i] = bf16_to_f32(u16_at(row + 2 * i));
      return;
    case KvCacheType::Q8_0:
      for (int b = 0; b < head_dim / kQ8_0Block; ++b, y += kQ8_0Block, row += kQ8_0BlockBytes) {
        const float d = f16_to_f32(u16_at(row));
        for (int i = 0; i < kQ8_0Block; ++i) y[i] = float(int8_t(row[2 + i])) * d;
      }
      return;
  }
}

}  // namespace pagoda::kernels
