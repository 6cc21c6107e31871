#include "engine/kv/prefix_cache.h"

#include "engine/kv/block_table.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace pagoda {

namespace {

PageHash from_xxh(const XXH128_hash_t& h) { return {h.low64, h.high64}; }

}  // namespace

PageHash prefix_seed(const KvLayout& layout, std::string_view adapter, uint64_t adapter_generation) {
  // Fixed-width fields, then the adapter's name: every input reads back unambiguously. Any
  // KvLayout field that changes a page's bytes (a KV cache dtype) belongs in this list.
  const int64_t fields[] = {layout.n_layers,        layout.n_kv_heads,           layout.head_dim,
                            layout.tokens_per_page, int64_t(layout.dtype),       layout.slots(),
                            layout.n_groups(),      int64_t(adapter_generation), int64_t(adapter.size())};
  std::vector<unsigned char> bytes(sizeof(fields) + adapter.size());
  std::memcpy(bytes.data(), fields, sizeof(fields));
  std::memcpy(bytes.data() + sizeof(fields), adapter.data(), adapter.size());
  return from_xxh(XXH3_128bits(bytes.data(), bytes.size()));
}

PageHash chain_page_hash(const PageHash& previous, std::span<const int32_t> page_tokens,
                         std::span<const PrefixImage> images, int32_t first) {
  const int32_t end = first + int32_t(page_tokens.size());
  auto in_page = [&](const PrefixImage& image) { return image.position < end && image.position + image.rows > first; };
  // Each image as (hash, position − first, rows) after the tokens: fixed-width fields after a
  // token count the seed fixes (tokens_per_page), so the bytes read back unambiguously, and a
  // page without images hashes the bytes it always did.
  constexpr size_t kImageBytes = sizeof(uint64_t) + 2 * sizeof(int32_t);
  const auto n_images = size_t(std::count_if(images.begin(), images.end(), in_page));
  unsigned char bytes[sizeof(PageHash) + 256 * sizeof(int32_t) + 4 * kImageBytes];
  std::vector<unsigned char> large;  // only for pages of more than 256 tokens or 4 images
  unsigned char* buffer = bytes;
  const size_t size = sizeof(PageHash) + page_tokens.size_bytes() + n_images * kImageBytes;
  if (size > sizeof(bytes)) {
    large.resize(size);
    buffer = large.data();
  }
  std::memcpy(buffer, &previous.low, sizeof(uint64_t));
  std::memcpy(buffer + sizeof(uint64_t), &previous.high, sizeof(uint64_t));
  std::memcpy(buffer + sizeof(PageHash), page_tokens.data(), page_tokens.size_bytes());
  unsigned char* at = buffer + sizeof(PageHash) + page_tokens.size_bytes();
  for (const PrefixImage& image : images) {
    if (!in_page(image)) continue;
    const int32_t placement[2] = {image.position - first, image.rows};
    std::memcpy(at, &image.hash, sizeof(uint64_t));
    std::memcpy(at + sizeof(uint64_t), placement, sizeof(placement));
    at += kImageBytes;
  }
  return from_xxh(XXH3_128bits(buffer, size));
}

void PrefixHashes::reset(const PageHash& seed, std::vector<PrefixImage> images) {
  seed_ = seed;
  seeded_ = true;
  images_ = std::move(images);
  hashes_.clear();
  offered_ = 0;
}

void PrefixHashes::extend(std::span<const int32_t> tokens, int32_t n_pages, int32_t tokens_per_page) {
  while (int32_t(hashes_.size()) < n_pages) {
    const size_t i = hashes_.size();
    const PageHash& previous = i == 0 ? seed_ : hashes_.back();
    hashes_.push_back(chain_page_hash(previous, tokens.subspan(i * size_t(tokens_per_page), size_t(tokens_per_page)),
                                      images_, int32_t(i) * tokens_per_page));
  }
}

std::span<const PageHash> PrefixHashes::lookup_keys(std::span<const int32_t> tokens, int32_t tokens_per_page) {
  if (tokens.empty()) return {};
  const int32_t n_pages = int32_t(tokens.size() - 1) / tokens_per_page;
  extend(tokens, n_pages, tokens_per_page);
  return std::span<const PageHash>(hashes_).first(size_t(n_pages));
}

void PrefixHashes::collect_full(std::span<const int32_t> tokens, int32_t n_cached, const BlockTable& table,
                                std::vector<NamedPage>& out, bool persist) {
  const int32_t tokens_per_page = table.tokens_per_page();
  const int32_t n_full = n_cached / tokens_per_page;
  if (n_full <= offered_) return;
  extend(tokens, n_full, tokens_per_page);
  for (int32_t g = 0; g < table.groups(); ++g) {
    for (int32_t i = offered_; i < n_full; ++i) {
      const int32_t page = table.pages(g)[size_t(i)];
      if (page == BlockTable::kHole) continue;
      const auto block_tokens = tokens.subspan(size_t(i) * size_t(tokens_per_page), size_t(tokens_per_page));
      out.push_back({page,
                     hashes_[size_t(i)],
                     g,
                     i,
                     i == 0 ? seed_ : hashes_[size_t(i) - 1],
                     {block_tokens.begin(), block_tokens.end()},
                     persist});
    }
  }
  offered_ = n_full;
}

}  // namespace pagoda
