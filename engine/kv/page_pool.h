#pragma once
// The paged KV cache's memory: one arena of fixed-size pages allocated once at start-up, a
// free list, and per-page reference counts (shared prefixes hold a page more than once).
// Allocation and release are O(1) and never touch the system allocator.
//
// Not thread-safe by design: exactly one owner (the page-pool actor, or a test) calls it.
// Kernels read and write page memory directly through block tables.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/kv/kv_layout.h"

namespace pagoda {

class PagePool {
 public:
  PagePool(const KvLayout& layout, int32_t n_pages);

  // How many pages fit in `bytes` (at least 0).
  static int32_t pages_for_bytes(const KvLayout& layout, size_t bytes);

  // One free page with reference count 1, or nullopt when none is free.
  std::optional<int32_t> allocate();
  // `count` pages appended to `out`, or none at all (returns false) when fewer are free.
  bool allocate(int32_t count, std::vector<int32_t>& out);
  // Adds a holder to an allocated page.
  void retain(int32_t page);
  // Drops a holder; the page is free again when its last holder lets go.
  void release(int32_t page);
  void release(std::span<const int32_t> pages);

  int32_t capacity() const { return capacity_; }
  int32_t free_pages() const { return int32_t(free_list_.size()); }
  int32_t used_pages() const { return capacity_ - free_pages(); }
  double utilization() const { return capacity_ ? double(used_pages()) / capacity_ : 0.0; }
  int32_t ref_count(int32_t page) const { return ref_counts_.at(page); }

  const KvLayout& layout() const { return layout_; }
  float* page_data(int32_t page) { return arena_.get() + size_t(page) * layout_.floats_per_page(); }
  const float* page_data(int32_t page) const { return arena_.get() + size_t(page) * layout_.floats_per_page(); }
  KvView view() const { return {arena_.get(), layout_}; }

 private:
  struct FreeArena {
    size_t bytes;  // no initializer: it would make this type not default-constructible here
    void operator()(float* p) const;
  };

  KvLayout layout_;
  int32_t capacity_;
  std::unique_ptr<float[], FreeArena> arena_;
  std::vector<int32_t> free_list_;  // a stack: the most recently freed page is reused first
  std::vector<int32_t> ref_counts_;
};

}  // namespace pagoda
