// The per-key trie walk that sorts tokens (compute_entry) and the per-state union of entries
// with the dependent tokens checked exactly (fill_mask).

#include "engine/grammar/token_mask.h"

#include <algorithm>
#include <mutex>
#include <string_view>
#include <utility>

#include "engine/grammar/stack_set.h"
#include "pagoda/error.h"

namespace pagoda::grammar {

// A key's tokens: accepted ones as a bitset or a sorted id list, whichever is smaller, and
// the ones that depend on the stack below the key (sorted).
struct TokenMask::Entry {
  std::vector<uint64_t> accepted_bits;
  std::vector<int32_t> accepted_ids;
  std::vector<int32_t> dependent;
};

namespace {

void set_bit(std::vector<uint64_t>& bits, int32_t id) { bits[size_t(id) / 64] |= uint64_t(1) << (id % 64); }
bool test_bit(const std::vector<uint64_t>& bits, int32_t id) { return (bits[size_t(id) / 64] >> (id % 64)) & 1; }

// Whether the stacks in `start` accept all of `bytes` (GrammarMatcher::accept_utf8's rule).
bool accepts(StackStepper& stepper, const StackSet& start, std::string_view bytes, StackSet (&buffers)[2]) {
  const StackSet* current = &start;
  PartialChar partial;
  int next = 0;
  for (const char b : bytes) {
    const PartialChar::Step step = partial.step(uint8_t(b));
    if (step == PartialChar::Step::Invalid) return false;
    if (step == PartialChar::Step::Pending) continue;
    stepper.advance(*current, partial.value, buffers[next]);
    if (buffers[next].empty()) return false;
    current = &buffers[next];
    next ^= 1;
  }
  char32_t lo, hi;
  return !partial.pending() || (partial.interval(lo, hi) && stepper.any_top_matches_any_of(*current, lo, hi));
}

}  // namespace

TokenMask::TokenMask(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie, size_t key_depth)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), key_depth_(key_depth) {
  if (key_depth_ == 0) throw Error("grammar: a token mask's key depth must be at least 1");
}

size_t TokenMask::cached_entries() const {
  std::shared_lock lock(mutex_);
  return entries_.size();
}

bool TokenMask::allows(const GrammarMatcher& state, int32_t token) const {
  return !trie_->excluded(token) && state.accepts_utf8_prefix(trie_->token(token));
}

void TokenMask::fill_mask(const GrammarMatcher& state, std::vector<uint64_t>& bits) const {
  if (&state.grammar() != grammar_.get()) {
    throw Error("grammar: a token mask was asked about a matcher of another grammar");
  }
  bits.assign(words(), 0);
  if (state.has_partial_char()) {
    fill_after_partial_char(state, bits);
    return;
  }
  const std::span<const uint32_t> positions = state.stack_positions();
  const std::span<const uint32_t> ends = state.stack_ends();
  std::vector<std::string> seen;
  std::vector<int32_t> dependent;
  for (size_t i = 0; i < ends.size(); ++i) {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    const size_t length = ends[i] - begin;
    if (length == 0) continue;  // `root` is complete: this stack takes no more text
    const bool whole = length <= key_depth_;
    const size_t depth = std::min(length, key_depth_);
    const std::span<const uint32_t> top = positions.subspan(ends[i] - depth, depth);
    std::string key(reinterpret_cast<const char*>(top.data()), top.size_bytes());
    key.push_back(whole ? 'w' : 'p');
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    const std::shared_ptr<const Entry> entry = entry_for(key, top, whole);
    seen.push_back(std::move(key));
    if (!entry->accepted_bits.empty()) {
      for (size_t w = 0; w < bits.size(); ++w) bits[w] |= entry->accepted_bits[w];
    }
    for (const int32_t id : entry->accepted_ids) set_bit(bits, id);
    dependent.insert(dependent.end(), entry->dependent.begin(), entry->dependent.end());
  }
  if (dependent.empty()) return;
  std::sort(dependent.begin(), dependent.end());
  dependent.erase(std::unique(dependent.begin(), dependent.end()), dependent.end());
  StackStepper stepper(*grammar_);
  StackSet whole_state;
  for (size_t i = 0; i < ends.size(); ++i) {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    whole_state.add(positions.subspan(begin, ends[i] - begin));
  }
  StackSet buffers[2];
  for (const int32_t id : dependent) {
    if (!test_bit(bits, id) && accepts(stepper, whole_state, trie_->token(id), buffers)) set_bit(bits, id);
  }
}

// After a partial character only continuation bytes (0x80-0xBF) can come: the other tokens
// are refused at their first byte, so only the trie's subtrees under those bytes are checked.
void TokenMask::fill_after_partial_char(const GrammarMatcher& state, std::vector<uint64_t>& bits) const {
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const std::span<const int32_t> ids = trie_->ids();
  for (size_t i = 1; i < nodes.size(); i = nodes[i].subtree_end) {
    if (nodes[i].byte < 0x80 || nodes[i].byte > 0xBF) continue;
    for (size_t j = i; j < nodes[i].subtree_end; ++j) {
      for (uint32_t k = nodes[j].ids_begin; k < nodes[j].ids_end; ++k) {
        if (state.accepts_utf8_prefix(trie_->token(ids[k]))) set_bit(bits, ids[k]);
      }
    }
  }
}

std::shared_ptr<const TokenMask::Entry> TokenMask::entry_for(const std::string& key, std::span<const uint32_t> positions,
                                                             bool whole) const {
  {
    std::shared_lock lock(mutex_);
    const auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
  }
  // Computed outside the lock: another thread may compute the same key meanwhile, and the
  // first one stored wins (both are identical).
  std::shared_ptr<const Entry> entry = compute_entry(positions, whole);
  std::unique_lock lock(mutex_);
  if (entries_.size() >= kMaxEntries) return entry;
  return entries_.try_emplace(key, std::move(entry)).first->second;
}

// One depth-first walk of the trie from the key alone. Per depth on the current path: the
// stacks after that many bytes (or, inside a partial character, the depth whose stacks are
// still current), the partial character, and whether the key's positions were used up at an
// earlier character (an empty stack appeared): from there on, a token the key's own stacks
// refuse may still be accepted by what lies below, so it is dependent rather than rejected.
std::shared_ptr<const TokenMask::Entry> TokenMask::compute_entry(std::span<const uint32_t> positions, bool whole) const {
  struct Level {
    StackSet stacks;
    PartialChar partial;
    size_t stacks_at = 0;  // the depth whose `stacks` are current
    bool used_up = false;
  };
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const std::span<const int32_t> ids = trie_->ids();
  std::vector<Level> levels(trie_->max_depth() + 1);
  levels[0].stacks.add(positions);
  StackStepper stepper(*grammar_);
  std::vector<int32_t> accepted;
  auto entry = std::make_shared<Entry>();

  size_t i = 1;
  while (i < nodes.size()) {
    const TokenTrie::Node& node = nodes[i];
    const Level& parent = levels[node.depth - 1];
    Level& level = levels[node.depth];
    const StackSet& before = levels[parent.stacks_at].stacks;
    // A whole stack has nothing below it: once used up, it takes no more text.
    const bool used_up = parent.used_up || (!whole && !parent.partial.pending() && before.has_empty_stack);
    level.partial = parent.partial;
    level.used_up = used_up;
    bool alive = false;
    switch (level.partial.step(node.byte)) {
      case PartialChar::Step::Invalid:
        i = node.subtree_end;  // invalid UTF-8: refused whatever the stacks below
        continue;
      case PartialChar::Step::Pending: {
        level.stacks_at = parent.stacks_at;
        char32_t lo, hi;
        alive = level.partial.interval(lo, hi) && stepper.any_top_matches_any_of(before, lo, hi);
        break;
      }
      case PartialChar::Step::Complete:
        stepper.advance(before, level.partial.value, level.stacks);
        level.stacks_at = node.depth;
        alive = !level.stacks.empty();
        break;
    }
    if (!alive) {
      if (used_up) {
        for (uint32_t k = node.ids_begin; k < nodes[node.subtree_end - 1].ids_end; ++k) entry->dependent.push_back(ids[k]);
      }
      i = node.subtree_end;
      continue;
    }
    accepted.insert(accepted.end(), ids.begin() + node.ids_begin, ids.begin() + node.ids_end);
    ++i;
  }

  std::sort(entry->dependent.begin(), entry->dependent.end());
  if (accepted.size() * 32 >= size_t(trie_->vocab_size())) {
    entry->accepted_bits.assign(words(), 0);
    for (const int32_t id : accepted) set_bit(entry->accepted_bits, id);
  } else {
    std::sort(accepted.begin(), accepted.end());
    entry->accepted_ids = std::move(accepted);
  }
  return entry;
}

}  // namespace pagoda::grammar
