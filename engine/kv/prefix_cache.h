#pragma once
// Prefix-cache keys. Every full block of tokens_per_page tokens of a sequence is named by a
// 128-bit XXH3 hash chained from the previous block's hash and the block's token ids (the same
// for every KV group: the pool tells the groups' pages apart), starting from a seed that covers
// everything else that changes the keys and values: the KV layout and the LoRA adapter (by
// name and load generation, so a reloaded adapter of the same name never meets old pages).
// A block holding rows of a prompt's image, whose positions hold only placeholder ids, also
// hashes which image and which of its rows (PrefixImage); blocks after it chain from it, so
// they differ too. Pages computed bit-identically however a prompt is batched or chunked, so
// two pages with the same hash hold the same bits and one may stand for the other.
//
// PrefixHashes is one sequence's bookkeeping: the hashes of its full blocks, computed as the
// pages fill, and how many of them the page pool has already been offered.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/kv/kv_layout.h"

namespace pagoda {

struct PageHash {
  uint64_t low = 0;
  uint64_t high = 0;
  friend bool operator==(const PageHash&, const PageHash&) = default;
};

struct PageHashHasher {
  size_t operator()(const PageHash& h) const { return size_t(h.low); }  // already uniform
};

// The chain's seed for sequences on `adapter` (empty: the base model) in its load
// `adapter_generation`, on pages of `layout`.
PageHash prefix_seed(const KvLayout& layout, std::string_view adapter, uint64_t adapter_generation);

// An image of a sequence's prompt as its keys see it: the forward pass reads the image's rows
// at positions [position, position + rows) instead of the placeholder ids there.
struct PrefixImage {
  uint64_t hash = 0;  // names the rows: the image's pixels under the engine's projector (SequenceImage::hash)
  int32_t position = 0;
  int32_t rows = 0;
};

// The hash of a full page holding `page_tokens` at positions from `first` on, after the page
// whose hash is `previous` (the seed for a sequence's first page). `images`: the sequence's
// images; each one with rows in the page adds (its hash, its position relative to `first`, its
// rows), which say which rows of which image the page's placeholders stand for. A page no image
// touches hashes (previous, tokens) alone, as before images were keys: the disk tier's files
// and the KV events of earlier engines keep their names.
PageHash chain_page_hash(const PageHash& previous, std::span<const int32_t> page_tokens,
                         std::span<const PrefixImage> images = {}, int32_t first = 0);

// A full page ready to be named in the pool's index, with what a lower tier keeps of it (its
// tokens, and the hash it was chained from, for the disk tier's checks and the KV events).
struct NamedPage {
  int32_t page;
  PageHash hash;
  int32_t group = 0;            // its KV group
  int32_t block = 0;            // its token block's index in the sequence
  PageHash previous;            // the previous block's hash; the chain's seed for block 0
  std::vector<int32_t> tokens;  // the block's tokens
  bool persist = true;          // may go to disk: false for pages of a LoRA adapter's requests
};

class BlockTable;

class PrefixHashes {
 public:
  // Starts the chain afresh from `seed`, for a sequence whose prompt holds `images` (by position).
  void reset(const PageHash& seed, std::vector<PrefixImage> images = {});
  bool seeded() const { return seeded_; }

  // The hashes of the full pages that lie before the last of `tokens`: the pages an
  // admission may take from the cache. The last token is always fed again, so the step that
  // admits a fully cached prompt still has its logits (vLLM's rule: back off one page rather
  // than copy a shared page the sequence would have to write into).
  std::span<const PageHash> lookup_keys(std::span<const int32_t> tokens, int32_t tokens_per_page);

  // The pool holds the first `n_blocks` of them already (taken from the cache at admission).
  void set_offered(int32_t n_blocks) { offered_ = n_blocks; }

  // Token block b's hash, and the hash it was chained from (the seed for block 0); b must be
  // below what lookup_keys or collect_full covered.
  const PageHash& hash(int32_t block) const { return hashes_[size_t(block)]; }
  const PageHash& previous(int32_t block) const { return block == 0 ? seed_ : hashes_[size_t(block) - 1]; }

  // Appends the pages of every group of `table` that became full since the last call —
  // positions below `n_cached` are written — with their hashes, for the pool to index (holes,
  // whose pages went back unwritten by this sequence, are skipped).
  // `persist`: whether the pages may go to the disk tier (NamedPage::persist).
  void collect_full(std::span<const int32_t> tokens, int32_t n_cached, const BlockTable& table,
                    std::vector<NamedPage>& out, bool persist = true);

 private:
  // Extends the chain to cover the first `n_pages` full pages of `tokens`.
  void extend(std::span<const int32_t> tokens, int32_t n_pages, int32_t tokens_per_page);

  PageHash seed_;
  bool seeded_ = false;
  std::vector<PrefixImage> images_;
  std::vector<PageHash> hashes_;  // hashes_[i] names token block i of the sequence
  int32_t offered_ = 0;
};

}  // namespace pagoda
