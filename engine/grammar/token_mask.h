#pragma once
// Which tokens of a vocabulary a grammar allows next: the mask a sampler applies to the logits
// at each decode step of a grammar-constrained request. Token t is allowed in matcher state s
// iff it is not excluded by the trie (control, end-of-generation, empty tokens) and
// s.accepts_utf8_prefix(its bytes); the end-of-generation tokens are the sampler's business
// (allowed iff s.can_end()).
//
// One TokenMask per (grammar, vocabulary), shared by every request using that grammar; it is
// immutable from the outside and safe to use from several threads at once.

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_trie.h"

namespace pagoda::grammar {

class TokenMask {
 public:
  TokenMask(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  // bits is resized to words() and overwritten: bit i (bits[i / 64] >> (i % 64)) set iff
  // token i is allowed in `state`. `state` must match this mask's grammar.
  void fill_mask(const GrammarMatcher& state, std::vector<uint64_t>& bits) const;

  // Whether one token is allowed in `state`, far cheaper than the whole mask: for checking
  // the sampled token first and computing the mask only when it is refused.
  bool allows(const GrammarMatcher& state, int32_t token) const;

  // 64-bit words in a mask: (vocab_size + 63) / 64.
  size_t words() const { return (size_t(trie_->vocab_size()) + 63) / 64; }
  const TokenTrie& trie() const { return *trie_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
};

}  // namespace pagoda::grammar
