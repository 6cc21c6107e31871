#pragma once
// The paged KV cache's memory and its accounting: one arena of fixed-size pages allocated once
// at start-up (a page's size follows the layout's element type, so a byte budget buys twice
// the pages in f16 as in f32), per-page reference counts, and the prefix cache's index.
//
// Every page is in exactly one of three states, so free + cached + in use == capacity:
//   free    — on the free list, holding nothing anyone can find;
//   in use  — held by one or more block tables (a shared prefix holds a page more than once);
//   cached  — no holder, but named by a prefix hash in the index, so a later request with the
//             same prefix can take it back; kept in least-recently-released order and evicted,
//             oldest first, only when a page is wanted and none is free.
// A full page is named once it is written (register_page), by its token block's prefix hash
// and its KV group (kv_groups.h: each group's pages hold other layers); it stays named while
// in use, so running sequences share it too. In a full-attention group leaves of a prefix are
// evicted before their parents: a holder of a page holds every page before it, so a parent
// never loses its last holder before its child does, and a block table is released last page
// first. A sliding group lets go of its oldest pages first (they fall out of its window), so
// there a parent may go before its children; a hit never needs those (see match).
//
// Not thread-safe by design: exactly one owner (the page-pool actor, or a test) calls it.
// Kernels read and write page memory directly through block tables.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/kv/kv_layout.h"
#include "engine/kv/prefix_cache.h"
#include "kernels/huge_page_memory.h"

namespace pagoda {

class PagePool {
 public:
  // With `prefault`, the arena is made resident at once (MADV_POPULATE_WRITE) instead of page
  // by page as pages are first written.
  PagePool(const KvLayout& layout, int32_t n_pages, bool prefault = false);

  // How many pages fit in `bytes` (at least 0).
  static int32_t pages_for_bytes(const KvLayout& layout, size_t bytes);

  // A page with reference count 1: a free one, else the oldest cached page, evicted (its
  // name forgotten); nullopt when every page is in use.
  std::optional<int32_t> allocate();
  // `count` pages appended to `out`, or none at all (returns false) when fewer are available.
  bool allocate(int32_t count, std::vector<int32_t>& out);
  // Adds a holder to a page in use.
  void retain(int32_t page);
  // Adds a holder to a named page, in use or cached (which it takes out of the LRU).
  void hold_named(int32_t page);
  // Drops a holder; when the last one lets go the page is cached if it is named, else free.
  void release(int32_t page);
  // Releases a block table's pages, last first (so a prefix's leaves are evicted first).
  void release(std::span<const int32_t> pages);

  // The prefix cache. A hit of the first `blocks` token blocks of `hashes` (one hash per
  // block of tokens_per_page tokens) lets the next step compute from position blocks ·
  // tokens_per_page on: it needs, in each full-attention group, every one of those blocks
  // named, and in each sliding group those the window of that position sees (the earlier ones
  // stay holes). `pages` is how many pages the hit takes, `idle` how many of them have no
  // holder (taking them uses up as many available pages). With a lower tier (the disk), a
  // block it holds counts as cached too: `loads` of the hit's pages are not in the pool and
  // need fresh pages to be read into.
  struct PrefixMatch {
    int32_t blocks = 0;
    int32_t pages = 0;
    int32_t idle = 0;
    int32_t loads = 0;
  };
  // Whether a lower tier holds group g's page of the block hashed `hash`.
  using LowerTier = std::function<bool(const PageHash& hash, int32_t group)>;
  // The longest hit, in the pool or, where it has not the block, in `lower` (none: the pool only).
  PrefixMatch match(std::span<const PageHash> hashes, const LowerTier& lower = {}) const;
  // Appends group g's pages of a hit of the first `blocks` of `hashes` (from the group's first
  // live page on) to `out`, each with one more holder, and -1 for each block the pool has not
  // (match found it in the lower tier); returns how many entries.
  int32_t take_prefix(int32_t group, std::span<const PageHash> hashes, int32_t blocks, std::vector<int32_t>& out);
  // Names a full page of `group` in use; whether it did. Ignored when the name is taken already
  // (a duplicate computed side by side stays unnamed and is freed as usual) or the page is
  // named already.
  bool register_page(int32_t page, const PageHash& hash, int32_t group = 0);

  // The page named (hash, group), -1 when none is.
  int32_t named_page(const PageHash& hash, int32_t group) const;

  // A page's name: its block's prefix hash and its KV group.
  struct PageName {
    PageHash hash;
    int32_t group = 0;
    friend bool operator==(const PageName&, const PageName&) = default;
  };
  // Cached pages given to new work so far (their names forgotten).
  int64_t evictions() const { return evictions_; }
  // With `on`, the names evicted pages had are kept until take_evicted() (for the KV events).
  void log_evictions(bool on) { log_evictions_ = on; }
  std::vector<PageName> take_evicted() { return std::exchange(evicted_, {}); }

  int32_t capacity() const { return capacity_; }
  int32_t free_pages() const { return int32_t(free_list_.size()); }
  int32_t cached_pages() const { return n_cached_; }
  int32_t used_pages() const { return capacity_ - free_pages() - cached_pages(); }
  // Pages an allocation may hand out: the free ones and the cached ones.
  int32_t available_pages() const { return free_pages() + cached_pages(); }
  double utilization() const { return capacity_ ? double(used_pages()) / capacity_ : 0.0; }
  int32_t ref_count(int32_t page) const { return ref_counts_.at(page); }
  bool is_cached(int32_t page) const { return ref_counts_.at(page) == 0 && named_[size_t(page)]; }

  const KvLayout& layout() const { return layout_; }
  std::byte* page_data(int32_t page) { return arena() + size_t(page) * layout_.bytes_per_page(); }
  const std::byte* page_data(int32_t page) const { return arena() + size_t(page) * layout_.bytes_per_page(); }
  KvView view() const { return {arena(), layout_}; }

 private:
  std::byte* arena() const { return reinterpret_cast<std::byte*>(arena_.get()); }
  void check_page(int32_t page, const char* what) const;
  // The LRU of cached pages: an intrusive doubly linked list, oldest at the head.
  void lru_push_back(int32_t page);
  void lru_remove(int32_t page);
  int32_t evict_oldest();

  KvLayout layout_;
  int32_t capacity_;
  kernels::HugePageMemory arena_;
  std::vector<int32_t> free_list_;  // a stack: the most recently freed page is reused first
  std::vector<int32_t> ref_counts_;
  using Name = PageName;
  struct NameHasher {
    size_t operator()(const Name& n) const { return size_t(n.hash.low) ^ (size_t(n.group) * 0x9e3779b97f4a7c15ull); }
  };
  std::unordered_map<Name, int32_t, NameHasher> index_;  // (hash, group) → page
  std::vector<Name> names_;                              // names_[page] is its name while named_[page]
  std::vector<bool> named_;
  std::vector<int32_t> lru_prev_, lru_next_;
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int32_t n_cached_ = 0;
  int64_t evictions_ = 0;
  bool log_evictions_ = false;
  std::vector<PageName> evicted_;
};

}  // namespace pagoda
