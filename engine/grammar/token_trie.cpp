// The trie is built from the tokens sorted by their bytes: consecutive tokens share their
// common prefix, so one pass with the current path on a stack emits the nodes in preorder.

#include "engine/grammar/token_trie.h"

#include <algorithm>

#include "pagoda/error.h"

namespace pagoda::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, std::span<const int32_t> excluded) {
  const size_t n = token_bytes.size();
  excluded_bits_.assign((n + 63) / 64, 0);
  for (const int32_t id : excluded) {
    if (id < 0 || size_t(id) >= n) {
      throw Error("token trie: excluded token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(n) + " tokens");
    }
    excluded_bits_[size_t(id) / 64] |= uint64_t(1) << (id % 64);
  }
  std::vector<int32_t> order;
  token_offsets_.reserve(n + 1);
  token_offsets_.push_back(0);
  for (size_t id = 0; id < n; ++id) {
    const std::string& t = token_bytes[id];
    if (t.empty() || ((excluded_bits_[id / 64] >> (id % 64)) & 1)) {
      excluded_bits_[id / 64] |= uint64_t(1) << (id % 64);
      token_offsets_.push_back(uint32_t(bytes_.size()));
      continue;
    }
    if (t.size() > 0xFFFF) {
      throw Error("token trie: token " + std::to_string(id) + " is " + std::to_string(t.size()) +
                  " bytes long (at most 65535)");
    }
    bytes_ += t;
    token_offsets_.push_back(uint32_t(bytes_.size()));
    order.push_back(int32_t(id));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return token(a) < token(b); });

  nodes_.push_back(Node{0, 0, 0, 0, 0});
  std::vector<uint32_t> path = {0};  // path[d]: the node at depth d on the current path
  std::string_view previous;
  for (const int32_t id : order) {
    const std::string_view t = token(id);
    const size_t common = size_t(
        std::mismatch(t.begin(), t.begin() + std::min(t.size(), previous.size()), previous.begin()).first - t.begin());
    while (path.size() > common + 1) {  // close the nodes below the common prefix
      nodes_[path.back()].subtree_end = uint32_t(nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < t.size(); ++d) {
      path.push_back(uint32_t(nodes_.size()));
      nodes_.push_back(Node{0, uint32_t(ids_.size()), uint32_t(ids_.size()), uint16_t(d + 1), uint8_t(t[d])});
    }
    ids_.push_back(id);
    nodes_[path.back()].ids_end = uint32_t(ids_.size());
    max_depth_ = std::max(max_depth_, t.size());
    previous = t;
  }
  for (const uint32_t node : path) nodes_[node].subtree_end = uint32_t(nodes_.size());
}

bool TokenTrie::excluded(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return true;
  return (excluded_bits_[size_t(id) / 64] >> (id % 64)) & 1;
}

std::string_view TokenTrie::token(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return std::string_view(bytes_).substr(token_offsets_[size_t(id)],
                                         token_offsets_[size_t(id) + 1] - token_offsets_[size_t(id)]);
}

}  // namespace pagoda::grammar
