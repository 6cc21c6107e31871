// A list in recency order and an index into it; parsing happens outside the lock, so a slow
// grammar does not hold up requests for others.

#include "engine/grammar/token_mask_cache.h"

#include "engine/grammar/gbnf_parser.h"
#include "pagoda/error.h"

namespace pagoda::grammar {

TokenMaskCache::TokenMaskCache(std::shared_ptr<const TokenTrie> trie, size_t capacity)
    : trie_(std::move(trie)), capacity_(capacity) {
  if (!trie_) throw Error("grammar: a token mask cache needs a token trie");
  if (capacity_ == 0) throw Error("grammar: a token mask cache must hold at least one grammar");
}

std::shared_ptr<const TokenMask> TokenMaskCache::get(std::string_view gbnf) {
  {
    std::lock_guard lock(mutex_);
    const auto it = index_.find(gbnf);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  auto mask = std::make_shared<const TokenMask>(std::make_shared<const Grammar>(parse_gbnf(gbnf)), trie_);
  std::lock_guard lock(mutex_);
  const auto it = index_.find(gbnf);
  if (it != index_.end()) {  // another thread made it meanwhile: share that one
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  lru_.emplace_front(std::string(gbnf), mask);
  index_.emplace(lru_.front().first, lru_.begin());
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return mask;
}

size_t TokenMaskCache::size() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

}  // namespace pagoda::grammar
