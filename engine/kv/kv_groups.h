#pragma once
// KV groups: how a model's layers share KV pages. The layers are partitioned into groups of
// the same number of layer slots, each group all full-attention or all sliding with one
// window; a page holds one group's layers for tokens_per_page positions, so one pool of
// uniform pages serves every group, and a sliding group can give back the pages that fell out
// of its window while the full-attention groups keep theirs (vLLM v1's hybrid KV cache).
//
// A model without sliding layers has no groups listed here (`empty()`): one group of every
// layer, layer l in slot l, which is exactly the layout pages had before groups existed.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace pagoda {

struct KvGroups {
  int32_t slots = 0;                 // layer slots of a page
  std::vector<int32_t> windows;      // per group: 0 full attention, else its sliding window
  std::vector<int32_t> layer_group;  // per layer
  std::vector<int32_t> layer_slot;   // per layer: its slot within its group's pages

  bool empty() const { return windows.empty(); }

  // The groups of `c`'s layers; empty when no layer slides. Groups hold min(full, sliding)
  // layers each, so Gemma 2 gets two groups of L/2, Gemma 3 one group of its global layers and
  // ceil(sliding / globals) sliding groups, phi3 with a window a single sliding group. The last
  // group of a kind may have unused slots (Gemma 3 1B: 4 global layers, 22 sliding in 6 groups
  // of 4, the last using 2); they cost their bytes in that group's pages only, and a sliding
  // group holds few pages.
  static KvGroups of(const ModelConfig& c) {
    KvGroups g;
    std::vector<int32_t> full, sliding;
    for (int32_t l = 0; l < c.n_layers; ++l) (c.is_sliding(l) ? sliding : full).push_back(l);
    if (sliding.empty()) return g;
    g.slots = full.empty() ? int32_t(sliding.size()) : int32_t(std::min(full.size(), sliding.size()));
    g.layer_group.assign(size_t(c.n_layers), 0);
    g.layer_slot.assign(size_t(c.n_layers), 0);
    for (const auto* kind : {&full, &sliding}) {
      for (size_t i = 0; i < kind->size(); ++i) {
        if (i % size_t(g.slots) == 0) g.windows.push_back(kind == &full ? 0 : c.sliding_window);
        g.layer_group[size_t((*kind)[i])] = int32_t(g.windows.size()) - 1;
        g.layer_slot[size_t((*kind)[i])] = int32_t(i % size_t(g.slots));
      }
    }
    return g;
  }
};

// The first page a step computing positions from `from` on reads in a group with `window`
// (0: full attention, every page): the page holding the first position the window of `from`
// sees. Pages before it are dead: no later query sees them either.
inline int32_t first_live_page(int32_t window, int32_t from, int32_t tokens_per_page) {
  const int32_t first_seen = from - window + 1;
  return window > 0 && first_seen > 0 ? first_seen / tokens_per_page : 0;
}

}  // namespace pagoda
