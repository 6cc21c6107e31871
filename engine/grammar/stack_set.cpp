// GrammarMatcher's advance and expansion (engine/grammar/grammar_matcher.cpp), on flat reused
// buffers.

#include "engine/grammar/stack_set.h"

#include <algorithm>
#include <string>

#include "engine/grammar/grammar_matcher.h"
#include "pagoda/error.h"

namespace pagoda::grammar {

namespace {

uint64_t hash_stack(std::span<const uint32_t> stack) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ stack.size();
  for (const uint32_t p : stack) h = (h ^ p) * 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 32);
}

}  // namespace

void StackSet::clear() {
  positions.clear();
  ends.clear();
  hashes.clear();
  has_empty_stack = false;
}

void StackSet::add(std::span<const uint32_t> s) {
  const uint64_t h = hash_stack(s);
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (hashes[i] == h && std::ranges::equal(stack(i), s)) return;
  }
  if (ends.size() >= GrammarMatcher::kMaxStacks || positions.size() + s.size() > GrammarMatcher::kMaxPositions) {
    throw Error("grammar: more than " + std::to_string(GrammarMatcher::kMaxStacks) + " parse stacks or " +
                std::to_string(GrammarMatcher::kMaxPositions) + " positions; the grammar is too ambiguous to match");
  }
  positions.insert(positions.end(), s.begin(), s.end());
  ends.push_back(uint32_t(positions.size()));
  hashes.push_back(h);
  if (s.empty()) has_empty_stack = true;
}

PartialChar::Step PartialChar::step(uint8_t byte) {
  if (remaining == 0) {
    if (byte < 0x80) {
      value = byte;
      return Step::Complete;
    }
    length = byte >= 0xF0 && byte <= 0xF4 ? 4 : byte >= 0xE0 && byte <= 0xEF ? 3 : byte >= 0xC2 && byte <= 0xDF ? 2 : 0;
    if (length == 0) return Step::Invalid;
    remaining = uint8_t(length - 1);
    value = byte & (0x7F >> length);
    return Step::Pending;
  }
  if ((byte & 0xC0) != 0x80) return Step::Invalid;
  value = (value << 6) | (byte & 0x3F);
  if (--remaining != 0) return Step::Pending;
  if ((length == 3 && value < 0x800) || (length == 4 && value < 0x10000) || value > 0x10FFFF ||
      (value >= 0xD800 && value <= 0xDFFF)) {
    return Step::Invalid;
  }
  return Step::Complete;
}

bool PartialChar::interval(char32_t& lo, char32_t& hi) const {
  const unsigned missing_bits = 6u * remaining;
  const char32_t shortest = length == 4 ? 0x10000 : length == 3 ? 0x800 : 0x80;
  const char32_t first = value << missing_bits;
  lo = std::max(first, shortest);
  hi = std::min<char32_t>(first | ((char32_t(1) << missing_bits) - 1), 0x10FFFF);
  return lo <= hi;
}

// A depth-first walk with its own stack of frames, not the call stack: a chain of rules each
// referring to the next (one per line of grammar text) is followed up to kMaxExpansions deep.
void StackStepper::expand(StackSet& next) {
  const std::vector<Element>& elements = grammar_.elements;
  // Expands scratch_ if its top is a rule reference (a new frame), else adds it to `next`.
  const auto enter = [&] {
    if (budget_-- == 0) {
      throw Error("grammar: more than " + std::to_string(GrammarMatcher::kMaxExpansions) +
                  " expansion steps for one character; the grammar is too ambiguous to match");
    }
    if (scratch_.size() > GrammarMatcher::kMaxDepth) {
      throw Error("grammar: nesting deeper than " + std::to_string(GrammarMatcher::kMaxDepth) + " parse positions");
    }
    if (scratch_.empty() || elements[scratch_.back()].kind == Element::Kind::Chars) {
      next.add(scratch_);
      return;
    }
    // A rule reference: continue after it once the rule is done, and begin each alternative.
    const uint32_t at = scratch_.back();
    scratch_.pop_back();
    const bool continues = elements[at + 1].kind != Element::Kind::End;
    if (continues) scratch_.push_back(at + 1);
    frames_.push_back({.at = at, .continues = continues});
  };
  frames_.clear();  // what a throw left
  enter();
  while (!frames_.empty()) {
    Frame& f = frames_.back();
    if (f.alt_pushed) scratch_.pop_back();
    f.alt_pushed = false;
    const std::vector<uint32_t>& alts = grammar_.rule_alternatives[elements[f.at].index];
    if (f.next_alt == alts.size()) {
      // Done: scratch_ back as the frame found it.
      if (f.continues) scratch_.pop_back();
      scratch_.push_back(f.at);
      frames_.pop_back();
      continue;
    }
    const uint32_t alt = alts[f.next_alt++];
    if (elements[alt].kind != Element::Kind::End) {
      scratch_.push_back(alt);
      f.alt_pushed = true;
    }
    enter();  // may grow frames_: `f` is not used after it
  }
}

void StackStepper::advance(const StackSet& from, char32_t c, StackSet& next) {
  next.clear();
  budget_ = GrammarMatcher::kMaxExpansions;
  const std::vector<Element>& elements = grammar_.elements;
  for (size_t i = 0; i < from.size(); ++i) {
    const std::span<const uint32_t> s = from.stack(i);
    if (s.empty()) continue;
    const uint32_t top = s.back();
    if (!grammar_.classes[elements[top].index].matches(c)) continue;
    scratch_.assign(s.begin(), s.end() - 1);
    if (elements[top + 1].kind != Element::Kind::End) scratch_.push_back(top + 1);
    expand(next);
  }
}

void StackStepper::add_expanded(std::span<const uint32_t> stack, StackSet& next) {
  budget_ = GrammarMatcher::kMaxExpansions;
  scratch_.assign(stack.begin(), stack.end());
  expand(next);
}

bool StackStepper::any_top_matches_any_of(const StackSet& set, char32_t lo, char32_t hi) const {
  for (size_t i = 0; i < set.size(); ++i) {
    const std::span<const uint32_t> s = set.stack(i);
    if (!s.empty() && grammar_.classes[grammar_.elements[s.back()].index].matches_any_of(lo, hi)) return true;
  }
  return false;
}

}  // namespace pagoda::grammar
