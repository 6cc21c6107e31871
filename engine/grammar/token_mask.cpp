// Every token checked against a copy of the state.

#include "engine/grammar/token_mask.h"

#include <utility>

namespace pagoda::grammar {

TokenMask::TokenMask(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)), trie_(std::move(trie)) {}

void TokenMask::fill_mask(const GrammarMatcher& state, std::vector<uint64_t>& bits) const {
  bits.assign(words(), 0);
  for (int32_t id = 0; id < trie_->vocab_size(); ++id) {
    if (allows(state, id)) bits[size_t(id) / 64] |= uint64_t(1) << (id % 64);
  }
}

bool TokenMask::allows(const GrammarMatcher& state, int32_t token) const {
  return !trie_->excluded(token) && state.accepts_utf8_prefix(trie_->token(token));
}

}  // namespace pagoda::grammar
