#pragma once
// A vocabulary's token bytes as a trie, for computing which tokens a grammar allows: walking it
// depth-first with a parse state advanced one byte per edge visits each shared prefix once,
// and a byte the grammar rejects skips the node's whole subtree (every token below it).
//
// The nodes are stored in preorder in one array, each with its depth and the index just past
// its subtree, so a walk is a loop over indices (skip = jump to subtree_end) with the parse
// states of the current path kept per depth. Built once per vocabulary and shared (it is
// immutable) by every grammar used with that vocabulary.
//
// Excluded ids (control tokens, end-of-generation tokens, which the sampler handles itself)
// and tokens with no bytes are not in the trie: no grammar ever allows them.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::grammar {

class TokenTrie {
 public:
  struct Node {
    uint32_t subtree_end;  // index of the first node after this node's subtree
    uint32_t ids_begin;    // this node's tokens (spelled by the path to it): ids()[begin, end)
    uint32_t ids_end;
    uint16_t depth;  // bytes on the path from the root (the root is 0)
    uint8_t byte;    // the edge into this node (unused for the root)
  };

  // token_bytes[id] is token id's text as raw bytes (Tokenizer::token_text). Excluded ids
  // out of range → pagoda::Error; a token longer than 65535 bytes → pagoda::Error.
  TokenTrie(const std::vector<std::string>& token_bytes, std::span<const int32_t> excluded);

  int32_t vocab_size() const { return int32_t(token_offsets_.size() - 1); }
  // Whether `id` can never be allowed (excluded, empty, or out of range).
  bool excluded(int32_t id) const;
  // The bytes of token `id` (empty when excluded).
  std::string_view token(int32_t id) const;

  // Preorder; nodes()[0] is the root (the empty prefix, no tokens).
  std::span<const Node> nodes() const { return nodes_; }
  // Token ids grouped by node (Node::ids_begin/ids_end index into this).
  std::span<const int32_t> ids() const { return ids_; }
  // The longest token in bytes (the deepest node).
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  std::string bytes_;                    // every allowed token's bytes back to back
  std::vector<uint32_t> token_offsets_;  // token id's bytes: bytes_[offsets[id], offsets[id + 1])
  std::vector<uint64_t> excluded_bits_;
  size_t max_depth_ = 0;
};

}  // namespace pagoda::grammar
