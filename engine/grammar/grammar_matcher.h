#pragma once
// Incremental acceptance of text by a Grammar, as llama.cpp's stack-based matcher does it: the
// state is the set of parse stacks still alive, each a list of positions in the grammar's
// flat element array whose top is the character class the next code point must match (an
// empty stack means `root` is complete). Accepting a code point advances every stack whose
// top matches it and expands rule references until each top is a class again.
//
// A sampler clones the matcher for each candidate token, so the stacks live in two flat
// vectors (copying is two memcpys) and the grammar is shared. The state is bounded: more
// than kMaxStacks stacks, kMaxPositions positions in all, or kMaxExpansions expansion steps
// for one code point means the grammar is too ambiguous to match, and a stack deeper than
// kMaxDepth (nesting, each level copied on every step) is too deep; accept then throws
// pagoda::Error rather than eating memory and time.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar.h"

namespace pagoda::grammar {

class GrammarMatcher {
 public:
  static constexpr size_t kMaxStacks = 4096;
  static constexpr size_t kMaxPositions = size_t(1) << 20;
  static constexpr size_t kMaxExpansions = size_t(1) << 16;
  static constexpr size_t kMaxDepth = 8192;

  // Starts at the beginning of `root`. Throws pagoda::Error if even that exceeds the bounds.
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Advances by one code point; false (and the state unchanged) if the grammar cannot
  // continue with it, or if a partial UTF-8 character is pending.
  bool accept(char32_t code_point);

  // Advances by a token's bytes. The bytes may end inside a multi-byte UTF-8 character: the
  // leading bytes are kept pending until the next call completes them, and are accepted only
  // if some code point they can still become is allowed. False (and the state unchanged) for
  // invalid UTF-8 or text the grammar rejects.
  bool accept_utf8(std::string_view bytes);

  // Whether accept_utf8(bytes) would succeed, leaving this matcher as it is.
  bool accepts_utf8_prefix(std::string_view bytes) const;

  // Whether the text so far is a complete `root` (no partial character pending).
  bool can_end() const;

  // Live parse stacks: how ambiguous the grammar is at this point.
  size_t stack_count() const { return stack_ends_.size(); }

  // The live stacks themselves, for engine/grammar/token_mask: stack i is
  // stack_positions()[i == 0 ? 0 : stack_ends()[i - 1], stack_ends()[i]), bottom first, its
  // top a Chars element; an empty stack means `root` is complete. Sorted, no duplicates.
  std::span<const uint32_t> stack_positions() const { return positions_; }
  std::span<const uint32_t> stack_ends() const { return stack_ends_; }
  // Whether the last bytes accepted stopped inside a UTF-8 character.
  bool has_partial_char() const { return pending_remaining_ != 0; }
  // Bytes naming the state (the stacks and any partial character): two matchers of one grammar
  // with equal keys accept the same texts from here.
  std::string state_key() const;
  const Grammar& grammar() const { return *grammar_; }

 private:
  using Stack = std::vector<uint32_t>;

  // The stack set after `code_point`, or false (leaving the set untouched) if none survives.
  bool advance(char32_t code_point);
  // Adds `stack` and everything its top rule reference expands to, until each top is a
  // character class, to the next stack set (deduplicated).
  void expand(Stack stack, std::vector<Stack>& next, size_t& budget) const;
  // Replaces the stack set with `stacks` (deduplicated), or throws past the bounds.
  void store(std::vector<Stack> stacks);
  bool step_byte(uint8_t byte);
  bool pending_is_viable() const;
  const CharClass& top_class(size_t stack) const;

  std::shared_ptr<const Grammar> grammar_;
  std::vector<uint32_t> positions_;   // the stacks back to back, bottom first
  std::vector<uint32_t> stack_ends_;  // where each stack ends in positions_
  char32_t pending_value_ = 0;        // bits of a partial UTF-8 character so far
  uint8_t pending_remaining_ = 0;     // continuation bytes it still needs
  uint8_t pending_length_ = 0;        // its full length in bytes
};

}  // namespace pagoda::grammar
