#pragma once
// The tokens after which a grammar's sentence can still be closed within the token budget: those
// the grammar allows whose text leaves a shortest completion (ShortestCompletion) of at most
// `limit` bytes, the tokens left after it (each later token writes at least one byte of it).
//
// GrammarConstraint asks for it in the last steps before it must close: a token that opens
// something ({" in a JSON object, whose completion is then ":0} rather than }) can lengthen
// the completion past what the budget can still write, and a sentence cut there is not whole.
// A token ending inside a UTF-8 character has no known completion and is refused.
//
// The vocabulary trie is walked with the matcher states interned and their byte transitions
// kept in a table per state, so the walk is mostly array lookups: the text inside a JSON string returns to one state
// after every character. The tables belong to one request (one decode at a time); not
// thread-safe.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/shortest_completion.h"
#include "engine/grammar/token_trie.h"

namespace pagoda::grammar {

class BudgetMask {
 public:
  // `trie` and `completion` (of the matchers' grammar) must outlive this.
  BudgetMask(const TokenTrie& trie, const ShortestCompletion& completion);

  // bits (resized to the trie's words) gets exactly the tokens allowed in `state` that leave a
  // completion of at most `limit` bytes.
  void fill(const GrammarMatcher& state, size_t limit, std::vector<uint64_t>& bits);
  // The same for one token.
  bool allows(const GrammarMatcher& state, int32_t token, size_t limit) const;

 private:
  static constexpr size_t kMaxStates = 2048;  // past this (2 MB of transitions) the tables start over
  static constexpr int32_t kRefused = -1;
  static constexpr int32_t kUnknown = -2;

  struct State {
    GrammarMatcher matcher;
    std::optional<size_t> completion;  // its shortest completion's length
    std::array<int32_t, 256> next;     // per byte: the next state, kRefused, or kUnknown yet
  };

  int32_t intern(GrammarMatcher matcher);
  // The state after `byte`, or kRefused.
  int32_t next(int32_t state, uint8_t byte);

  const TokenTrie* trie_;
  const ShortestCompletion* completion_;
  std::vector<State> states_;
  std::unordered_map<std::string, int32_t> ids_;  // state_key -> index in states_
};

}  // namespace pagoda::grammar
