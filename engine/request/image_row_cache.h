#pragma once
// The encoder rows of recent images, by the hash of their pixels, within a byte budget (least
// recently used out first): a conversation that sends an image again, or many requests with the
// same image, run its encoder once. Owned by the decode scheduler, which encodes images.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

namespace pagoda {

class ImageRowCache {
 public:
  using Rows = std::shared_ptr<const std::vector<float>>;

  explicit ImageRowCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // The rows of the image hashed `hash`, now the most recently used; null when not kept.
  Rows find(uint64_t hash);
  // Keeps `rows` as the most recently used, dropping the least recently used ones past the
  // budget (rows larger than the whole budget are not kept).
  void insert(uint64_t hash, Rows rows);

  size_t bytes() const { return bytes_; }
  size_t size() const { return index_.size(); }

 private:
  struct Entry {
    uint64_t hash;
    Rows rows;
  };
  size_t budget_;
  size_t bytes_ = 0;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
};

}  // namespace pagoda
