#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "engine/kv/block_table.h"
#include "engine/kv/page_pool.h"
#include "pagoda/error.h"

namespace pagoda {
namespace {

KvLayout small_layout() { return {2, 2, 8, 4}; }

TEST(PagePool, AccountsForEveryPage) {
  PagePool pool(small_layout(), 10);
  EXPECT_EQ(pool.capacity(), 10);
  EXPECT_EQ(pool.free_pages(), 10);
  std::vector<int32_t> pages;
  ASSERT_TRUE(pool.allocate(7, pages));
  EXPECT_EQ(pool.used_pages(), 7);
  EXPECT_DOUBLE_EQ(pool.utilization(), 0.7);
  EXPECT_EQ(std::set<int32_t>(pages.begin(), pages.end()).size(), 7u) << "a page handed out twice";
  EXPECT_FALSE(pool.allocate(4, pages)) << "all or nothing";
  EXPECT_EQ(pages.size(), 7u);
  pool.release(pages);
  EXPECT_EQ(pool.free_pages(), pool.capacity());
}

TEST(PagePool, ReferenceCountsKeepSharedPagesAlive) {
  PagePool pool(small_layout(), 2);
  const int32_t page = *pool.allocate();
  pool.retain(page);
  EXPECT_EQ(pool.ref_count(page), 2);
  pool.release(page);
  EXPECT_EQ(pool.free_pages(), 1);
  pool.release(page);
  EXPECT_EQ(pool.free_pages(), 2);
  EXPECT_THROW(pool.release(page), Error) << "double free";
  EXPECT_THROW(pool.retain(page), Error);
  EXPECT_THROW(pool.release(99), Error);
}

TEST(PagePool, PagesDoNotOverlap) {
  const KvLayout layout = small_layout();
  PagePool pool(layout, 3);
  const KvView view = pool.view();
  // Every (page, layer, K/V, head) block is distinct memory of block_bytes bytes.
  std::set<const std::byte*> starts;
  for (int32_t p = 0; p < 3; ++p)
    for (int32_t l = 0; l < layout.n_layers; ++l)
      for (int32_t which = 0; which < 2; ++which)
        for (int32_t h = 0; h < layout.n_kv_heads; ++h) starts.insert(view.block(p, l, which, h));
  ASSERT_EQ(starts.size(), size_t(3 * layout.n_layers * 2 * layout.n_kv_heads));
  for (auto it = std::next(starts.begin()); it != starts.end(); ++it) {
    EXPECT_EQ(*it - *std::prev(it), ptrdiff_t(layout.block_bytes()));
  }
  EXPECT_EQ(*starts.rbegin() + layout.block_bytes(), pool.page_data(2) + layout.bytes_per_page());
}

// The fraction of the arena's OS pages that are resident (mincore), untouched by the check.
double resident_fraction(const PagePool& pool) {
  const size_t os_page = size_t(sysconf(_SC_PAGESIZE));
  const size_t bytes = pool.layout().bytes_per_page() * size_t(pool.capacity());
  std::vector<unsigned char> resident((bytes + os_page - 1) / os_page);
  EXPECT_EQ(mincore(const_cast<std::byte*>(pool.page_data(0)), bytes, resident.data()), 0);
  return double(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; })) /
         double(resident.size());
}

TEST(PagePool, PrefaultMakesTheArenaResidentAtOnce) {
  const KvLayout layout{4, 8, 64, 16};  // 256 KiB pages of f32 K and V: a 64 MiB arena
  const PagePool lazy(layout, 256);
  EXPECT_LT(resident_fraction(lazy), 0.1) << "without prefault, pages become resident as they are written";
  const PagePool eager(layout, 256, true);
  EXPECT_EQ(resident_fraction(eager), 1.0);
}

TEST(PagePool, BudgetInBytes) {
  const KvLayout layout = small_layout();
  EXPECT_EQ(PagePool::pages_for_bytes(layout, layout.bytes_per_page() * 5 + 3), 5);
  EXPECT_EQ(PagePool::pages_for_bytes(layout, 1), 0);
  EXPECT_THROW(PagePool(layout, 0), Error);
}

TEST(BlockTable, GrowsByWholePagesAndWastesLessThanOne) {
  PagePool pool(small_layout(), 8);  // 4 tokens a page
  BlockTable table(4);
  for (int32_t n = 1; n <= 20; ++n) {
    ASSERT_TRUE(table.reserve(n, pool));
    EXPECT_GE(table.capacity_tokens(), n);
    EXPECT_LT(table.capacity_tokens() - n, 4) << "more than one partly filled page";
  }
  EXPECT_EQ(pool.used_pages(), 5);
  EXPECT_FALSE(table.reserve(40, pool)) << "only 3 pages left";
  EXPECT_EQ(table.pages().size(), 5u) << "a failed reserve changes nothing";
  table.release(pool);
  EXPECT_TRUE(table.pages().empty());
  EXPECT_EQ(pool.free_pages(), pool.capacity());
}

TEST(BlockTable, RandomChurnReturnsEveryPage) {
  PagePool pool(small_layout(), 64);
  std::mt19937 rng(3);
  std::vector<BlockTable> tables(12, BlockTable(4));
  std::vector<int32_t> lengths(12, 0);
  for (int step = 0; step < 2000; ++step) {
    const size_t i = rng() % tables.size();
    if (rng() % 5 == 0) {
      tables[i].release(pool);
      lengths[i] = 0;
    } else if (tables[i].reserve(lengths[i] + 1 + int32_t(rng() % 6), pool)) {
      lengths[i] = tables[i].capacity_tokens();
    }
    std::set<int32_t> owned;
    for (const BlockTable& t : tables) {
      for (int32_t p : t.pages()) EXPECT_TRUE(owned.insert(p).second) << "page " << p << " in two tables";
    }
    ASSERT_EQ(int32_t(owned.size()), pool.used_pages());
  }
  for (BlockTable& t : tables) t.release(pool);
  EXPECT_EQ(pool.free_pages(), pool.capacity());
}

}  // namespace
}  // namespace pagoda
