#pragma once
// A context-free grammar over Unicode code points, in the shape llama.cpp's stack-based
// matcher runs: every rule is a list of alternatives, every alternative a sequence of
// elements, and an element is either a character class (one code point) or a reference to a
// rule. Repetitions and groups do not appear here: the GBNF parser rewrites them into helper
// rules (engine/grammar/gbnf_parser.h), so the matcher only ever sees these two kinds.
//
// The elements of all alternatives live in one flat array, each alternative ended by an End
// element, so a position inside a rule is a single index: the matcher's stacks are vectors of
// such indices.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::grammar {

// A set of code points: sorted, disjoint, non-adjacent inclusive ranges, or everything but
// them when negated. A literal character is a one-point class; `.` is an empty negated one.
struct CharClass {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  bool negated = false;

  bool matches(char32_t c) const {
    for (const auto& [lo, hi] : ranges) {
      if (c < lo) break;
      if (c <= hi) return !negated;
    }
    return negated;
  }

  // Whether some code point in [lo, hi] matches: a partial UTF-8 character at the end of a
  // token can still become any code point of that interval.
  bool matches_any_of(char32_t lo, char32_t hi) const {
    for (const auto& [a, b] : ranges) {
      if (negated && a <= lo && hi <= b) return false;  // the whole interval is excluded
      if (!negated && a <= hi && lo <= b) return true;
    }
    return negated;
  }
};

struct Element {
  enum class Kind : uint8_t { Chars, Rule, End };
  Kind kind;
  uint32_t index;  // into Grammar::classes (Chars) or the rules (Rule); unused for End
};

struct Grammar {
  std::vector<CharClass> classes;
  std::vector<Element> elements;                         // every alternative's elements, each followed by End
  std::vector<std::vector<uint32_t>> rule_alternatives;  // per rule: where each alternative starts
  std::vector<std::string> rule_names;                   // as written, or "<rule>_<n>" for a helper rule
  uint32_t root = 0;
};

}  // namespace pagoda::grammar
