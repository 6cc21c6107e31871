#pragma once
// Which tokens of a vocabulary a grammar allows next: the mask a sampler applies to the logits
// at each decode step of a grammar-constrained request. Token t is allowed in matcher state s
// iff it is not excluded by the trie (control, end-of-generation, empty tokens) and
// s.accepts_utf8_prefix(its bytes); the end-of-generation tokens are the sampler's business
// (allowed iff s.can_end()). The mask is exactly that, computed fast:
//
// The state is a set of parse stacks, and what a stack does with a token depends on its top
// positions only until the rules there complete. So the top positions of a stack (its key)
// sort every token once into accepted, refused, or dependent on what lies below the key
// (engine/grammar/token_classes.h), and the sorting is kept per key: the mask is the union over
// the live stacks of their keys' accepted tokens, plus any dependent token checked against the
// whole state. This is xgrammar's adaptive token mask cache, keyed by stack tops rather than
// single positions: GBNF's helper rules for groups and repetitions complete after one
// character, so one position would leave nearly every token inside a JSON string dependent.
//
// Two depths: the top walk_depth positions are sorted by one walk of the token trie (a JSON
// string's content: the same walk in every string), and the key, the top key_depth positions
// (the whole stack when it is no deeper), refines that walk's dependent tokens alone. Entries
// are made the first time their key occurs. A stack deeper than key_depth leaves a few tokens
// dependent. A state inside a partial UTF-8 character (a token ended mid-character) is
// checked token by token, but only tokens that start with a continuation byte can follow it.
//
// One TokenMask per (grammar, vocabulary), shared by every request using that grammar (see
// TokenMaskCache); safe to use from several threads at once. Entries are kept up to
// kMaxEntryBytes in all (a JSON grammar's stay near 1 MB); past that a new key's entry is
// made for the call and dropped.

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_classes.h"
#include "engine/grammar/token_trie.h"

namespace pagoda::grammar {

class TokenMask {
 public:
  // Three positions hold a JSON string's character, its repetition and its closing quote.
  static constexpr size_t kDefaultWalkDepth = 3;
  static constexpr size_t kDefaultKeyDepth = 32;
  static constexpr size_t kMaxEntryBytes = size_t(16) << 20;

  // 1 <= walk_depth <= key_depth, else pagoda::Error.
  TokenMask(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
            size_t walk_depth = kDefaultWalkDepth, size_t key_depth = kDefaultKeyDepth);

  // bits is resized to words() and overwritten: bit i (bits[i / 64] >> (i % 64)) set iff
  // token i is allowed in `state`. Throws pagoda::Error where the matcher would (a grammar too
  // ambiguous or too deep), and when `state` runs another Grammar object than grammar().
  void fill_mask(const GrammarMatcher& state, std::vector<uint64_t>& bits) const;

  // Whether one token is allowed in `state`, far cheaper than the whole mask: for checking
  // the sampled token first and computing the mask only when it is refused.
  bool allows(const GrammarMatcher& state, int32_t token) const;

  // 64-bit words in a mask: (vocab_size + 63) / 64.
  size_t words() const { return (size_t(trie_->vocab_size()) + 63) / 64; }
  const TokenTrie& trie() const { return *trie_; }
  // The grammar the matchers given to fill_mask and allows must run.
  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  // Entries made so far (walks and keys), and the bytes they hold.
  size_t cached_entries() const;
  size_t cached_bytes() const;

 private:
  // The classes for the top positions of one stack (`stack` is the whole stack).
  std::shared_ptr<const TokenClasses> classes_for(std::span<const uint32_t> stack) const;
  std::shared_ptr<const TokenClasses> find(const std::string& key) const;
  std::shared_ptr<const TokenClasses> keep(const std::string& key, std::shared_ptr<const TokenClasses> classes,
                                           bool owns_bitset) const;
  void fill_after_partial_char(const GrammarMatcher& state, std::vector<uint64_t>& bits) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  size_t walk_depth_;
  size_t key_depth_;
  mutable std::shared_mutex mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const TokenClasses>> entries_;
  mutable size_t entry_bytes_ = 0;
};

}  // namespace pagoda::grammar
