#include "engine/grammar/budget_mask.h"

#include <utility>

namespace pagoda::grammar {

namespace {

bool within(const std::optional<size_t>& completion, size_t limit) { return completion && *completion <= limit; }

}  // namespace

BudgetMask::BudgetMask(const TokenTrie& trie, const ShortestCompletion& completion)
    : trie_(&trie), completion_(&completion) {}

int32_t BudgetMask::intern(GrammarMatcher matcher) {
  auto [it, added] = ids_.try_emplace(matcher.state_key(), int32_t(states_.size()));
  if (added) {
    const std::optional<size_t> length = completion_->length(matcher);
    states_.push_back(State{std::move(matcher), length, {}});
    states_.back().next.fill(kUnknown);
  }
  return it->second;
}

int32_t BudgetMask::next(int32_t state, uint8_t byte) {
  if (const int32_t known = states_[size_t(state)].next[byte]; known != kUnknown) return known;
  GrammarMatcher m = states_[size_t(state)].matcher;
  const char c = char(byte);
  const int32_t to = m.accept_utf8(std::string_view(&c, 1)) ? intern(std::move(m)) : kRefused;
  states_[size_t(state)].next[byte] = to;  // after intern: states_ may have moved
  return to;
}

void BudgetMask::fill(const GrammarMatcher& state, size_t limit, std::vector<uint64_t>& bits) {
  if (states_.size() > kMaxStates) {
    states_.clear();
    ids_.clear();
  }
  bits.assign((size_t(trie_->vocab_size()) + 63) / 64, 0);
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const std::span<const int32_t> ids = trie_->ids();
  std::vector<int32_t> path(trie_->max_depth() + 1, kRefused);  // the state after each depth's bytes
  path[0] = intern(state);
  for (uint32_t i = 1; i < nodes.size();) {
    const TokenTrie::Node& node = nodes[i];
    const int32_t s = next(path[node.depth - 1], node.byte);
    if (s == kRefused) {
      i = node.subtree_end;
      continue;
    }
    path[node.depth] = s;
    if (within(states_[size_t(s)].completion, limit)) {
      for (uint32_t k = node.ids_begin; k < node.ids_end; ++k) {
        bits[size_t(ids[k]) / 64] |= uint64_t(1) << (ids[k] % 64);
      }
    }
    ++i;
  }
}

bool BudgetMask::allows(const GrammarMatcher& state, int32_t token, size_t limit) const {
  const std::string_view bytes = trie_->token(token);
  GrammarMatcher m = state;
  return !bytes.empty() && m.accept_utf8(bytes) && within(completion_->length(m), limit);
}

}  // namespace pagoda::grammar
