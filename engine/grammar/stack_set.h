#pragma once
// Parse stacks stepped exactly as GrammarMatcher steps its own, but built for the token mask's
// trie walks, which advance millions of times per precomputation: a StackSet is flat and
// reused (no allocation once warm), duplicates are found by hash as stacks are added, and a
// rule reference is expanded depth-first over a single scratch stack (with its own frame
// stack, not the call stack) instead of a work list of copies. The same bounds apply
// (GrammarMatcher::kMax*), with the same errors.
//
// PartialChar is the matcher's pending UTF-8 character: the same byte rules (no overlong
// forms, surrogates or code points above U+10FFFF) and the same interval of code points it
// can still become.

#include <cstdint>
#include <span>
#include <vector>

#include "engine/grammar/grammar.h"

namespace pagoda::grammar {

// Stacks back to back, bottom first, each top a Chars element (or an empty stack: the
// enclosing rule, or `root`, is complete). No duplicates.
struct StackSet {
  std::vector<uint32_t> positions;
  std::vector<uint32_t> ends;    // where each stack ends in positions
  std::vector<uint64_t> hashes;  // of each stack, to find duplicates
  bool has_empty_stack = false;

  size_t size() const { return ends.size(); }
  bool empty() const { return ends.empty(); }
  std::span<const uint32_t> stack(size_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    return std::span<const uint32_t>(positions).subspan(begin, ends[i] - begin);
  }
  void clear();
  // Adds `stack` unless the set holds it already.
  void add(std::span<const uint32_t> stack);
};

struct PartialChar {
  enum class Step : uint8_t { Invalid, Pending, Complete };

  char32_t value = 0;     // the bits so far; the code point once Complete
  uint8_t remaining = 0;  // continuation bytes still needed
  uint8_t length = 0;     // the character's length in bytes

  bool pending() const { return remaining != 0; }
  // Reads one byte of UTF-8. Complete: `value` is a valid code point and nothing is pending.
  Step step(uint8_t byte);
  // The code points a pending character can still become; false if none is valid.
  bool interval(char32_t& lo, char32_t& hi) const;
};

class StackStepper {
 public:
  explicit StackStepper(const Grammar& grammar) : grammar_(grammar) {}

  // `next` becomes every stack of `from` whose top matches `c`, advanced past it and expanded
  // until each top is a character class (empty stacks of `from` cannot advance). Throws
  // pagoda::Error past GrammarMatcher's bounds.
  void advance(const StackSet& from, char32_t c, StackSet& next);

  // Adds `stack` to `next`, expanded if its top is a rule reference.
  void add_expanded(std::span<const uint32_t> stack, StackSet& next);

  // Whether some stack's top matches a code point in [lo, hi].
  bool any_top_matches_any_of(const StackSet& set, char32_t lo, char32_t hi) const;

  const Grammar& grammar() const { return grammar_; }

 private:
  // Expands scratch_ into `next` and leaves scratch_ as it found it.
  void expand(StackSet& next);

  // One rule reference being expanded by expand(): its alternatives are begun one by one.
  struct Frame {
    uint32_t at = 0;          // the reference's position (popped from scratch_ meanwhile)
    bool continues = false;   // at + 1 was pushed, to go on after the rule
    bool alt_pushed = false;  // the alternative being expanded is on scratch_
    size_t next_alt = 0;
  };

  const Grammar& grammar_;
  std::vector<uint32_t> scratch_;
  std::vector<Frame> frames_;
  size_t budget_ = 0;
};

}  // namespace pagoda::grammar
