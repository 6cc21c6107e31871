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
// kept, so the walk is mostly table lookups: the text inside a JSON string returns to one state
// after every character. The tables belong to one request (one decode at a time); not
// thread-safe.

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
  static constexpr size_t kMaxStates = 1 << 14;  // past this the tables start over

  struct State {
    GrammarMatcher matcher;
    std::optional<size_t> completion;  // its shortest completion's length
  };

  int32_t intern(GrammarMatcher matcher);
  // The state after `byte`, or -1 when the grammar refuses it.
  int32_t next(int32_t state, uint8_t byte);

  const TokenTrie* trie_;
  const ShortestCompletion* completion_;
  std::vector<State> states_;
  std::unordered_map<std::string, int32_t> ids_;        // state_key -> index in states_
  std::unordered_map<uint64_t, int32_t> transitions_;  // state << 8 | byte -> next state or -1
};

}  // namespace pagoda::grammar
