#pragma once
// Keys and values of a KV cache type over pages, for the attention kernels' tests.

#include <cstddef>
#include <vector>

#include "pagoda/kv_cache_type.h"

namespace pagoda::test {

// Random keys and values of n_ctx positions stored as `type` over pages (with garbage past
// n_ctx), and the floats they read back as.
struct TypedCache {
  KvCacheType type;
  int head_dim, n_ctx, tokens_per_page;
  std::vector<float> k, v;  // [n_ctx][head_dim], as stored (dequantized)
  std::vector<std::vector<std::byte>> k_store, v_store;
  std::vector<const std::byte*> k_pages, v_pages;

  TypedCache(KvCacheType type, int head_dim, int n_ctx, int tokens_per_page, unsigned seed);

  // paged_attention of q's `group` heads over every position.
  std::vector<float> attend(const std::vector<float>& q, int group, float scale) const;
};

}  // namespace pagoda::test
