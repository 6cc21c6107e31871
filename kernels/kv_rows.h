#pragma once
// One head's key or value row (head_dim values) in the KV cache's element type: its size in
// bytes, and the conversions that write a freshly computed row into a page and read one back.
// Attention reads rows with its own in-register conversions, which give the same floats as
// load_kv_row.
//
// Q8_0 rows are ggml's blocks along head_dim: per 32 values an f16 scale d = amax / 127 and
// 32 int8 q = round(x / d) (ggml's quantize_row_q8_0_ref); a value reads back as d·q.

#include <cstddef>

#include "pagoda/kv_cache_type.h"

namespace pagoda::kernels {

inline constexpr int kQ8_0Block = 32;              // values per Q8_0 block
inline constexpr size_t kQ8_0BlockBytes = 2 + 32;  // f16 scale, then 32 int8

// Whether rows of `head_dim` values can be stored as `type` (Q8_0 needs whole blocks).
constexpr bool kv_row_fits(KvCacheType type, int head_dim) {
  return head_dim > 0 && (type != KvCacheType::Q8_0 || head_dim % kQ8_0Block == 0);
}

// Bytes of one row of `head_dim` values; head_dim must fit the type.
constexpr size_t kv_row_bytes(KvCacheType type, int head_dim) {
  switch (type) {
    case KvCacheType::F32: return size_t(head_dim) * 4;
    case KvCacheType::F16:
    case KvCacheType::BF16: return size_t(head_dim) * 2;
    case KvCacheType::Q8_0: return size_t(head_dim / kQ8_0Block) * kQ8_0BlockBytes;
  }
  return 0;
}

// Writes x[0..head_dim) into `row` as `type`.
void store_kv_row(KvCacheType type, const float* x, int head_dim, std::byte* row);
// Reads `row` back into y[0..head_dim).
void load_kv_row(KvCacheType type, const std::byte* row, int head_dim, float* y);

}  // namespace pagoda::kernels
