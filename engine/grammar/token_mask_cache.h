#pragma once
// The TokenMasks of the grammars used recently with one vocabulary, so that requests with the
// same grammar (or JSON schema, once compiled to GBNF) share one parsed Grammar and one set of
// precomputed entries instead of building them again. Keyed by the grammar's text; at most
// `capacity` grammars are kept, the least recently used dropped first (a request still holding
// its mask keeps it alive). Thread-safe: any number of threads may call get() at once.

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "engine/grammar/token_mask.h"
#include "engine/grammar/token_trie.h"

namespace pagoda::grammar {

class TokenMaskCache {
 public:
  explicit TokenMaskCache(std::shared_ptr<const TokenTrie> trie, size_t capacity = 16);

  // The mask for the GBNF text `gbnf` (matchers for it: GrammarMatcher(mask->grammar())),
  // parsed and made on first use. Throws the parser's pagoda::Error for a bad grammar.
  std::shared_ptr<const TokenMask> get(std::string_view gbnf);

  size_t size() const;
  const std::shared_ptr<const TokenTrie>& trie() const { return trie_; }

 private:
  using Lru = std::list<std::pair<std::string, std::shared_ptr<const TokenMask>>>;  // most recent first

  std::shared_ptr<const TokenTrie> trie_;
  size_t capacity_;
  mutable std::mutex mutex_;
  Lru lru_;
  std::unordered_map<std::string_view, Lru::iterator> index_;  // views of the texts in lru_
};

}  // namespace pagoda::grammar
