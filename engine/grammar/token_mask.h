#pragma once
// Which tokens of a vocabulary a grammar allows next: the mask a sampler applies to the logits
// at each decode step of a grammar-constrained request. Token t is allowed in matcher state s
// iff it is not excluded by the trie (control, end-of-generation, empty tokens) and
// s.accepts_utf8_prefix(its bytes); the end-of-generation tokens are the sampler's business
// (allowed iff s.can_end()). The mask is exactly that, computed fast:
//
// The state is a set of parse stacks. What a stack does with a token depends on its top
// positions only until the rule at the bottom of those positions completes. So for the top
// key_depth positions of a stack (its key), one walk of the token trie, pruned at each byte
// the key rejects, sorts every token into: accepted whatever lies below the key (consumed
// before the key's positions are used up), rejected whatever lies below, or dependent on what
// lies below (the key's positions are used up inside the token). A key that is a whole stack
// has nothing below, so it leaves nothing dependent. The entry is computed the first time its
// key occurs and kept (in xgrammar's terms, an adaptive token mask cache over stack suffixes
// rather than single positions: GBNF's helper rules for groups and repetitions complete after
// one character, so a single position would leave nearly every token inside a JSON string
// dependent). The mask is then the union over the live stacks of their accepted tokens, plus
// each dependent token checked against the whole state. A state inside a partial UTF-8
// character (rare: a token ended mid-character) is checked token by token, but only tokens
// that start with a continuation byte can follow it.
//
// One TokenMask per (grammar, vocabulary), shared by every request using that grammar (see
// TokenMaskCache); safe to use from several threads at once. At most kMaxEntries keys are
// kept; past that a new key's entry is computed for the call and dropped.

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_trie.h"

namespace pagoda::grammar {

class TokenMask {
 public:
  // Eight positions hold a JSON string's rules with the object or array around it, so a
  // string's tokens that close it and go on (`",`) are rarely left dependent.
  static constexpr size_t kDefaultKeyDepth = 8;
  static constexpr size_t kMaxEntries = 2048;

  // key_depth (at least 1): how many top positions of a stack key an entry. Deeper keys leave
  // fewer tokens dependent but occur in more variants, each built once.
  TokenMask(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
            size_t key_depth = kDefaultKeyDepth);

  // bits is resized to words() and overwritten: bit i (bits[i / 64] >> (i % 64)) set iff
  // token i is allowed in `state`. `state` must match this mask's grammar. Throws
  // pagoda::Error where the matcher would (a grammar too ambiguous or too deep), and when
  // `state` runs another Grammar object than grammar().
  void fill_mask(const GrammarMatcher& state, std::vector<uint64_t>& bits) const;

  // Whether one token is allowed in `state`, far cheaper than the whole mask: for checking
  // the sampled token first and computing the mask only when it is refused.
  bool allows(const GrammarMatcher& state, int32_t token) const;

  // 64-bit words in a mask: (vocab_size + 63) / 64.
  size_t words() const { return (size_t(trie_->vocab_size()) + 63) / 64; }
  const TokenTrie& trie() const { return *trie_; }
  // The grammar the matchers given to fill_mask and allows must run.
  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  // Keys whose tokens have been sorted so far.
  size_t cached_entries() const;

 private:
  struct Entry;

  std::shared_ptr<const Entry> entry_for(const std::string& key, std::span<const uint32_t> positions, bool whole) const;
  std::shared_ptr<const Entry> compute_entry(std::span<const uint32_t> positions, bool whole) const;
  void fill_after_partial_char(const GrammarMatcher& state, std::vector<uint64_t>& bits) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  size_t key_depth_;
  mutable std::shared_mutex mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Entry>> entries_;
};

}  // namespace pagoda::grammar
