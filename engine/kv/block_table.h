#pragma once
// One sequence's map from token positions to KV slots, one page list per KV group
// (kv_groups.h): position p of group g lives in page pages(g)[p / tokens_per_page] at slot
// p % tokens_per_page. Growing takes whole pages from the pool, so the waste is at most one
// partly filled page per group.
//
// A sliding group gives back the pages wholly before the window of the next position to be
// computed (no later query sees them); their entries become holes (kHole), which nothing
// reads. Holes lie only before a group's first live page: a group's live pages are those from
// the window of its next position on.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/kv/page_pool.h"

namespace pagoda {

class BlockTable {
 public:
  // What a page list stands for when its page went back to the pool.
  static constexpr int32_t kHole = -1;

  // How far growing reaches: a step computing positions [from, to) needs them in every group;
  // an admission gives sliding groups only the positions up to one window past `from` (the
  // steps add the rest as the old pages go back), so a long prompt never holds all of them.
  enum class Reach { Step, Admission };

  // One full-attention group of `tokens_per_page` positions a page.
  explicit BlockTable(int32_t tokens_per_page) : tokens_per_page_(tokens_per_page), windows_{0}, pages_(1), dead_(1) {}
  // One page list per group of `layout`.
  explicit BlockTable(const KvLayout& layout)
      : tokens_per_page_(layout.tokens_per_page), pages_(size_t(layout.n_groups())), dead_(size_t(layout.n_groups())) {
    for (int32_t g = 0; g < layout.n_groups(); ++g) windows_.push_back(layout.window(g));
  }

  int32_t groups() const { return int32_t(pages_.size()); }
  int32_t tokens_per_page() const { return tokens_per_page_; }
  int32_t window(int32_t group) const { return windows_[size_t(group)]; }
  // Group g's pages, kHole for those given back.
  const std::vector<int32_t>& pages(int32_t group = 0) const { return pages_[size_t(group)]; }
  // Group g's first page a step computing positions from `from` on reads.
  int32_t first_live_page(int32_t group, int32_t from) const {
    return pagoda::first_live_page(window(group), from, tokens_per_page_);
  }

  // Pages group g must gain before computing positions [from, to) (see Reach).
  int32_t group_pages_needed(int32_t group, int32_t from, int32_t to, Reach reach = Reach::Step) const {
    const int32_t have = std::max(int32_t(pages(group).size()), first_live_page(group, from));
    const int32_t want = pages_for(target(group, from, to, reach));
    return want > have ? want - have : 0;
  }
  // Pages every group together must gain before computing positions [from, to).
  int32_t pages_needed(int32_t from, int32_t to, Reach reach = Reach::Step) const {
    int32_t n = 0;
    for (int32_t g = 0; g < groups(); ++g) n += group_pages_needed(g, from, to, reach);
    return n;
  }
  // Grows as pages_needed(from, to, reach) says with exactly that many `pages`, group after
  // group; a sliding group's entries before its first live page are holes.
  void grow(int32_t from, int32_t to, std::span<const int32_t> pages, Reach reach = Reach::Step) {
    for (int32_t g = 0; g < groups(); ++g) {
      const auto k = size_t(group_pages_needed(g, from, to, reach));
      std::vector<int32_t>& list = pages_[size_t(g)];
      if (int32_t(list.size()) < first_live_page(g, from)) list.resize(size_t(first_live_page(g, from)), kHole);
      list.insert(list.end(), pages.begin(), pages.begin() + ptrdiff_t(k));
      pages = pages.subspan(k);
    }
  }
  // Grows every group to hold every position before `n_tokens` (no holes); false (and
  // unchanged) when the pool has too few pages.
  bool reserve(int32_t n_tokens, PagePool& pool) { return reserve(0, n_tokens, pool); }
  // Grows as for a step computing positions [from, to); false (and unchanged) when the pool
  // has too few pages.
  bool reserve(int32_t from, int32_t to, PagePool& pool) {
    std::vector<int32_t> fresh;
    if (!pool.allocate(pages_needed(from, to), fresh)) return false;
    grow(from, to, fresh);
    return true;
  }

  // Hands over the sliding groups' pages a step computing positions from `from` on no longer
  // reads, leaving holes; empty for full-attention groups, and until the window moves past a
  // page.
  std::vector<int32_t> take_dead_pages(int32_t from) {
    std::vector<int32_t> dead;
    for (int32_t g = 0; g < groups(); ++g) {
      std::vector<int32_t>& list = pages_[size_t(g)];
      const auto end = std::min(size_t(first_live_page(g, from)), list.size());
      for (size_t& i = dead_[size_t(g)]; i < end; ++i) {
        if (list[i] != kHole) dead.push_back(std::exchange(list[i], kHole));
      }
    }
    return dead;
  }

  // The pages holding the first `n_tokens` positions that a step computing from n_tokens on
  // reads, group after group in position order: what a swapped-out sequence keeps.
  std::vector<int32_t> live_pages(int32_t n_tokens) const {
    std::vector<int32_t> live;
    for (int32_t g = 0; g < groups(); ++g) {
      const std::vector<int32_t>& list = pages(g);
      const auto end = std::min(size_t(pages_for(n_tokens)), list.size());
      for (auto i = size_t(first_live_page(g, n_tokens)); i < end; ++i) live.push_back(list[i]);
    }
    return live;
  }

  // Returns every page to the pool and empties the table.
  void release(PagePool& pool) { pool.release(take_pages()); }

  // Hands the pages over (to be released by their new owner, last first: each group's leaves
  // before its parents) and empties the table.
  std::vector<int32_t> take_pages() {
    std::vector<int32_t> all;
    for (std::vector<int32_t>& list : pages_) {
      for (int32_t p : list)
        if (p != kHole) all.push_back(p);
      list.clear();
    }
    std::fill(dead_.begin(), dead_.end(), 0);
    return all;
  }

  // Hands over the pages beyond those the first `n_tokens` positions need (positions written
  // for guesses that were rejected), keeping the rest.
  std::vector<int32_t> take_pages_beyond(int32_t n_tokens) {
    std::vector<int32_t> beyond;
    const auto keep = size_t(pages_for(n_tokens));
    for (size_t g = 0; g < pages_.size(); ++g) {
      std::vector<int32_t>& list = pages_[g];
      for (size_t i = keep; i < list.size(); ++i)
        if (list[i] != kHole) beyond.push_back(list[i]);
      if (list.size() > keep) list.resize(keep);
      dead_[g] = std::min(dead_[g], list.size());
    }
    return beyond;
  }

  // Positions every group has an entry (a page or a hole) for.
  int32_t capacity_tokens() const {
    size_t n = pages_[0].size();
    for (const std::vector<int32_t>& list : pages_) n = std::min(n, list.size());
    return int32_t(n) * tokens_per_page_;
  }
  // Pages held (holes not counted).
  int32_t held_pages() const {
    int32_t n = 0;
    for (const std::vector<int32_t>& list : pages_)
      n += int32_t(std::count_if(list.begin(), list.end(), [](int32_t p) { return p != kHole; }));
    return n;
  }

 private:
  int32_t pages_for(int32_t n_tokens) const { return (n_tokens + tokens_per_page_ - 1) / tokens_per_page_; }
  int32_t target(int32_t group, int32_t from, int32_t to, Reach reach) const {
    return reach == Reach::Admission && window(group) > 0 ? std::min(to, from + window(group)) : to;
  }

  int32_t tokens_per_page_;
  std::vector<int32_t> windows_;             // per group, 0: full attention
  std::vector<std::vector<int32_t>> pages_;  // per group
  std::vector<size_t> dead_;                 // per group: entries before it are holes
};

}  // namespace pagoda
