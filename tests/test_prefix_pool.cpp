// The page pool as the prefix cache's owner: page hashes (images' pages among them, text pages
// as they always were), the hash → page index, the LRU of cached pages (oldest first, leaves
// before parents, never a page in use) and the accounting free + cached + in use == capacity.

#include <gtest/gtest.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <map>
#include <memory>
#include <set>

#include "engine/kv/block_table.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/prefix_cache.h"

namespace pagoda {
namespace {

KvLayout small_layout() { return {2, 2, 8, 4}; }  // 4 tokens a page

void expect_accounted(const PagePool& pool) {
  int32_t in_use = 0, cached = 0;
  for (int32_t p = 0; p < pool.capacity(); ++p) {
    in_use += pool.ref_count(p) > 0;
    cached += pool.is_cached(p);
  }
  EXPECT_EQ(pool.used_pages(), in_use);
  EXPECT_EQ(pool.cached_pages(), cached);
  EXPECT_EQ(pool.free_pages() + pool.cached_pages() + pool.used_pages(), pool.capacity());
}

// A sequence of `n_pages` full pages of `tokens`, as the schedulers handle one: allocate, name
// every full page, release.
struct Holder {
  std::vector<int32_t> tokens;
  PrefixHashes hashes;
  BlockTable table{4};

  Holder(std::vector<int32_t> t, const PageHash& seed) : tokens(std::move(t)) { hashes.reset(seed); }

  // Takes what the cache has, allocates the rest, names every full page; returns pages taken.
  int32_t admit(PagePool& pool) {
    const auto keys = hashes.lookup_keys(tokens, 4);
    std::vector<int32_t> pages;
    const int32_t taken = pool.take_prefix(0, keys, pool.match(keys).blocks, pages);
    EXPECT_TRUE(pool.allocate(int32_t((tokens.size() + 3) / 4) - taken, pages));
    table.grow(taken * 4, int32_t(tokens.size()), pages);
    hashes.set_offered(taken);
    std::vector<NamedPage> named;
    hashes.collect_full(tokens, int32_t(tokens.size()), table, named);
    for (const NamedPage& n : named) pool.register_page(n.page, n.hash, n.group);
    return taken;
  }
  void release(PagePool& pool) { pool.release(table.take_pages()); }
};

std::vector<int32_t> iota_tokens(int32_t n, int32_t from = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

TEST(PrefixHash, ChainsOverTokensAndSeed) {
  const KvLayout layout = small_layout();
  const PageHash base = prefix_seed(layout, "", 0);
  EXPECT_EQ(base, prefix_seed(layout, "", 0)) << "deterministic";
  EXPECT_NE(base, prefix_seed(layout, "a", 1)) << "the adapter changes the KV";
  EXPECT_NE(prefix_seed(layout, "a", 1), prefix_seed(layout, "a", 2)) << "a reloaded adapter is another adapter";
  KvLayout other = layout;
  other.tokens_per_page = 8;
  EXPECT_NE(base, prefix_seed(other, "", 0)) << "the layout is part of the seed";
  KvLayout other_type = layout;
  other_type.dtype = layout.dtype == KvCacheType::F16 ? KvCacheType::BF16 : KvCacheType::F16;
  EXPECT_NE(base, prefix_seed(other_type, "", 0)) << "so is the KV cache type: its pages hold other bytes";

  const std::vector<int32_t> page = {5, 6, 7, 8};
  const PageHash h = chain_page_hash(base, page);
  EXPECT_EQ(h, chain_page_hash(base, page));
  EXPECT_NE(h, chain_page_hash(base, std::vector<int32_t>{5, 6, 7, 9}));
  EXPECT_NE(h, chain_page_hash(chain_page_hash(base, page), page)) << "the same tokens after another page";
}

TEST(PrefixHash, LookupLeavesTheLastTokenToBeFed) {
  PrefixHashes hashes;
  hashes.reset(prefix_seed(small_layout(), "", 0));
  EXPECT_EQ(hashes.lookup_keys(iota_tokens(8), 4).size(), 1u) << "8 tokens: the second page holds the last one";
  EXPECT_EQ(hashes.lookup_keys(iota_tokens(9), 4).size(), 2u);
  EXPECT_EQ(hashes.lookup_keys(iota_tokens(3), 4).size(), 0u);
}

// The chain's formula before images were keys, written out again: XXH3-128 of the previous
// hash's low and high halves, then the block's token ids.
PageHash text_chain_hash(const PageHash& previous, std::span<const int32_t> tokens) {
  std::vector<unsigned char> bytes(2 * sizeof(uint64_t) + tokens.size_bytes());
  std::memcpy(bytes.data(), &previous.low, sizeof(uint64_t));
  std::memcpy(bytes.data() + sizeof(uint64_t), &previous.high, sizeof(uint64_t));
  std::memcpy(bytes.data() + 2 * sizeof(uint64_t), tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return {h.low64, h.high64};
}

// The keys lookup_keys gives `tokens` (4 a page) holding `images`.
std::vector<PageHash> keys_of(const std::vector<int32_t>& tokens, std::vector<PrefixImage> images) {
  PrefixHashes hashes;
  hashes.reset(prefix_seed(small_layout(), "", 0), std::move(images));
  const auto keys = hashes.lookup_keys(tokens, 4);
  return {keys.begin(), keys.end()};
}

TEST(PrefixHash, TextBlocksHashWhatTheyHashedBeforeImagesWereKeys) {
  const std::vector<int32_t> tokens = iota_tokens(21, 7);
  std::vector<PageHash> want;  // the chain by the old formula
  PageHash previous = prefix_seed(small_layout(), "", 0);
  for (size_t b = 0; b < 5; ++b) {
    previous = text_chain_hash(previous, std::span(tokens).subspan(b * 4, 4));
    want.push_back(previous);
  }
  EXPECT_EQ(keys_of(tokens, {}), want);
  // An image at 12..15: the three blocks before it are text blocks still; its own is not.
  const std::vector<PageHash> with_image = keys_of(tokens, {{0x1234, 12, 4}});
  ASSERT_EQ(with_image.size(), want.size());
  for (size_t b = 0; b < 3; ++b) EXPECT_EQ(with_image[b], want[b]) << "block " << b;
  EXPECT_NE(with_image[3], want[3]);
  // Images with no rows in a page (one ending where it starts, one after it) leave it a text page.
  const PrefixImage elsewhere[] = {{0x1234, 4, 8}, {0x5678, 40, 2}};
  EXPECT_EQ(chain_page_hash(want[2], std::span(tokens).subspan(12, 4), elsewhere, 12), want[3]);
}

TEST(PrefixHash, TheSamePlaceholdersWithAnotherImageDifferFromTheImagesFirstBlockOn) {
  // Text at 0..5, an image's placeholders at 6..13 (its rows straddle three blocks), text after.
  std::vector<int32_t> tokens = iota_tokens(6, 3);
  tokens.insert(tokens.end(), 8, 0);
  for (int32_t t = 40; t < 45; ++t) tokens.push_back(t);
  const std::vector<PageHash> a = keys_of(tokens, {{0xa, 6, 8}}), b = keys_of(tokens, {{0xb, 6, 8}});
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0], b[0]) << "the text before the image's block";
  for (size_t i = 1; i < a.size(); ++i) EXPECT_NE(a[i], b[i]) << "block " << i;
  EXPECT_EQ(a, keys_of(tokens, {{0xa, 6, 8}})) << "the same image, the same keys";
}

TEST(PrefixHash, TheSameImageAtAnotherPlaceIsAnotherKey) {
  // The same ids either way: fourteen 0s, then text. Whether the image's twelve rows start at
  // 0 or at 2 (after two text tokens that happen to be id 0, its placeholder), its blocks differ.
  std::vector<int32_t> tokens(14, 0);
  for (int32_t t = 40; t < 45; ++t) tokens.push_back(t);
  const std::vector<PageHash> at_0 = keys_of(tokens, {{0xa, 0, 12}}), at_2 = keys_of(tokens, {{0xa, 2, 12}});
  ASSERT_EQ(at_0.size(), 4u);
  for (size_t i = 0; i < at_0.size(); ++i) EXPECT_NE(at_0[i], at_2[i]) << "block " << i;
}

TEST(PrefixPool, ASecondHolderTakesTheNamedPrefix) {
  PagePool pool(small_layout(), 16);
  const PageHash seed = prefix_seed(small_layout(), "", 0);
  Holder a(iota_tokens(13), seed);  // 3 full pages + 1 token
  EXPECT_EQ(a.admit(pool), 0);
  Holder b(iota_tokens(13), seed);
  EXPECT_EQ(b.admit(pool), 3) << "every full page before the last token";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.table.pages()[size_t(i)], b.table.pages()[size_t(i)]);
    EXPECT_EQ(pool.ref_count(a.table.pages()[size_t(i)]), 2);
  }
  EXPECT_NE(a.table.pages()[3], b.table.pages()[3]) << "the partly filled page is never shared";
  Holder c(iota_tokens(13, 1), seed);  // other tokens from the first page on
  EXPECT_EQ(c.admit(pool), 0);
  Holder d(iota_tokens(13), prefix_seed(small_layout(), "lora", 1));
  EXPECT_EQ(d.admit(pool), 0) << "another adapter never hits";
  expect_accounted(pool);
  for (Holder* h : {&a, &b, &c, &d}) h->release(pool);
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_EQ(pool.cached_pages(), 9) << "a's (and b's) 3, c's 3, d's 3 full pages stay cached";
  expect_accounted(pool);
  Holder e(iota_tokens(17), seed);
  EXPECT_EQ(e.admit(pool), 3) << "taken back from the cache with no holder";
  EXPECT_EQ(pool.cached_pages(), 6);
  expect_accounted(pool);
}

TEST(PrefixPool, EvictsOldestFirstAndLeavesBeforeParents) {
  PagePool pool(small_layout(), 8);
  const PageHash seed = prefix_seed(small_layout(), "", 0);
  Holder a(iota_tokens(13), seed);  // pages a0 a1 a2 (named) + a3
  a.admit(pool);
  const std::vector<int32_t> pa = a.table.pages();
  a.release(pool);
  Holder b(iota_tokens(9, 100), seed);  // pages b0 b1 (named) + b2
  b.admit(pool);
  const std::vector<int32_t> pb = b.table.pages();
  b.release(pool);
  EXPECT_EQ(pool.cached_pages(), 5);
  EXPECT_EQ(pool.free_pages(), 3);
  // Free pages go first, then cached ones: a's (released first) leaf a2, then a1, a0, then b's.
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.allocate(3, got));
  EXPECT_EQ(pool.cached_pages(), 5) << "free pages are used before any cached one is evicted";
  for (int32_t want : {pa[2], pa[1], pa[0], pb[1], pb[0]}) {
    const auto page = pool.allocate();
    ASSERT_TRUE(page);
    EXPECT_EQ(*page, want);
  }
  EXPECT_FALSE(pool.allocate());
  expect_accounted(pool);
}

TEST(PrefixPool, TakingAPageBackMakesItNewest) {
  PagePool pool(small_layout(), 4);
  const PageHash seed = prefix_seed(small_layout(), "", 0);
  Holder a(iota_tokens(5), seed), b(iota_tokens(5, 50), seed);
  a.admit(pool);
  b.admit(pool);
  const int32_t a0 = a.table.pages()[0], b0 = b.table.pages()[0];
  a.release(pool);
  b.release(pool);  // LRU: a0, b0
  Holder again(iota_tokens(5), seed);
  EXPECT_EQ(again.admit(pool), 1);
  again.release(pool);  // LRU: b0, a0
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.allocate(3, got));  // two free pages, then the oldest cached: b0
  EXPECT_EQ(got.back(), b0);
  EXPECT_TRUE(pool.is_cached(a0));
}

TEST(PrefixPool, PagesInUseAreNeverEvicted) {
  PagePool pool(small_layout(), 6);
  const PageHash seed = prefix_seed(small_layout(), "", 0);
  Holder a(iota_tokens(17), seed);  // 4 named pages + 1, all held
  a.admit(pool);
  std::vector<int32_t> got;
  EXPECT_FALSE(pool.allocate(2, got)) << "one page is available";
  ASSERT_TRUE(pool.allocate(1, got));
  EXPECT_FALSE(pool.allocate());
  for (int32_t p : a.table.pages()) EXPECT_EQ(pool.ref_count(p), 1);
  Holder b(iota_tokens(17), seed);
  const auto m = pool.match(b.hashes.lookup_keys(b.tokens, 4));
  EXPECT_EQ(m.pages, 4);
  EXPECT_EQ(m.idle, 0) << "held pages cost an admission nothing";
  pool.release(got);
  a.release(pool);
  expect_accounted(pool);
}

TEST(PrefixPool, DuplicatePagesStayUnnamedAndAreFreed) {
  PagePool pool(small_layout(), 8);
  const PageHash seed = prefix_seed(small_layout(), "", 0);
  Holder a(iota_tokens(5), seed), b(iota_tokens(5), seed);
  // Both computed before either was named (side by side in one step).
  std::vector<int32_t> pages;
  ASSERT_TRUE(pool.allocate(2, pages));
  a.table.grow(0, 4, std::span(pages).first(1));
  b.table.grow(0, 4, std::span(pages).subspan(1));
  const PageHash h = a.hashes.lookup_keys(a.tokens, 4)[0];
  pool.register_page(pages[0], h);
  pool.register_page(pages[1], h);
  b.release(pool);
  EXPECT_EQ(pool.cached_pages(), 0) << "the duplicate went back to the free list";
  a.release(pool);
  EXPECT_EQ(pool.cached_pages(), 1);
  expect_accounted(pool);
}

TEST(PrefixPool, AccountingUnderRandomChurn) {
  PagePool pool(small_layout(), 40);
  const PageHash seed = prefix_seed(small_layout(), "", 0);
  std::mt19937 rng(11);
  const std::vector<int32_t> shared = iota_tokens(24);
  std::vector<std::unique_ptr<Holder>> live;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && (rng() % 3 == 0 || pool.available_pages() < 8)) {
      const size_t i = rng() % live.size();
      live[i]->release(pool);
      live.erase(live.begin() + ptrdiff_t(i));
    } else {
      std::vector<int32_t> tokens(shared.begin(), shared.begin() + ptrdiff_t(rng() % shared.size()));
      for (uint32_t k = 1 + rng() % 12; k > 0; --k) tokens.push_back(int32_t(100 + rng() % 3));
      live.push_back(std::make_unique<Holder>(tokens, seed));
      live.back()->admit(pool);
    }
    // Every held page is held exactly as often as tables list it.
    std::map<int32_t, int32_t> holds;
    for (const auto& h : live) {
      for (int32_t p : h->table.pages()) ++holds[p];
    }
    for (int32_t p = 0; p < pool.capacity(); ++p) ASSERT_EQ(pool.ref_count(p), holds.count(p) ? holds[p] : 0) << p;
    expect_accounted(pool);
  }
  for (auto& h : live) h->release(pool);
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_EQ(pool.free_pages() + pool.cached_pages(), pool.capacity());
  EXPECT_GT(pool.cached_pages(), 0);
}

}  // namespace
}  // namespace pagoda
