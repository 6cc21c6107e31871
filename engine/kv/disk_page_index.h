#pragma once
// The disk tier's bookkeeping: which page files the directory holds, their sizes, and their
// order of use, within a byte budget (EngineConfig::kv_disk_bytes). Least recently used files
// go first when a new one does not fit; a file of another engine's fingerprint (another model,
// type or kernel) is never hit, so it ages out.
//
// Accounting only: the files themselves are written, read and removed by the disk-tier actor.
// Not thread-safe: the page-pool actor owns it.

#include <cstddef>
#include <list>
#include <unordered_map>
#include <vector>

#include "engine/kv/page_file.h"

namespace pagoda {

class DiskPageIndex {
 public:
  explicit DiskPageIndex(size_t budget_bytes) : budget_(budget_bytes) {}

  bool contains(const PageFileName& name) const { return entries_.count(name) > 0; }
  // Marks a file the most recently used.
  void touch(const PageFileName& name);
  // Records a file of `bytes` as the most recently used (or updates it); returns the files to
  // remove, oldest first, so that the rest fit within the budget (never the new one).
  std::vector<PageFileName> insert(const PageFileName& name, size_t bytes);
  // Forgets a file; false when it was not recorded.
  bool erase(const PageFileName& name);

  size_t bytes() const { return bytes_; }
  size_t files() const { return entries_.size(); }
  size_t budget() const { return budget_; }

 private:
  struct Entry {
    size_t bytes;
    std::list<PageFileName>::iterator at;  // its place in order_
  };
  size_t budget_;
  size_t bytes_ = 0;
  std::list<PageFileName> order_;  // least recently used first
  std::unordered_map<PageFileName, Entry, PageFileNameHasher> entries_;
};

}  // namespace pagoda
