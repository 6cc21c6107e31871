#include "engine/grammar/shortest_completion.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "engine/util/utf8.h"

namespace pagoda::grammar {

namespace {

// One character of the class, preferring a letter, a digit, then any printable ASCII; the
// smallest code point otherwise. Empty if the class matches nothing.
std::string representative(const CharClass& c) {
  for (char32_t preferred : {U'a', U'0', U' '}) {
    if (c.matches(preferred)) return std::string(1, char(preferred));
  }
  for (char32_t x = 0x21; x < 0x7F; ++x) {
    if (c.matches(x)) return std::string(1, char(x));
  }
  std::string out;
  if (!c.negated) {
    if (!c.ranges.empty()) append_utf8(c.ranges.front().first, out);
    return out;
  }
  // The first code point past the excluded ranges (they are sorted and disjoint).
  char32_t x = 0;
  for (const auto& [lo, hi] : c.ranges) {
    if (x < lo) break;
    x = std::max<char32_t>(x, hi + 1);
  }
  if (x <= 0x10FFFF && !(x >= 0xD800 && x <= 0xDFFF)) append_utf8(x, out);
  return out;
}

}  // namespace

ShortestCompletion::ShortestCompletion(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)),
      rule_cost_(grammar_->rule_alternatives.size(), kNever),
      rule_choice_(grammar_->rule_alternatives.size(), 0) {
  representative_.reserve(grammar_->classes.size());
  for (const CharClass& c : grammar_->classes) representative_.push_back(representative(c));
  settle_rule_costs();
}

// Knuth's generalisation of Dijkstra to grammars: rules are settled cheapest first, and an
// alternative's cost is known once every rule it names is settled, so each element is looked
// at a bounded number of times (a chain of N rules costs O(N log N), where a fixed point over
// all rules took N passes). A rule's choice is the alternative that first offered its final
// cost (the earlier one of two offered together), so a choice only names rules settled before
// its own and following the choices always ends; a rule whose every alternative needs itself,
// or a class with no character, keeps kNever.
void ShortestCompletion::settle_rule_costs() {
  const size_t rules = grammar_->rule_alternatives.size();
  struct Alternative {
    uint32_t start;
    uint32_t rule;
    uint32_t pending = 0;  // references to rules not settled yet
    uint64_t cost = 0;     // of its characters and settled rules so far
  };
  std::vector<Alternative> alts;
  std::vector<std::vector<uint32_t>> users(rules);  // per rule: the alternatives naming it, once per reference
  for (uint32_t rule = 0; rule < rules; ++rule) {
    for (const uint32_t start : grammar_->rule_alternatives[rule]) {
      Alternative a{start, rule};
      for (uint32_t p = start; grammar_->elements[p].kind != Element::Kind::End; ++p) {
        const Element& e = grammar_->elements[p];
        if (e.kind == Element::Kind::Chars) {
          const std::string& r = representative_[e.index];
          a.cost = r.empty() ? kNever : std::min(kNever, a.cost + r.size());
        } else {
          ++a.pending;
          users[e.index].push_back(uint32_t(alts.size()));
        }
      }
      alts.push_back(a);
    }
  }
  // A complete alternative offers its cost to its rule.
  auto offer = [&](uint32_t alt, auto& queue) {
    const Alternative& a = alts[alt];
    if (a.cost >= kNever) return;
    if (a.cost < rule_cost_[a.rule] || (a.cost == rule_cost_[a.rule] && a.start < rule_choice_[a.rule])) {
      rule_cost_[a.rule] = a.cost;
      rule_choice_[a.rule] = a.start;
      queue.emplace(a.cost, a.rule);
    }
  };
  using Entry = std::pair<uint64_t, uint32_t>;  // cost, rule
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  for (uint32_t alt = 0; alt < alts.size(); ++alt) {
    if (alts[alt].pending == 0) offer(alt, queue);
  }
  std::vector<bool> settled(rules, false);
  while (!queue.empty()) {
    const auto [cost, rule] = queue.top();
    queue.pop();
    if (settled[rule] || cost != rule_cost_[rule]) continue;
    settled[rule] = true;
    for (const uint32_t alt : users[rule]) {
      Alternative& a = alts[alt];
      a.cost = std::min(kNever, a.cost + cost);
      if (--a.pending == 0 && !settled[a.rule]) offer(alt, queue);
    }
  }
}

uint64_t ShortestCompletion::rest_cost(uint32_t position) const {
  uint64_t cost = 0;
  for (uint32_t p = position;; ++p) {
    const Element& e = grammar_->elements[p];
    if (e.kind == Element::Kind::End) return cost;
    if (e.kind == Element::Kind::Chars) {
      const std::string& r = representative_[e.index];
      cost += r.empty() ? kNever : r.size();
    } else {
      cost += rule_cost_[e.index];
    }
    if (cost >= kNever) return kNever;
  }
}

// Iterative: a chain of rules (one per line of the grammar text) can be any number deep.
void ShortestCompletion::write_rest(uint32_t position, std::string& out) const {
  std::vector<uint32_t> resume{position};  // where each rule being written goes on, innermost last
  while (!resume.empty() && out.size() <= kMaxBytes) {
    const uint32_t p = resume.back();
    const Element& e = grammar_->elements[p];
    if (e.kind == Element::Kind::End) {
      resume.pop_back();
      continue;
    }
    resume.back() = p + 1;
    if (e.kind == Element::Kind::Chars) {
      out += representative_[e.index];
    } else {
      resume.push_back(rule_choice_[e.index]);
    }
  }
}

size_t ShortestCompletion::best_stack(const GrammarMatcher& state, uint64_t& cost) const {
  const std::span<const uint32_t> positions = state.stack_positions();
  const std::span<const uint32_t> ends = state.stack_ends();
  cost = kNever;
  size_t best = ends.size();
  if (state.has_partial_char()) return best;
  for (size_t i = 0; i < ends.size(); ++i) {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    uint64_t c = 0;
    for (uint32_t k = begin; k < ends[i] && c < kNever; ++k) c += rest_cost(positions[k]);
    if (c < cost) {
      cost = c;
      best = i;
    }
  }
  return best;
}

std::optional<size_t> ShortestCompletion::length(const GrammarMatcher& state) const {
  uint64_t cost = 0;
  if (best_stack(state, cost) == state.stack_ends().size() || cost > kMaxBytes) return std::nullopt;
  return size_t(cost);
}

std::optional<std::string> ShortestCompletion::of(const GrammarMatcher& state) const {
  uint64_t cost = 0;
  const size_t best = best_stack(state, cost);
  const std::span<const uint32_t> positions = state.stack_positions();
  const std::span<const uint32_t> ends = state.stack_ends();
  if (best == ends.size() || cost > kMaxBytes) return std::nullopt;
  std::string out;
  const uint32_t begin = best == 0 ? 0 : ends[best - 1];
  for (uint32_t k = ends[best]; k > begin; --k) write_rest(positions[k - 1], out);
  return out;
}

}  // namespace pagoda::grammar
