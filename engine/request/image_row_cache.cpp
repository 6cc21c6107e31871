#include "engine/request/image_row_cache.h"

namespace pagoda {

namespace {
size_t bytes_of(const ImageRowCache::Rows& rows) { return rows->size() * sizeof(float); }
}  // namespace

ImageRowCache::Rows ImageRowCache::find(uint64_t hash) {
  const auto it = index_.find(hash);
  if (it == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->rows;
}

void ImageRowCache::insert(uint64_t hash, Rows rows) {
  if (!rows || bytes_of(rows) > budget_) return;
  if (const auto it = index_.find(hash); it != index_.end()) {
    bytes_ -= bytes_of(it->second->rows);
    order_.erase(it->second);
    index_.erase(it);
  }
  bytes_ += bytes_of(rows);
  order_.push_front({hash, std::move(rows)});
  index_[hash] = order_.begin();
  while (bytes_ > budget_) {
    bytes_ -= bytes_of(order_.back().rows);
    index_.erase(order_.back().hash);
    order_.pop_back();
  }
}

}  // namespace pagoda
