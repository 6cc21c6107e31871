#pragma once
// Where a token's keys and values live inside a KV page. A page belongs to one KV group
// (engine/kv/kv_groups.h: all layers, unless some slide) and holds `tokens_per_page` token
// slots for each of the group's layer slots and KV heads, laid out [slot][K|V][kv_head][slot
// of a token][row] so that attention for one (layer, KV head) reads each page's keys as one
// contiguous block. A row is head_dim values in the cache's element type (kernels/kv_rows.h):
// 4, 2 or 34/32 bytes a value.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/kv/kv_groups.h"
#include "engine/model/model_config.h"
#include "kernels/kv_rows.h"
#include "pagoda/error.h"
#include "pagoda/kv_cache_type.h"

namespace pagoda {

struct KvLayout {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t tokens_per_page = 16;
  KvCacheType dtype = KvCacheType::F32;
  KvGroups groups;  // empty: one full-attention group of every layer

  // The layout of `c`'s cache; throws pagoda::Error when head_dim does not fit `dtype`.
  static KvLayout for_model(const ModelConfig& c, int32_t tokens_per_page, KvCacheType dtype = KvCacheType::F32) {
    KvLayout layout{c.n_layers, c.n_kv_heads, c.head_dim(), tokens_per_page, dtype, KvGroups::of(c)};
    layout.check();
    return layout;
  }

  int32_t n_groups() const { return groups.empty() ? 1 : int32_t(groups.windows.size()); }
  // Group g's sliding window; 0 for full attention.
  int32_t window(int32_t group) const { return groups.empty() ? 0 : groups.windows[size_t(group)]; }
  int32_t group_of(int32_t layer) const { return groups.empty() ? 0 : groups.layer_group[size_t(layer)]; }
  int32_t slot_of(int32_t layer) const { return groups.empty() ? layer : groups.layer_slot[size_t(layer)]; }
  // Layer slots a page holds.
  int32_t slots() const { return groups.empty() ? n_layers : groups.slots; }
  // Group g's first page a step computing positions from `from` on reads (kv_groups.h).
  int32_t first_live_page(int32_t group, int32_t from) const {
    return pagoda::first_live_page(window(group), from, tokens_per_page);
  }
  // The most pages one sequence of `positions` positions holds at once, when a step computes
  // at most `step_tokens` of them: every page in a full-attention group; in a sliding group the
  // pages of a step's positions and the window before them.
  int64_t peak_pages(int64_t positions, int32_t step_tokens) const {
    const int64_t all = (positions + tokens_per_page - 1) / tokens_per_page;
    int64_t total = 0;
    for (int32_t g = 0; g < n_groups(); ++g) {
      const int64_t span = int64_t(window(g)) - 1 + step_tokens;
      total += window(g) > 0 ? std::min(all, (span + tokens_per_page - 1) / tokens_per_page + 1) : all;
    }
    return total;
  }

  // Throws pagoda::Error unless rows of head_dim values can be stored as dtype.
  void check() const {
    if (!kernels::kv_row_fits(dtype, head_dim)) {
      throw Error(std::string("KV cache type ") + kv_cache_type_name(dtype) + " stores blocks of " +
                  std::to_string(kernels::kQ8_0Block) + " values, but the model's head_dim is " +
                  std::to_string(head_dim) + " (use f16, bf16 or f32)");
    }
  }

  // Bytes of one head's key (or value) row of head_dim values.
  size_t row_bytes() const { return kernels::kv_row_bytes(dtype, head_dim); }
  // Bytes of one head's keys (or values) for all slots of a page.
  size_t block_bytes() const { return size_t(tokens_per_page) * row_bytes(); }
  size_t bytes_per_page() const { return size_t(slots()) * 2 * n_kv_heads * block_bytes(); }

  // Byte offset, within a page of the layer's group, of slot 0 of the keys (which = 0) or
  // values (which = 1).
  size_t block_offset(int32_t layer, int32_t which, int32_t kv_head) const {
    return ((size_t(slot_of(layer)) * 2 + which) * n_kv_heads + kv_head) * block_bytes();
  }
};

}  // namespace pagoda

namespace pagoda {

// The KV arena as the kernels see it: raw page memory and its layout. Cheap to copy.
struct KvView {
  std::byte* base = nullptr;
  KvLayout layout;

  std::byte* page(int32_t page) const { return base + size_t(page) * layout.bytes_per_page(); }
  // `page` must be one of the layer's group.
  std::byte* block(int32_t page, int32_t layer, int32_t which, int32_t kv_head) const {
    return this->page(page) + layout.block_offset(layer, which, kv_head);
  }
};

}  // namespace pagoda
