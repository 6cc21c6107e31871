#pragma once
// One request's grammar while it decodes (Request::grammar / json_schema): the matcher's state
// after the output so far, and the tokens it allows next, as the sampler's TokenFilter.
//
// The end-of-generation and stop tokens are allowed exactly when the text so far is a complete
// sentence of the grammar, so an output ended by one of them always parses. A lazy constraint
// (Request::grammar_triggers) lets the output run free until a trigger string appears in it,
// then feeds the matcher the text from the trigger's first byte on and constrains from there.
//
// Near the end of the token budget, the constraint closes the sentence: once the tokens left
// are no more than the bytes of the shortest completion (ShortestCompletion), only tokens that
// spell a prefix of that completion are allowed, each taking at least one byte of it, so the
// output ends as a whole sentence within max_new_tokens when the budget allows it at all.
// Before that, in the last steps where a token could lengthen the completion past the budget
// (opening a JSON member makes `}` into `":0}`), only tokens after which the completion still
// fits in the tokens left are allowed (BudgetMask). "The last steps" are judged from the
// longest live stack's completion plus kGrowthMargin bytes, more than one token of JSON syntax
// adds ({" or [{"); a grammar where a single token commits to a longer completion than that
// (an optional member whose value must be long) can still be cut.
//
// The state depends on the request's own tokens only, so a constrained request samples the
// same tokens whatever shares its batch. Owned by one Sequence; not thread-safe.

#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/grammar/budget_mask.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/shortest_completion.h"
#include "engine/sampling/token_constraint.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::grammar {

class TokenMask;

class GrammarConstraint final : public TokenConstraint {
 public:
  // Bytes one token may lengthen the completion past the longest live stack's own before the
  // guard is on (see above).
  static constexpr int64_t kGrowthMargin = 16;

  // `mask` is `grammar`'s over the tokenizer's vocabulary. `ending_ids`: the tokens that end
  // the output (the vocabulary's end-of-generation ids unless the request ignores them, and
  // its stop ids). `tokenizer` must outlive the constraint.
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenMask> mask,
                    const Tokenizer& tokenizer, std::vector<int32_t> ending_ids, std::vector<std::string> triggers);
  // Not copied or moved: budget_mask_ points at completion_.
  GrammarConstraint(const GrammarConstraint&) = delete;
  GrammarConstraint& operator=(const GrammarConstraint&) = delete;

  // False while a lazy constraint waits for its trigger: the sampler then needs no filter.
  bool active() const override { return active_; }

  // How many more tokens the output may have, counting the next: set before each step (and
  // after the token before it was accepted); without it the constraint never closes early.
  void set_budget(int32_t tokens_left) override;

  bool allows(int32_t token) override;
  std::span<const uint64_t> mask() override;

  // Advances past a drawn token (an ending token is not text and changes nothing). A token the
  // grammar refuses leaves the constraint allowing nothing more, which ends the output.
  void accept(int32_t token) override;

 private:
  bool is_ending(int32_t token) const;
  void look_for_trigger(size_t searched_from);
  // Whether the budget calls for closing (then closing_text_ is the completion to write), or
  // for guarding it (only tokens whose completion fits the tokens left after them).
  void update_closing();
  bool spells_closing_prefix(int32_t token) const;

  std::shared_ptr<const TokenMask> mask_;  // the grammar's, shared by its requests
  const Tokenizer* tokenizer_;
  std::vector<int32_t> ending_ids_;  // sorted
  std::vector<std::string> triggers_;
  GrammarMatcher matcher_;
  ShortestCompletion completion_;
  BudgetMask budget_mask_;
  bool active_;
  int32_t budget_ = INT32_MAX;
  bool guarding_ = false;
  bool closing_ = false;
  std::string closing_text_;
  bool dead_ = false;           // the grammar refused the text: nothing is allowed any more
  std::string untriggered_;     // a lazy constraint's output so far, searched for triggers
  std::vector<uint64_t> bits_;  // the last mask
  bool bits_valid_ = false;     // bits_ is the mask of the current state
};

}  // namespace pagoda::grammar
