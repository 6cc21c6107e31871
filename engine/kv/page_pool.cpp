#include "engine/kv/page_pool.h"

#include <algorithm>
#include <new>
#include <string>

#include "pagoda/error.h"

namespace pagoda {

PagePool::PagePool(const KvLayout& layout, int32_t n_pages, bool prefault) : layout_(layout), capacity_(n_pages) {
  if (n_pages <= 0) throw Error("KV cache: the page count must be positive, got " + std::to_string(n_pages));
  if (layout.tokens_per_page <= 0) throw Error("KV cache: tokens per page must be positive");
  layout.check();
  // Zero-filled (a read of an unwritten slot is deterministic), on huge pages where the OS
  // grants them (kernels/huge_page_memory.h), and by default committed only as pages are first
  // written, so start-up is instant.
  const size_t bytes = layout.bytes_per_page() * size_t(n_pages);
  try {
    arena_ = kernels::allocate_huge_page_memory(bytes, prefault);
  } catch (const std::bad_alloc&) {
    throw Error("KV cache: cannot map " + std::to_string(bytes) + " bytes for " + std::to_string(n_pages) + " pages");
  }
  free_list_.reserve(n_pages);
  for (int32_t p = n_pages - 1; p >= 0; --p) free_list_.push_back(p);
  ref_counts_.assign(n_pages, 0);
  names_.resize(n_pages);
  named_.assign(n_pages, false);
  lru_prev_.assign(n_pages, -1);
  lru_next_.assign(n_pages, -1);
}

int32_t PagePool::pages_for_bytes(const KvLayout& layout, size_t bytes) {
  return int32_t(std::min<size_t>(bytes / layout.bytes_per_page(), INT32_MAX));
}

std::optional<int32_t> PagePool::allocate() {
  int32_t page;
  if (!free_list_.empty()) {
    page = free_list_.back();
    free_list_.pop_back();
  } else if (lru_head_ >= 0) {
    page = evict_oldest();
  } else {
    return std::nullopt;
  }
  ref_counts_[page] = 1;
  return page;
}

bool PagePool::allocate(int32_t count, std::vector<int32_t>& out) {
  if (count < 0 || count > available_pages()) return false;
  for (int32_t i = 0; i < count; ++i) out.push_back(*allocate());
  return true;
}

void PagePool::check_page(int32_t page, const char* what) const {
  if (page < 0 || page >= capacity_ || ref_counts_[page] == 0) {
    throw Error(std::string("KV cache: ") + what + " of page " + std::to_string(page) + ", which is not in use");
  }
}

void PagePool::retain(int32_t page) {
  check_page(page, "retain");
  ++ref_counts_[page];
}

void PagePool::hold_named(int32_t page) {
  if (page < 0 || page >= capacity_ || !named_[size_t(page)]) {
    throw Error("KV cache: holding page " + std::to_string(page) + ", which has no name");
  }
  if (ref_counts_[page]++ == 0) lru_remove(page);
}

void PagePool::release(int32_t page) {
  check_page(page, "release");
  if (--ref_counts_[page] > 0) return;
  if (named_[size_t(page)]) {
    lru_push_back(page);
  } else {
    free_list_.push_back(page);
  }
}

void PagePool::release(std::span<const int32_t> pages) {
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) release(*it);
}

int32_t PagePool::named_page(const PageHash& hash, int32_t group) const {
  auto it = index_.find({hash, group});
  return it == index_.end() ? -1 : it->second;
}

PagePool::PrefixMatch PagePool::match(std::span<const PageHash> hashes, const LowerTier& lower) const {
  const int32_t groups = layout_.n_groups(), tpp = layout_.tokens_per_page;
  // Full-attention groups bound the hit by their named leading run; for a sliding group,
  // run[b] counts the named blocks ending at block b, so a hit of k blocks has all it needs
  // when run[k - 1] reaches back to the group's first live page.
  auto held = [&](size_t b, int32_t g) { return named_page(hashes[b], g) >= 0 || (lower && lower(hashes[b], g)); };
  int32_t limit = int32_t(hashes.size());
  std::vector<std::vector<int32_t>> runs;
  for (int32_t g = 0; g < groups; ++g) {
    if (layout_.window(g) == 0) {
      int32_t n = 0;
      while (n < limit && held(size_t(n), g)) ++n;
      limit = n;
    } else {
      std::vector<int32_t>& run = runs.emplace_back(hashes.size());
      for (size_t b = 0; b < hashes.size(); ++b) run[b] = held(b, g) ? (b ? run[b - 1] : 0) + 1 : 0;
    }
  }
  auto hit = [&](int32_t k) {
    for (int32_t g = 0, s = 0; g < groups; ++g) {
      if (layout_.window(g) == 0) continue;
      if (runs[size_t(s++)][size_t(k - 1)] < k - layout_.first_live_page(g, k * tpp)) return false;
    }
    return true;
  };
  PrefixMatch m;
  for (m.blocks = limit; m.blocks > 0 && !hit(m.blocks); --m.blocks) {
  }
  for (int32_t g = 0; g < groups; ++g) {
    for (int32_t b = layout_.first_live_page(g, m.blocks * tpp); b < m.blocks; ++b) {
      ++m.pages;
      const int32_t page = named_page(hashes[size_t(b)], g);
      if (page < 0) ++m.loads;
      else m.idle += ref_counts_[page] == 0;
    }
  }
  return m;
}

int32_t PagePool::take_prefix(int32_t group, std::span<const PageHash> hashes, int32_t blocks,
                              std::vector<int32_t>& out) {
  int32_t taken = 0;
  for (int32_t b = layout_.first_live_page(group, blocks * layout_.tokens_per_page); b < blocks; ++b) {
    const int32_t page = named_page(hashes[size_t(b)], group);
    if (page >= 0 && ref_counts_[page]++ == 0) lru_remove(page);
    out.push_back(page);
    ++taken;
  }
  return taken;
}

bool PagePool::register_page(int32_t page, const PageHash& hash, int32_t group) {
  check_page(page, "naming");
  if (named_[size_t(page)]) return false;
  if (!index_.try_emplace({hash, group}, page).second) return false;
  names_[size_t(page)] = {hash, group};
  named_[size_t(page)] = true;
  return true;
}

void PagePool::lru_push_back(int32_t page) {
  lru_prev_[page] = lru_tail_;
  lru_next_[page] = -1;
  if (lru_tail_ >= 0) lru_next_[lru_tail_] = page;
  else lru_head_ = page;
  lru_tail_ = page;
  ++n_cached_;
}

void PagePool::lru_remove(int32_t page) {
  const int32_t prev = lru_prev_[page], next = lru_next_[page];
  if (prev >= 0) lru_next_[prev] = next;
  else lru_head_ = next;
  if (next >= 0) lru_prev_[next] = prev;
  else lru_tail_ = prev;
  lru_prev_[page] = lru_next_[page] = -1;
  --n_cached_;
}

int32_t PagePool::evict_oldest() {
  const int32_t page = lru_head_;
  lru_remove(page);
  index_.erase(names_[size_t(page)]);
  named_[size_t(page)] = false;
  ++evictions_;
  if (log_evictions_) evicted_.push_back(names_[size_t(page)]);
  return page;
}

}  // namespace pagoda
