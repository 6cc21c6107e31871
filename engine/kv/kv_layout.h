#pragma once
// Where a token's keys and values live inside a KV page. A page holds `tokens_per_page` token
// slots for every layer and KV head, laid out [layer][K|V][kv_head][slot][head_dim] so that
// attention for one (layer, KV head) reads each page's keys as one contiguous block.

#include <cstddef>
#include <cstdint>

#include "engine/model/model_config.h"

namespace pagoda {

struct KvLayout {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t tokens_per_page = 16;

  static KvLayout for_model(const ModelConfig& c, int32_t tokens_per_page) {
    return {c.n_layers, c.n_kv_heads, c.head_dim(), tokens_per_page};
  }

  // Floats of one head's keys (or values) for all slots of a page.
  size_t head_block() const { return size_t(tokens_per_page) * head_dim; }
  size_t floats_per_page() const { return size_t(n_layers) * 2 * n_kv_heads * head_block(); }
  size_t bytes_per_page() const { return floats_per_page() * sizeof(float); }

  // Offset, within a page, of slot 0 of the keys (which = 0) or values (which = 1).
  size_t block_offset(int32_t layer, int32_t which, int32_t kv_head) const {
    return ((size_t(layer) * 2 + which) * n_kv_heads + kv_head) * head_block();
  }
};

}  // namespace pagoda

namespace pagoda {

// The KV arena as the kernels see it: raw page memory and its layout. Cheap to copy.
struct KvView {
  float* base = nullptr;
  KvLayout layout;

  float* block(int32_t page, int32_t layer, int32_t which, int32_t kv_head) const {
    return base + size_t(page) * layout.floats_per_page() + layout.block_offset(layer, which, kv_head);
  }
};

}  // namespace pagoda
