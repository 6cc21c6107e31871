// The trie walk and the token-by-token refinement share one rule: a token is accepted if the
// key's stacks survive all its bytes; else dependent if an empty stack (the key used up)
// appeared at a character boundary before the bytes that failed; else refused.

#include "engine/grammar/token_classes.h"

#include <algorithm>
#include <string_view>

#include "engine/grammar/stack_set.h"

namespace pagoda::grammar {

namespace {

enum class TokenClass : uint8_t { Refused, Accepted, Dependent };

void set_bit(std::vector<uint64_t>& bits, int32_t id) { bits[size_t(id) / 64] |= uint64_t(1) << (id % 64); }

// The accepted ids as a bitset when that is smaller than the list (a token takes 32 bits in
// the list, 1 in a bitset of the whole vocabulary).
void store_accepted(TokenClasses& classes, std::vector<int32_t> accepted, int32_t vocab_size) {
  std::sort(accepted.begin(), accepted.end());
  if (accepted.size() * 32 < size_t(vocab_size)) {
    classes.accepted_ids = std::move(accepted);
    return;
  }
  auto bits = std::make_shared<std::vector<uint64_t>>((size_t(vocab_size) + 63) / 64, 0);
  for (const int32_t id : accepted) set_bit(*bits, id);
  classes.accepted_bits = std::move(bits);
}

// One token from the key's stacks alone.
TokenClass classify_token(StackStepper& stepper, const StackSet& key, bool whole, std::string_view bytes,
                          StackSet (&buffers)[2]) {
  const StackSet* current = &key;
  PartialChar partial;
  bool used_up = false;
  int next = 0;
  for (const char b : bytes) {
    const PartialChar::Step step = partial.step(uint8_t(b));
    if (step == PartialChar::Step::Invalid) return TokenClass::Refused;
    if (step == PartialChar::Step::Pending) continue;
    used_up = used_up || (!whole && current->has_empty_stack);
    stepper.advance(*current, partial.value, buffers[next]);
    if (buffers[next].empty()) return used_up ? TokenClass::Dependent : TokenClass::Refused;
    current = &buffers[next];
    next ^= 1;
  }
  char32_t lo, hi;
  if (!partial.pending() || (partial.interval(lo, hi) && stepper.any_top_matches_any_of(*current, lo, hi))) {
    return TokenClass::Accepted;
  }
  return used_up || (!whole && current->has_empty_stack) ? TokenClass::Dependent : TokenClass::Refused;
}

}  // namespace

size_t TokenClasses::bytes(bool count_bitset) const {
  return sizeof(TokenClasses) + (count_bitset && accepted_bits ? accepted_bits->size() * sizeof(uint64_t) : 0) +
         (accepted_ids.size() + dependent.size()) * sizeof(int32_t);
}

// Depth-first over the trie's preorder array. Per depth on the current path: the stacks after
// that many bytes (inside a partial character, the depth whose stacks are still current), the
// partial character, and whether the key was used up at an earlier character boundary.
TokenClasses classify_by_walk(const TokenTrie& trie, const Grammar& grammar, std::span<const uint32_t> key,
                              bool whole) {
  struct Level {
    StackSet stacks;
    PartialChar partial;
    size_t stacks_at = 0;
    bool used_up = false;
  };
  const std::span<const TokenTrie::Node> nodes = trie.nodes();
  const std::span<const int32_t> ids = trie.ids();
  std::vector<Level> levels(trie.max_depth() + 1);
  levels[0].stacks.add(key);
  StackStepper stepper(grammar);
  std::vector<int32_t> accepted;
  TokenClasses classes;

  size_t i = 1;
  while (i < nodes.size()) {
    const TokenTrie::Node& node = nodes[i];
    const Level& parent = levels[node.depth - 1];
    Level& level = levels[node.depth];
    const StackSet& before = levels[parent.stacks_at].stacks;
    // Inside a partial character, the parent's used_up already counts `before`'s empty stack.
    level.used_up = parent.used_up || (!whole && !parent.partial.pending() && before.has_empty_stack);
    level.partial = parent.partial;
    bool alive = false;
    switch (level.partial.step(node.byte)) {
      case PartialChar::Step::Invalid:
        i = node.subtree_end;  // invalid UTF-8 is refused whatever lies below
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
      if (level.used_up) {  // the subtree's tokens are contiguous in ids()
        const uint32_t last = nodes[node.subtree_end - 1].ids_end;
        classes.dependent.insert(classes.dependent.end(), ids.begin() + node.ids_begin, ids.begin() + last);
      }
      i = node.subtree_end;
      continue;
    }
    accepted.insert(accepted.end(), ids.begin() + node.ids_begin, ids.begin() + node.ids_end);
    ++i;
  }
  std::sort(classes.dependent.begin(), classes.dependent.end());
  store_accepted(classes, std::move(accepted), trie.vocab_size());
  return classes;
}

TokenClasses refine(const TokenClasses& shallower, const TokenTrie& trie, const Grammar& grammar,
                    std::span<const uint32_t> key, bool whole) {
  TokenClasses classes;
  classes.accepted_bits = shallower.accepted_bits;
  StackStepper stepper(grammar);
  StackSet start;
  start.add(key);
  StackSet buffers[2];
  std::vector<int32_t> accepted;
  for (const int32_t id : shallower.dependent) {
    switch (classify_token(stepper, start, whole, trie.token(id), buffers)) {
      case TokenClass::Accepted: accepted.push_back(id); break;
      case TokenClass::Dependent: classes.dependent.push_back(id); break;
      case TokenClass::Refused: break;
    }
  }
  classes.accepted_ids.resize(shallower.accepted_ids.size() + accepted.size());
  std::merge(shallower.accepted_ids.begin(), shallower.accepted_ids.end(), accepted.begin(), accepted.end(),
             classes.accepted_ids.begin());
  return classes;
}

}  // namespace pagoda::grammar
