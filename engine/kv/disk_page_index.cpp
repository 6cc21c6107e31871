#include "engine/kv/disk_page_index.h"

namespace pagoda {

void DiskPageIndex::touch(const PageFileName& name) {
  auto it = entries_.find(name);
  if (it != entries_.end()) order_.splice(order_.end(), order_, it->second.at);
}

std::vector<PageFileName> DiskPageIndex::insert(const PageFileName& name, size_t bytes) {
  if (auto it = entries_.find(name); it != entries_.end()) {
    bytes_ -= it->second.bytes;
    it->second.bytes = bytes;
    bytes_ += bytes;
    touch(name);
  } else {
    order_.push_back(name);
    entries_.emplace(name, Entry{bytes, std::prev(order_.end())});
    bytes_ += bytes;
  }
  std::vector<PageFileName> evicted;
  while (bytes_ > budget_ && order_.front() != name) {
    const PageFileName oldest = order_.front();
    erase(oldest);
    evicted.push_back(oldest);
  }
  return evicted;
}

bool DiskPageIndex::erase(const PageFileName& name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  order_.erase(it->second.at);
  entries_.erase(it);
  return true;
}

}  // namespace pagoda
