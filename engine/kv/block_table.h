#pragma once
// One sequence's map from token positions to KV slots: position p lives in page
// pages()[p / tokens_per_page] at slot p % tokens_per_page. Growing takes whole pages from
// the pool, so the waste is at most one partly filled page per sequence.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/kv/page_pool.h"

namespace pagoda {

class BlockTable {
 public:
  explicit BlockTable(int32_t tokens_per_page) : tokens_per_page_(tokens_per_page) {}

  // Pages this table must gain to hold `n_tokens` positions in all.
  int32_t pages_needed(int32_t n_tokens) const {
    const int32_t want = (n_tokens + tokens_per_page_ - 1) / tokens_per_page_;
    return want > int32_t(pages_.size()) ? want - int32_t(pages_.size()) : 0;
  }

  // Grows to hold `n_tokens` positions; false (and unchanged) when the pool has too few pages.
  bool reserve(int32_t n_tokens, PagePool& pool) { return pool.allocate(pages_needed(n_tokens), pages_); }

  // Appends pages obtained elsewhere (e.g. granted by the page-pool actor).
  void append(const std::vector<int32_t>& pages) { pages_.insert(pages_.end(), pages.begin(), pages.end()); }

  // Returns every page to the pool and empties the table.
  void release(PagePool& pool) {
    pool.release(pages_);
    pages_.clear();
  }

  // Hands the pages over (to be released by their new owner) and empties the table.
  std::vector<int32_t> take_pages() { return std::exchange(pages_, {}); }

  // Hands over the pages beyond those the first `n_tokens` positions need (positions written
  // for guesses that were rejected), keeping the rest.
  std::vector<int32_t> take_pages_beyond(int32_t n_tokens) {
    const size_t keep = size_t((n_tokens + tokens_per_page_ - 1) / tokens_per_page_);
    if (keep >= pages_.size()) return {};
    std::vector<int32_t> beyond(pages_.begin() + ptrdiff_t(keep), pages_.end());
    pages_.resize(keep);
    return beyond;
  }

  int32_t capacity_tokens() const { return int32_t(pages_.size()) * tokens_per_page_; }
  int32_t tokens_per_page() const { return tokens_per_page_; }
  const std::vector<int32_t>& pages() const { return pages_; }

 private:
  int32_t tokens_per_page_;
  std::vector<int32_t> pages_;
};

}  // namespace pagoda
