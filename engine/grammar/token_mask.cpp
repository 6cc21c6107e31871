// The per-state union of the stacks' token classes, with the dependent tokens checked against
// the whole state, and the entries kept per key.

#include "engine/grammar/token_mask.h"

#include <algorithm>
#include <mutex>
#include <string_view>
#include <utility>

#include "engine/grammar/stack_set.h"
#include "pagoda/error.h"

namespace pagoda::grammar {

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

// A map key for the positions of a stack's top, and whether they are the whole stack.
std::string key_of(std::span<const uint32_t> positions, bool whole) {
  std::string key(reinterpret_cast<const char*>(positions.data()), positions.size_bytes());
  key.push_back(whole ? 'w' : 'p');
  return key;
}

}  // namespace

TokenMask::TokenMask(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie, size_t walk_depth,
                     size_t key_depth)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), walk_depth_(walk_depth), key_depth_(key_depth) {
  if (walk_depth_ == 0 || walk_depth_ > key_depth_) {
    throw Error("grammar: a token mask needs 1 <= walk depth <= key depth (got " + std::to_string(walk_depth_) +
                " and " + std::to_string(key_depth_) + ")");
  }
}

size_t TokenMask::cached_entries() const {
  std::shared_lock lock(mutex_);
  return entries_.size();
}

size_t TokenMask::cached_bytes() const {
  std::shared_lock lock(mutex_);
  return entry_bytes_;
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
  std::vector<const TokenClasses*> seen;
  std::vector<int32_t> dependent;
  for (size_t i = 0; i < ends.size(); ++i) {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    if (begin == ends[i]) continue;  // `root` is complete: this stack takes no more text
    const std::shared_ptr<const TokenClasses> classes = classes_for(positions.subspan(begin, ends[i] - begin));
    if (std::find(seen.begin(), seen.end(), classes.get()) != seen.end()) continue;
    seen.push_back(classes.get());
    if (classes->accepted_bits) {
      const std::vector<uint64_t>& accepted = *classes->accepted_bits;
      for (size_t w = 0; w < bits.size(); ++w) bits[w] |= accepted[w];
    }
    for (const int32_t id : classes->accepted_ids) set_bit(bits, id);
    dependent.insert(dependent.end(), classes->dependent.begin(), classes->dependent.end());
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

std::shared_ptr<const TokenClasses> TokenMask::classes_for(std::span<const uint32_t> stack) const {
  const size_t depth = std::min(stack.size(), key_depth_);
  const bool whole = stack.size() <= key_depth_;
  const std::string key = key_of(stack.last(depth), whole);
  if (auto found = find(key)) return found;
  if (depth <= walk_depth_) {
    return keep(
        key, std::make_shared<const TokenClasses>(classify_by_walk(*trie_, *grammar_, stack.last(depth), whole)), true);
  }
  const std::span<const uint32_t> walked = stack.last(walk_depth_);
  const std::string walk_key = key_of(walked, false);
  std::shared_ptr<const TokenClasses> walk = find(walk_key);
  if (!walk) {
    walk =
        keep(walk_key, std::make_shared<const TokenClasses>(classify_by_walk(*trie_, *grammar_, walked, false)), true);
  }
  return keep(key, std::make_shared<const TokenClasses>(refine(*walk, *trie_, *grammar_, stack.last(depth), whole)),
              false);
}

std::shared_ptr<const TokenClasses> TokenMask::find(const std::string& key) const {
  std::shared_lock lock(mutex_);
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

// Entries are made outside the lock: two threads may make the same one at once, and the first
// kept is the one both use (they are identical).
std::shared_ptr<const TokenClasses> TokenMask::keep(const std::string& key, std::shared_ptr<const TokenClasses> classes,
                                                    bool owns_bitset) const {
  const size_t bytes = key.size() + classes->bytes(owns_bitset);
  std::unique_lock lock(mutex_);
  if (entry_bytes_ + bytes > kMaxEntryBytes) return classes;
  const auto [it, inserted] = entries_.try_emplace(key, std::move(classes));
  if (inserted) entry_bytes_ += bytes;
  return it->second;
}

}  // namespace pagoda::grammar
