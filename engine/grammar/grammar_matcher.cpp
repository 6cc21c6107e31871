// The stack set, advanced one code point at a time; UTF-8 is decoded here so a token's bytes
// can stop mid-character.

#include "engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <string>
#include <utility>

#include "pagoda/error.h"

namespace pagoda::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  std::vector<Stack> start;
  size_t budget = kMaxExpansions;
  for (const uint32_t alt : grammar_->rule_alternatives[grammar_->root]) {
    Stack stack;
    if (grammar_->elements[alt].kind != Element::Kind::End) stack.push_back(alt);
    expand(std::move(stack), start, budget);
  }
  store(std::move(start));
}

void GrammarMatcher::store(std::vector<Stack> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  size_t total = 0;
  for (const Stack& s : stacks) total += s.size();
  if (stacks.size() > kMaxStacks || total > kMaxPositions) {
    throw Error("grammar: more than " + std::to_string(kMaxStacks) + " parse stacks or " +
                std::to_string(kMaxPositions) + " positions; the grammar is too ambiguous to match");
  }
  positions_.clear();
  stack_ends_.clear();
  for (const Stack& s : stacks) {
    positions_.insert(positions_.end(), s.begin(), s.end());
    stack_ends_.push_back(uint32_t(positions_.size()));
  }
}

const CharClass& GrammarMatcher::top_class(size_t stack) const {
  return grammar_->classes[grammar_->elements[positions_[stack_ends_[stack] - 1]].index];
}

void GrammarMatcher::expand(Stack stack, std::vector<Stack>& next, size_t& budget) const {
  const std::vector<Element>& elements = grammar_->elements;
  std::vector<Stack> work;
  work.push_back(std::move(stack));
  while (!work.empty()) {
    if (budget-- == 0) {
      throw Error("grammar: more than " + std::to_string(kMaxExpansions) +
                  " expansion steps for one character; the grammar is too ambiguous to match");
    }
    Stack s = std::move(work.back());
    work.pop_back();
    if (s.size() > kMaxDepth)
      throw Error("grammar: nesting deeper than " + std::to_string(kMaxDepth) + " parse positions");
    if (s.empty() || elements[s.back()].kind == Element::Kind::Chars) {
      next.push_back(std::move(s));
      // Duplicates are only removed in store(); this bounds the memory before that.
      if (next.size() > 4 * kMaxStacks) {
        throw Error("grammar: more than " + std::to_string(kMaxStacks) +
                    " parse stacks; the grammar is too ambiguous to match");
      }
      continue;
    }
    // A rule reference: continue after it once the rule is done, and begin each alternative.
    const uint32_t at = s.back();
    s.pop_back();
    if (elements[at + 1].kind != Element::Kind::End) s.push_back(at + 1);
    for (const uint32_t alt : grammar_->rule_alternatives[elements[at].index]) {
      Stack t = s;
      if (elements[alt].kind != Element::Kind::End) t.push_back(alt);
      work.push_back(std::move(t));
    }
  }
}

bool GrammarMatcher::advance(char32_t code_point) {
  const std::vector<Element>& elements = grammar_->elements;
  std::vector<Stack> next;
  size_t budget = kMaxExpansions;
  uint32_t begin = 0;
  for (size_t i = 0; i < stack_ends_.size(); begin = stack_ends_[i++]) {
    const uint32_t end = stack_ends_[i];
    if (begin == end || !top_class(i).matches(code_point)) continue;
    Stack s(positions_.begin() + begin, positions_.begin() + end - 1);
    const uint32_t top = positions_[end - 1];
    if (elements[top + 1].kind != Element::Kind::End) s.push_back(top + 1);
    expand(std::move(s), next, budget);
  }
  if (next.empty()) return false;
  store(std::move(next));
  return true;
}

bool GrammarMatcher::accept(char32_t code_point) {
  if (pending_remaining_ != 0) return false;
  return advance(code_point);
}

bool GrammarMatcher::step_byte(uint8_t byte) {
  if (pending_remaining_ == 0) {
    if (byte < 0x80) return advance(byte);
    const int length = byte >= 0xF0 && byte <= 0xF4   ? 4
                       : byte >= 0xE0 && byte <= 0xEF ? 3
                       : byte >= 0xC2 && byte <= 0xDF ? 2
                                                      : 0;
    if (length == 0) return false;
    pending_length_ = uint8_t(length);
    pending_remaining_ = uint8_t(length - 1);
    pending_value_ = byte & (0x7F >> length);
    return true;
  }
  if ((byte & 0xC0) != 0x80) return false;
  pending_value_ = (pending_value_ << 6) | (byte & 0x3F);
  if (--pending_remaining_ != 0) return true;
  const char32_t c = pending_value_;
  if ((pending_length_ == 3 && c < 0x800) || (pending_length_ == 4 && c < 0x10000) || c > 0x10FFFF ||
      (c >= 0xD800 && c <= 0xDFFF)) {
    return false;
  }
  return advance(c);
}

// The code points a pending partial character can still become form one interval: its bits
// so far followed by anything in the missing continuation bits, above the overlong encodings.
bool GrammarMatcher::pending_is_viable() const {
  const unsigned missing_bits = 6u * pending_remaining_;
  const char32_t shortest = pending_length_ == 4 ? 0x10000 : pending_length_ == 3 ? 0x800 : 0x80;
  const char32_t first = pending_value_ << missing_bits;
  const char32_t lo = std::max(first, shortest);
  const char32_t hi = std::min<char32_t>(first | ((char32_t(1) << missing_bits) - 1), 0x10FFFF);
  if (lo > hi) return false;
  for (size_t i = 0; i < stack_ends_.size(); ++i) {
    const uint32_t begin = i == 0 ? 0 : stack_ends_[i - 1];
    if (begin != stack_ends_[i] && top_class(i).matches_any_of(lo, hi)) return true;
  }
  return false;
}

bool GrammarMatcher::accept_utf8(std::string_view bytes) {
  GrammarMatcher next = *this;
  for (const char b : bytes) {
    if (!next.step_byte(uint8_t(b))) return false;
  }
  if (next.pending_remaining_ != 0 && !next.pending_is_viable()) return false;
  *this = std::move(next);
  return true;
}

bool GrammarMatcher::accepts_utf8_prefix(std::string_view bytes) const {
  GrammarMatcher copy = *this;
  return copy.accept_utf8(bytes);
}

std::string GrammarMatcher::state_key() const {
  std::string key;
  key.reserve(3 + 4 * (1 + positions_.size() + stack_ends_.size()));
  auto append = [&](const void* data, size_t bytes) { key.append(static_cast<const char*>(data), bytes); };
  append(&pending_value_, sizeof pending_value_);
  key += char(pending_remaining_);
  key += char(pending_length_);
  const uint32_t stacks = uint32_t(stack_ends_.size());
  append(&stacks, sizeof stacks);
  append(stack_ends_.data(), stack_ends_.size() * sizeof(uint32_t));
  append(positions_.data(), positions_.size() * sizeof(uint32_t));
  return key;
}

bool GrammarMatcher::can_end() const {
  if (pending_remaining_ != 0) return false;
  uint32_t begin = 0;
  for (const uint32_t end : stack_ends_) {
    if (begin == end) return true;
    begin = end;
  }
  return false;
}

}  // namespace pagoda::grammar
