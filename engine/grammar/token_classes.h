#pragma once
// How the top positions of a parse stack (a key) sort a vocabulary's tokens, the precomputation
// behind TokenMask (engine/grammar/token_mask.h):
//   accepted   consumed by the key's own positions, whatever lies below them in the stack;
//   refused    whatever lies below (not in either list);
//   dependent  the key's positions are used up inside the token (its rules complete), so
//              whether the rest is accepted depends on what lies below.
// A whole key (the entire stack) has nothing below it: using it up ends the text, so it leaves
// no token dependent.
//
// classify_by_walk walks the whole token trie once, pruning every subtree at the first byte the
// key refuses. refine sorts again only the dependent tokens of a shallower key, for a deeper
// key that extends it downwards: the shallower key's accepted and refused tokens keep their
// class (the extra positions are reached only once the shallower ones are used up), so a deep
// key costs a few hundred token checks instead of a walk, and shares the walk's bitset.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/token_trie.h"

namespace pagoda::grammar {

struct TokenClasses {
  // Accepted: the tokens in accepted_bits (one bit per token; null when there are too few to
  // be worth a bitset, and shared by the keys refined from the same walk) and in accepted_ids.
  std::shared_ptr<const std::vector<uint64_t>> accepted_bits;
  std::vector<int32_t> accepted_ids;  // sorted
  std::vector<int32_t> dependent;     // sorted

  // Bytes held (a shared bitset counted by whoever made it).
  size_t bytes(bool count_bitset) const;
};

// `key`: stack positions, bottom first, the top a Chars element. Throws pagoda::Error past
// GrammarMatcher's bounds.
TokenClasses classify_by_walk(const TokenTrie& trie, const Grammar& grammar, std::span<const uint32_t> key, bool whole);

// `key` must end with the key `shallower` was made for (and be longer).
TokenClasses refine(const TokenClasses& shallower, const TokenTrie& trie, const Grammar& grammar,
                    std::span<const uint32_t> key, bool whole);

}  // namespace pagoda::grammar
