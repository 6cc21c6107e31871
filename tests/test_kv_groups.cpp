// KV groups (engine/kv/kv_groups.h): the layers' partition into groups of page slots; block
// tables with a page list per group whose sliding groups give back the pages that fell out of
// their window; the pool's prefix matches over groups; and gemma2, gemma3 and phi3-with-a-window
// models generating far past their window: the oracle's logits at every position, bit-for-bit
// batch invariance, the exact in-use page bound, prefix-cache hits, preemption, cancel and
// speculation through the Engine, and a long generation that only fits because pages are freed.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/forward/model_runner.h"
#include "engine/kv/block_table.h"
#include "engine/kv/page_pool.h"
#include "testing/reference_model.h"
#include "engine/sampling/sampler.h"
#include "testing/synth.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/oracle.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::DrivenSequence;

constexpr int32_t kWindow = 8;
constexpr int32_t kTokensPerPage = 4;

ModelConfig config_of(Architecture arch, int32_t n_layers, int32_t window) {
  ModelConfig c;
  c.arch = arch;
  c.n_layers = n_layers;
  c.sliding_window = window;
  c.dim = 64, c.n_heads = 4, c.n_kv_heads = 2;
  return c;
}

// ---- the partition ----

TEST(KvGroups, NoSlidingLayerKeepsOneGroupOfEveryLayer) {
  const ModelConfig c = config_of(Architecture::Llama, 5, 0);
  EXPECT_TRUE(KvGroups::of(c).empty());
  const KvLayout layout = KvLayout::for_model(c, 16);
  EXPECT_EQ(layout.n_groups(), 1);
  EXPECT_EQ(layout.slots(), 5);
  EXPECT_EQ(layout.bytes_per_page(), size_t(5) * 2 * 2 * 16 * 16 * sizeof(float));
  for (int32_t l = 0; l < 5; ++l)
    EXPECT_EQ(layout.block_offset(l, 1, 1), ((size_t(l) * 2 + 1) * 2 + 1) * layout.block_bytes());
}

TEST(KvGroups, Gemma2SplitsGlobalAndSlidingHalves) {
  const KvGroups g = KvGroups::of(config_of(Architecture::Gemma2, 4, 32));
  EXPECT_EQ(g.slots, 2);
  EXPECT_EQ(g.windows, (std::vector<int32_t>{0, 32}));
  EXPECT_EQ(g.layer_group, (std::vector<int32_t>{1, 0, 1, 0}));  // even layers slide
  EXPECT_EQ(g.layer_slot, (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(KvLayout::for_model(config_of(Architecture::Gemma2, 4, 32), 16).bytes_per_page(),
            KvLayout::for_model(config_of(Architecture::Llama, 2, 0), 16).bytes_per_page());
}

TEST(KvGroups, Gemma3GroupsSlidingLayersByTheGlobalCount) {
  // 26 layers: 4 global (5, 11, 17, 23), 22 sliding in 6 groups of 4 slots, the last using 2.
  const KvGroups g = KvGroups::of(config_of(Architecture::Gemma3, 26, 512));
  EXPECT_EQ(g.slots, 4);
  EXPECT_EQ(g.windows, (std::vector<int32_t>{0, 512, 512, 512, 512, 512, 512}));
  std::vector<std::vector<int32_t>> used(g.windows.size(), std::vector<int32_t>(4, 0));
  for (int32_t l = 0; l < 26; ++l) {
    EXPECT_EQ(g.windows[size_t(g.layer_group[size_t(l)])] == 0, (l + 1) % 6 == 0) << "layer " << l;
    ++used[size_t(g.layer_group[size_t(l)])][size_t(g.layer_slot[size_t(l)])];
  }
  for (size_t k = 0; k < used.size(); ++k)
    for (int32_t n : used[k]) EXPECT_LE(n, 1) << "group " << k << " has a slot twice";
  EXPECT_EQ(used.back(), (std::vector<int32_t>{1, 1, 0, 0}));
}

TEST(KvGroups, Phi3WithAWindowIsOneSlidingGroup) {
  const KvGroups g = KvGroups::of(config_of(Architecture::Phi3, 3, 16));
  EXPECT_EQ(g.slots, 3);
  EXPECT_EQ(g.windows, (std::vector<int32_t>{16}));
  EXPECT_EQ(g.layer_slot, (std::vector<int32_t>{0, 1, 2}));
}

// ---- block tables ----

KvLayout gemma2_layout() { return KvLayout::for_model(config_of(Architecture::Gemma2, 4, kWindow), kTokensPerPage); }

TEST(KvGroupsBlockTable, SlidingGroupsGiveBackPagesBeforeTheWindow) {
  const KvLayout layout = gemma2_layout();
  PagePool pool(layout, 64);
  BlockTable t(layout);
  for (int32_t n = 0; n < 60; ++n) {  // decode position n
    ASSERT_TRUE(t.reserve(n, n + 1, pool));
    const int32_t all = n / kTokensPerPage + 1;
    const int32_t first = std::max(0, n - kWindow + 1) / kTokensPerPage;
    EXPECT_EQ(pool.used_pages(), all + all - first) << "position " << n;
    EXPECT_LE(all - first, kWindow / kTokensPerPage + 1);
    EXPECT_EQ(t.capacity_tokens(), all * kTokensPerPage);
    pool.release(t.take_dead_pages(n + 1));
    for (int32_t i = 0; i < all; ++i) {
      EXPECT_NE(t.pages(0)[size_t(i)], BlockTable::kHole) << "the full-attention group keeps every page";
      EXPECT_EQ(t.pages(1)[size_t(i)] == BlockTable::kHole, i < std::max(0, n + 1 - kWindow + 1) / kTokensPerPage);
    }
  }
  // Swap-out keeps the live pages only: 15 full, and the 2 the sliding window of 60 sees.
  EXPECT_EQ(t.live_pages(60).size(), 15u + 2u);
  // Rejected guesses' pages go back from both groups.
  ASSERT_TRUE(t.reserve(60, 66, pool));
  const std::vector<int32_t> beyond = t.take_pages_beyond(61);
  EXPECT_EQ(beyond.size(), 2u);
  pool.release(beyond);
  EXPECT_EQ(t.held_pages(), 16 + 3);
  t.release(pool);
  EXPECT_EQ(pool.free_pages(), pool.capacity());
}

TEST(KvGroupsBlockTable, AdmissionReachesOneWindowIntoSlidingGroups) {
  const KvLayout layout = gemma2_layout();
  BlockTable t(layout);
  // From position 20 (a prefix hit) to 40: the full group all 10 pages; the sliding one from
  // the window of 20 (position 13, page 3) to one window on (position 28, page 7).
  EXPECT_EQ(t.group_pages_needed(0, 20, 40, BlockTable::Reach::Admission), 10);
  EXPECT_EQ(t.group_pages_needed(1, 20, 40, BlockTable::Reach::Admission), 4);
  EXPECT_EQ(t.pages_needed(20, 40), 10 + 7);
  std::vector<int32_t> pages(14);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = int32_t(i);
  t.grow(20, 40, pages, BlockTable::Reach::Admission);
  EXPECT_EQ(t.pages(1),
            (std::vector<int32_t>{BlockTable::kHole, BlockTable::kHole, BlockTable::kHole, 10, 11, 12, 13}));
  EXPECT_EQ(t.capacity_tokens(), 28);
  EXPECT_EQ(t.pages_needed(20, 40), 3) << "the steps add the rest of the sliding group's pages";
}

TEST(KvGroupsBlockTable, PeakPagesCountEveryGroup) {
  const KvLayout layout = gemma2_layout();
  EXPECT_EQ(layout.peak_pages(400, 1), 100 + (kWindow / kTokensPerPage + 1));
  EXPECT_EQ(layout.peak_pages(400, 16), 100 + ((kWindow - 1 + 16 + 3) / 4 + 1));
  EXPECT_EQ(layout.peak_pages(6, 16), 2 + 2) << "a short sequence holds all of its pages";
  const KvLayout plain = KvLayout::for_model(config_of(Architecture::Llama, 4, 0), 16);
  EXPECT_EQ(plain.peak_pages(400, 512), 25);
}

// ---- prefix matches over groups ----

// A sequence's pages in a gemma2 layout, named as the decode scheduler names them.
struct Holder {
  std::vector<int32_t> tokens;
  PrefixHashes hashes;
  BlockTable table{gemma2_layout()};
  int32_t hit = 0;  // blocks taken from the cache

  Holder(int32_t n, const PageHash& seed) {
    for (int32_t i = 0; i < n; ++i) tokens.push_back(i * 7 % 101);
    hashes.reset(seed);
  }
  // Admits through the cache, then computes the rest one position a step, giving back the
  // sliding group's dead pages after naming what filled.
  void run(PagePool& pool) {
    const auto keys = hashes.lookup_keys(tokens, kTokensPerPage);
    const PagePool::PrefixMatch m = pool.match(keys);
    hit = m.blocks;
    const int32_t from = hit * kTokensPerPage, to = int32_t(tokens.size());
    // As the page-pool actor does: every group's hit first, then the fresh pages.
    std::vector<std::vector<int32_t>> cached(size_t(table.groups()));
    for (int32_t g = 0; g < table.groups(); ++g) pool.take_prefix(g, keys, hit, cached[size_t(g)]);
    std::vector<int32_t> pages;
    for (int32_t g = 0; g < table.groups(); ++g) {
      pages.insert(pages.end(), cached[size_t(g)].begin(), cached[size_t(g)].end());
      const int32_t fresh =
          table.group_pages_needed(g, from, to, BlockTable::Reach::Admission) - int32_t(cached[size_t(g)].size());
      ASSERT_TRUE(pool.allocate(fresh, pages));
    }
    table.grow(from, to, pages, BlockTable::Reach::Admission);
    hashes.set_offered(hit);
    for (int32_t n = from; n < to; ++n) {
      ASSERT_TRUE(table.reserve(n, n + 1, pool));
      std::vector<NamedPage> named;
      hashes.collect_full(tokens, n + 1, table, named);
      for (const NamedPage& p : named) pool.register_page(p.page, p.hash, p.group);
      pool.release(table.take_dead_pages(n + 1));
    }
  }
  // Runs, then finishes: its pages stay in the cache, named.
  void run_and_release(PagePool& pool) {
    run(pool);
    table.release(pool);
  }
};

// A gemma2 layout and the prefix seed its sequences share.
class KvGroupsPrefix : public ::testing::Test {
 protected:
  const KvLayout layout = gemma2_layout();
  const PageHash seed = prefix_seed(layout, "", 0);
};

void expect_accounted(const PagePool& pool) {
  EXPECT_EQ(pool.free_pages() + pool.cached_pages() + pool.used_pages(), pool.capacity());
}

TEST_F(KvGroupsPrefix, AHitNeedsTheSlidingBlocksOfItsWindowOnly) {
  PagePool pool(layout, 64);
  Holder a(41, seed);  // 10 full blocks; the sliding group gave back blocks 0–7 as it went
  a.run(pool);
  EXPECT_EQ(a.table.held_pages(), 11 + 3);
  EXPECT_EQ(pool.cached_pages(), 8) << "released sliding pages stay named";
  Holder b(41, seed);
  const PagePool::PrefixMatch m = pool.match(b.hashes.lookup_keys(b.tokens, kTokensPerPage));
  EXPECT_EQ(m.blocks, 10);
  // Full group: blocks 0–9; sliding: the window of position 40 starts at 33, block 8.
  EXPECT_EQ(m.pages, 10 + 2);
  EXPECT_EQ(m.idle, 0) << "a still holds them";
  a.table.release(pool);
  expect_accounted(pool);
  b.run(pool);
  EXPECT_EQ(b.hit, 10);
  EXPECT_EQ(b.table.pages(1)[0], BlockTable::kHole) << "blocks before the window are holes";
  b.table.release(pool);
  EXPECT_EQ(pool.used_pages(), 0);
  expect_accounted(pool);
}

TEST_F(KvGroupsPrefix, MissingSlidingBlocksInTheWindowShortenTheHit) {
  PagePool pool(layout, 64);
  Holder(41, seed).run_and_release(pool);
  // A fresh run of 24 tokens admitted on the first one's cache: it needs only sliding blocks 3–4.
  Holder b(24, seed);
  const PagePool::PrefixMatch m = pool.match(b.hashes.lookup_keys(b.tokens, kTokensPerPage));
  EXPECT_EQ(m.blocks, 5);
  EXPECT_EQ(m.pages, 5 + 2);
  EXPECT_EQ(m.idle, 7);
  // Evict every cached page but the full group's: no sliding block left, so no hit at all.
  std::vector<int32_t> squat;
  ASSERT_TRUE(pool.allocate(pool.free_pages(), squat));
  while (pool.cached_pages() > 10) squat.push_back(*pool.allocate());
  EXPECT_EQ(pool.match(b.hashes.lookup_keys(b.tokens, kTokensPerPage)).blocks, 0);
  pool.release(squat);
  expect_accounted(pool);
}

TEST_F(KvGroupsPrefix, TheOldestSlidingPagesAreEvictedFirstAndLongHitsSurviveThem) {
  PagePool pool(layout, 40);
  Holder(41, seed).run_and_release(pool);
  EXPECT_EQ(pool.used_pages(), 0);
  // Eviction takes the LRU's head: the sliding pages the first run gave back as it went (blocks 0–7).
  std::vector<int32_t> squat;
  ASSERT_TRUE(pool.allocate(pool.free_pages() + 8, squat));
  pool.release(std::span(squat).last(2));  // room for b's last pages (unnamed: freed)
  squat.resize(squat.size() - 2);
  Holder short_prefix(24, seed);  // its window needed sliding blocks 3–4: gone
  EXPECT_EQ(pool.match(short_prefix.hashes.lookup_keys(short_prefix.tokens, kTokensPerPage)).blocks, 0);
  Holder b(41, seed);
  b.run(pool);
  EXPECT_EQ(b.hit, 10) << "the whole prefix still hits: its window's sliding blocks are cached";
  b.table.release(pool);
  pool.release(squat);
  expect_accounted(pool);
}

// ---- models ----

struct SlidingModel {
  const char* name;
  Architecture arch;
  int32_t n_layers;
  int32_t key_length;
};

// gemma2: 4 layers (2 groups of 2 slots); gemma3: 20 layers (3 global, 17 sliding in 6
// groups of 3 slots, the last with one unused); phi3 with a window on every layer.
const SlidingModel kModels[] = {
    {"gemma2", Architecture::Gemma2, 4, 32},
    {"gemma3", Architecture::Gemma3, 20, 32},
    {"phi3", Architecture::Phi3, 2, 0},
};

std::string synth_sliding(const SlidingModel& m, int32_t context = 256) {
  SynthSpec spec;
  ModelConfig& c = spec.config;
  c.arch = m.arch;
  c.dim = 64, c.n_layers = m.n_layers, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 96, c.vocab_size = 600;
  c.context_length = context, c.key_length = m.key_length, c.rope_theta = 10000.0f, c.sliding_window = kWindow;
  if (m.arch == Architecture::Gemma2) c.attn_softcap = 1.5f, c.final_softcap = 3.0f;
  if (m.arch == Architecture::Gemma3) c.rope_theta = 1e6f;
  spec.seed = 23;
  spec.tied_output = true;
  const std::string path = test::scratch_path(std::string("kvg-") + m.name + "-" + std::to_string(context) + ".gguf");
  write_synth_model(path, spec);
  return path;
}

std::vector<int32_t> random_prompt(int32_t vocab, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = int32_t(1 + rng() % uint32_t(vocab - 1));
  return ids;
}

class SlidingModels : public ::testing::TestWithParam<SlidingModel> {};

// 130 tokens generated past a 20-token prompt (window 8, 4 tokens a page): every logits row
// agrees with the oracle, alone, and the decode rows are the same bits in a crowd with other
// chunking; the sliding groups' old pages went back as it went, and every page comes back.
TEST_P(SlidingModels, GenerationFarPastTheWindowMatchesTheOracle) {
  const Model model = load_model(synth_sliding(GetParam()));
  ASSERT_GT(KvLayout::for_model(model.config, kTokensPerPage).n_groups(),
            GetParam().arch == Architecture::Phi3 ? 0 : 1);
  ModelRunner runner(model, 2);
  PagePool pool(KvLayout::for_model(model.config, kTokensPerPage), 2048);
  const std::vector<int32_t> prompt = random_prompt(model.config.vocab_size, 20, 5);
  constexpr int32_t kNew = 130;

  std::vector<DrivenSequence> alone;
  alone.emplace_back(prompt, int32_t(prompt.size()) + kNew - 1, -1, kTokensPerPage);
  test::run_together(runner, pool, alone, 1, true);
  EXPECT_EQ(pool.free_pages(), pool.capacity());
  const DrivenSequence& s = alone[0];
  ASSERT_EQ(s.generated().size(), size_t(kNew));
  ReferenceModel oracle(model);
  for (size_t pos = 0; pos + 1 < s.tokens.size(); ++pos) {
    EXPECT_LT(test::relative_error(s.logits[pos], oracle.forward(s.tokens[pos], int32_t(pos))), 1e-4)
        << "position " << pos;
  }

  std::vector<DrivenSequence> crowd;
  crowd.emplace_back(prompt, int32_t(prompt.size()) + kNew - 1, -1, kTokensPerPage);
  for (uint32_t k = 0; k < 3; ++k) {
    const std::vector<int32_t> other = random_prompt(model.config.vocab_size, 9 + 13 * k, 40 + k);
    crowd.emplace_back(other, int32_t(other.size()) + 30 + 20 * int32_t(k), -1, kTokensPerPage);
  }
  test::run_together(runner, pool, crowd, 7, true);
  EXPECT_EQ(pool.free_pages(), pool.capacity());
  EXPECT_EQ(crowd[0].tokens, s.tokens);
  for (size_t i = 1; i <= size_t(kNew) - 1; ++i) {
    EXPECT_EQ(crowd[0].logits[crowd[0].logits.size() - i], s.logits[s.logits.size() - i]) << "decode row -" << i;
  }
}

// One sequence driven as the engine does (reserve, forward, give back the dead pages): at every
// step the pool's pages in use are exactly the full groups' pages of every position so far and
// the sliding groups' pages from the window of the step's first position on.
TEST_P(SlidingModels, PagesInUseStayWithinTheWindowBound) {
  const Model model = load_model(synth_sliding(GetParam()));
  const KvLayout layout = KvLayout::for_model(model.config, kTokensPerPage);
  ModelRunner runner(model, 2);
  PagePool pool(layout, 2048);
  int32_t full = 0, sliding = 0;
  for (int32_t g = 0; g < layout.n_groups(); ++g) ++(layout.window(g) ? sliding : full);
  const std::vector<int32_t> prompt = random_prompt(model.config.vocab_size, 30, 9);
  std::vector<int32_t> tokens = prompt;
  BlockTable table(layout);
  std::vector<float> logits;
  int32_t n_cached = 0, peak = 0;
  constexpr int32_t kChunk = 10;
  while (tokens.size() < 200) {
    const int32_t n = std::min<int32_t>(kChunk, int32_t(tokens.size()) - n_cached);
    ASSERT_TRUE(table.reserve(n_cached, n_cached + n, pool));
    const int32_t end_page = (n_cached + n + kTokensPerPage - 1) / kTokensPerPage;
    const int32_t first = std::max(0, n_cached - kWindow + 1) / kTokensPerPage;
    ASSERT_EQ(pool.used_pages(), full * end_page + sliding * (end_page - first)) << "from position " << n_cached;
    const int32_t bound = sliding * ((kWindow - 1 + n + kTokensPerPage - 1) / kTokensPerPage + 1);
    ASSERT_LE(pool.used_pages(), full * end_page + bound);
    if (n == 1) {
      ASSERT_LE(pool.used_pages(), full * end_page + sliding * (kWindow / kTokensPerPage + 1));
    }
    peak = std::max(peak, pool.used_pages());
    Batch batch;
    const bool last = n_cached + n == int32_t(tokens.size());
    batch.entries.push_back(
        {std::span<const int32_t>(tokens).subspan(size_t(n_cached), size_t(n)), n_cached, &table, last});
    runner.forward(batch, pool.view(), logits);
    n_cached += n;
    pool.release(table.take_dead_pages(n_cached));
    if (last) tokens.push_back(argmax(logits));
  }
  std::printf("[ %s ] %d groups (%d full): peak %d pages in use for %zu positions; %d without freeing\n",
              GetParam().name, layout.n_groups(), full, peak, tokens.size(),
              layout.n_groups() * int32_t((tokens.size() - 1 + kTokensPerPage - 1) / kTokensPerPage));
  table.release(pool);
  EXPECT_EQ(pool.free_pages(), pool.capacity());
}

INSTANTIATE_TEST_SUITE_P(Synth, SlidingModels, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<SlidingModel>& info) {
                           return std::string(info.param.name);
                         });

// ---- through the Engine ----

Request greedy(const std::vector<int32_t>& prompt, int32_t n) {
  Request r = test::greedy_request(prompt, n);
  r.logprobs = 2;
  return r;
}

EngineConfig engine_config(const std::string& path) {
  return {.model_path = path,
          .threads = 2,
          .kv_pages = 4096,
          .tokens_per_page = kTokensPerPage,
          .kv_cache_type = KvCacheType::F32,
          .max_tokens_per_step = 16,
          .prefill_chunk = 16};
}

// A shared prefix of 48 positions (six windows) hits the cache after the first request gave
// back its sliding pages: alone afterwards, and beside it while it runs. Tokens and logprobs
// are those of an engine without the cache, and the oracle's.
TEST_P(SlidingModels, PrefixCacheHitsGiveTheTokensOfNoCache) {
  const std::string path = synth_sliding(GetParam());
  const Model model = load_model(path);
  const std::vector<int32_t> a = random_prompt(model.config.vocab_size, 60, 501);
  std::vector<int32_t> b(a.begin(), a.begin() + 50);
  const std::vector<int32_t> tail = random_prompt(model.config.vocab_size, 15, 502);
  b.insert(b.end(), tail.begin(), tail.end());
  std::vector<int32_t> c(a.begin(), a.begin() + 30);  // shares less than a's prompt
  c.push_back(7);

  EngineConfig cfg = engine_config(path);
  cfg.prefix_caching = false;
  Engine plain(cfg);
  const std::vector<Request> sequential = {greedy(a, 40), greedy(b, 40), greedy(a, 40)};
  const std::vector<Request> together = {greedy(b, 30), greedy(c, 30), greedy(a, 30)};
  std::vector<Completion> want_sequential;
  for (const Request& r : sequential) want_sequential.push_back(test::run_all(plain, {r})[0]);
  const std::vector<Completion> want_together = test::run_all(plain, together);
  EXPECT_EQ(want_sequential[0].token_ids, test::oracle_greedy(model, a, 40));
  EXPECT_EQ(want_sequential[1].token_ids, test::oracle_greedy(model, b, 40));

  Engine cached(engine_config(path));
  std::vector<Completion> got_sequential;
  std::vector<int64_t> hits;
  for (const Request& r : sequential) {
    const int64_t before = cached.metrics().prefix_hit_tokens;
    got_sequential.push_back(test::run_all(cached, {r})[0]);
    hits.push_back(cached.metrics().prefix_hit_tokens - before);
  }
  test::expect_same_completions(got_sequential, want_sequential);
  EXPECT_EQ(hits, (std::vector<int64_t>{0, 48, 56})) << "b: 12 of its blocks; a again: all before its last token";
  const int64_t before = cached.metrics().prefix_hit_tokens;
  test::expect_same_completions(test::run_all(cached, together), want_together);
  std::printf("[ %s ] prefix hit tokens: b %lld, a again %lld, then %lld in the crowd\n", GetParam().name,
              (long long)hits[1], (long long)hits[2], (long long)(cached.metrics().prefix_hit_tokens - before));
  test::expect_engine_idle(cached);
  test::expect_engine_idle(plain);
}

// A pool with room for one and a half of the six sequences at once: both preemption modes
// (with prefix-cache hits on re-admission) give the same bits as a roomy pool, and every page
// comes back.
TEST_P(SlidingModels, PreemptionGivesTheTokensOfARoomyPool) {
  const std::string path = synth_sliding(GetParam());
  const Model model = load_model(path);
  std::vector<Request> rs;
  for (uint32_t i = 0; i < 6; ++i) rs.push_back(greedy(random_prompt(model.config.vocab_size, 12 + 5 * i, 70 + i), 70));
  Engine roomy(engine_config(path));
  const std::vector<Completion> want = test::run_all(roomy, rs);
  const KvLayout layout = KvLayout::for_model(model.config, kTokensPerPage);
  const EngineConfig roomy_config = engine_config(path);
  const auto one =
      int32_t(layout.peak_pages(int64_t(rs.back().prompt_ids.size()) + 70, roomy_config.max_tokens_per_step));
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    SCOPED_TRACE(mode == PreemptionMode::Swap ? "swap" : "recompute");
    EngineConfig cfg = roomy_config;
    cfg.kv_pages = one + one / 2;  // the longest sequence fits; six at once do not
    cfg.preemption = mode;
    Engine tight(cfg);
    test::expect_same_completions(test::run_all(tight, rs), want);
    EXPECT_GT(tight.metrics().preempted, 0) << "nothing was preempted";
    test::expect_engine_idle(tight);
  }
}

// Cancelled in the middle of generating past the window: every page comes back, and the
// others' tokens are unchanged.
TEST_P(SlidingModels, CancelMidGenerationReturnsEveryPage) {
  const std::string path = synth_sliding(GetParam());
  const Model model = load_model(path);
  Engine engine(engine_config(path));
  const Request keep = greedy(random_prompt(model.config.vocab_size, 25, 81), 60);
  const Completion want = test::run_all(engine, {keep})[0];
  test::SelfCancellingRequest doomed(engine, greedy(random_prompt(model.config.vocab_size, 25, 82), 150), 40);
  RequestHandle k = engine.submit(keep);
  const Completion cancelled = doomed.await();
  EXPECT_EQ(cancelled.finish_reason, FinishReason::Cancelled);
  EXPECT_LT(cancelled.token_ids.size(), 150u);
  test::expect_same_completions({test::await(k)}, {want});
  test::expect_engine_idle(engine);
}

// n-gram speculation on repeated prompts: plain decoding's bits, guesses accepted, rolled-back
// pages and the windows' dead pages all back.
TEST_P(SlidingModels, SpeculationGivesPlainTokens) {
  const std::string path = synth_sliding(GetParam());
  const Model model = load_model(path);
  Engine engine(engine_config(path));
  std::vector<Request> rs;
  for (uint32_t i = 0; i < 4; ++i) {
    const std::vector<int32_t> run = random_prompt(model.config.vocab_size, 6, 90 + i);
    std::vector<int32_t> prompt;
    for (int rep = 0; rep < 5; ++rep) prompt.insert(prompt.end(), run.begin(), run.end());
    rs.push_back(greedy(prompt, 80));
  }
  const std::vector<Completion> plain = test::run_all(engine, rs);
  const EngineMetrics before = engine.metrics();
  SpeculativeParams ngram;
  ngram.mode = SpeculativeMode::Ngram;
  ngram.draft_max = 6;
  for (Request& r : rs) r.speculative = ngram;
  test::expect_same_completions(test::run_all(engine, rs), plain);
  const EngineMetrics after = engine.metrics();
  EXPECT_GT(after.speculative_proposed, before.speculative_proposed) << "nothing was guessed";
  EXPECT_GT(after.speculative_accepted, before.speculative_accepted) << "nothing was accepted";
  test::expect_engine_idle(engine);
}

// A Gemma-3-shaped model (5 of every 6 layers sliding) generating 500 positions in a KV budget
// a quarter of what they would take if every layer kept every position: it runs, unpreempted,
// to the oracle's tokens. Before KV groups a page held every layer and the request was refused.
TEST(KvGroupsEngine, ALongGemma3GenerationFitsInAPoolTooSmallToKeepEveryPosition) {
  const SlidingModel shape{"gemma3", Architecture::Gemma3, 12, 32};  // 2 global, 10 sliding: 6 groups of 2
  const std::string path = synth_sliding(shape, 512);
  const Model model = load_model(path);
  const KvLayout layout = KvLayout::for_model(model.config, kTokensPerPage);
  const std::vector<int32_t> prompt = random_prompt(model.config.vocab_size, 20, 31);
  constexpr int32_t kNew = 480;
  const int64_t positions = int64_t(prompt.size()) + kNew;
  // What keeping every position costs, in bytes: every layer's K/V for all 500 positions.
  const size_t every_position = size_t(positions) * size_t(model.config.n_layers) * 2 *
                                size_t(model.config.n_kv_heads) * size_t(model.config.head_dim()) * sizeof(float);
  EngineConfig cfg = engine_config(path);
  cfg.kv_pages = 0;
  cfg.kv_bytes = every_position / 4;
  Engine engine(cfg);
  const int32_t pages = engine.metrics().kv_pages_total;
  std::printf(
      "[ gemma3 12 layers ] %d pages of %zu bytes (%zu bytes, 1/4 of every position's); one sequence of %lld "
      "positions needs %lld at most\n",
      pages, layout.bytes_per_page(), cfg.kv_bytes, (long long)positions,
      (long long)layout.peak_pages(positions, cfg.max_tokens_per_step));
  ASSERT_LT(int64_t(pages) * kTokensPerPage, positions * layout.n_groups()) << "the pool could hold every position";
  Request r = greedy(prompt, kNew);
  std::atomic<int32_t> most_used{0};
  r.on_token = [&](const StreamEvent&) {
    most_used = std::max(most_used.load(), int32_t(engine.metrics().kv_pages_used));
  };
  RequestHandle h = engine.submit(r);
  const Completion c = test::await(h);
  EXPECT_EQ(c.finish_reason, FinishReason::Length);
  EXPECT_EQ(c.preemptions, 0);
  EXPECT_EQ(c.token_ids, test::oracle_greedy(model, prompt, kNew));
  EXPECT_LE(most_used.load(), layout.peak_pages(positions, cfg.max_tokens_per_step));
  std::printf("[ gemma3 12 layers ] most pages in use seen while decoding: %d\n", most_used.load());
  test::expect_engine_idle(engine);
}

}  // namespace
}  // namespace pagoda
