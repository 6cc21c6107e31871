#pragma once
// The shortest text that completes a grammar's sentence from a matcher's state, so an output
// nearing its token budget can still be closed into a whole sentence (a JSON document whose
// brackets all close) instead of being cut off mid-value.
//
// Computed once per grammar: each rule's cheapest expansion in bytes (rules settled cheapest
// first, so a rule's chosen alternative names only rules settled before it and following the
// choices always terminates), with each character class written as one representative
// character (printable ASCII where the class has one). A state's completion is then the
// cheapest of its stacks': each stack position's rest of its alternative, top first.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"

namespace pagoda::grammar {

class ShortestCompletion {
 public:
  static constexpr size_t kMaxBytes = size_t(1) << 16;

  explicit ShortestCompletion(std::shared_ptr<const Grammar> grammar);

  // The shortest text after which `state`'s text is a complete sentence: empty when it already
  // is; nullopt when no completion is known (a partial UTF-8 character pending, no live stack,
  // or a completion longer than kMaxBytes). `state` must run this grammar.
  std::optional<std::string> of(const GrammarMatcher& state) const;
  // The byte length of of(state), without writing it (what a decode step asks each time).
  std::optional<size_t> length(const GrammarMatcher& state) const;
  // The longest of the live stacks' own completions (stacks that cannot complete left out);
  // nullopt as for length(). A token that commits to one stack starts from at most this.
  std::optional<size_t> longest_stack_length(const GrammarMatcher& state) const;

 private:
  static constexpr uint64_t kNever = UINT64_MAX / 4;

  // Each rule's cheapest expansion in bytes and the alternative that gives it.
  void settle_rule_costs();
  // Bytes to complete stack `stack` of `state` (kNever when it cannot complete).
  uint64_t stack_cost(const GrammarMatcher& state, size_t stack) const;
  // The stack with the cheapest completion and its cost in bytes; stack_ends().size() when none.
  size_t best_stack(const GrammarMatcher& state, uint64_t& cost) const;
  // Bytes from element `position` to the end of its alternative, choosing each rule's cheapest.
  uint64_t rest_cost(uint32_t position) const;
  void write_rest(uint32_t position, std::string& out) const;

  std::shared_ptr<const Grammar> grammar_;
  std::vector<std::string> representative_;  // per class: one character it matches, UTF-8
  std::vector<uint64_t> rule_cost_;
  std::vector<uint32_t> rule_choice_;  // per rule: the start of its cheapest alternative
};

}  // namespace pagoda::grammar
