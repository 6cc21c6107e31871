// Prefix caching changes no bit: logits with a cached prefix are bit-identical to logits
// without one — the same request again, after another request warmed the cache, after
// eviction and recompute, with an adapter (which never meets another adapter's pages), under
// swap preemption (as the runner sees it, for every KV cache type), and, through the engine,
// under both kinds of preemption.

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "engine/forward/model_runner.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/prefix_cache.h"
#include "engine/lora/lora_weights.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "testing/lora_synth.h"
#include "testing/synth.h"
#include "pagoda/engine.h"
#include "support/lora_support.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::await;

// Swap preemption as the decode scheduler does it: after `after_tokens` generated tokens the
// request's pages are copied out as bytes and every page is released; `while_swapped` runs
// (other requests churn the pool); the bytes come back into freshly allocated pages.
struct SwapOut {
  int32_t after_tokens = -1;
  std::function<void()> while_swapped;
};

void swap_out_and_in(PagePool& pool, BlockTable& table, PrefixHashes& hashes, int32_t n_cached, const SwapOut& swap) {
  const size_t page_bytes = pool.layout().bytes_per_page();
  const int32_t used = int32_t(table.pages().size());
  std::vector<std::byte> host(size_t(used) * page_bytes);
  for (int32_t i = 0; i < used; ++i) {
    std::memcpy(host.data() + size_t(i) * page_bytes, pool.page_data(table.pages()[size_t(i)]), page_bytes);
  }
  pool.release(table.take_pages());
  swap.while_swapped();
  if (!table.reserve(n_cached, pool)) throw std::runtime_error("no room to swap back in");
  for (int32_t i = 0; i < used; ++i) {
    std::memcpy(pool.page_data(table.pages()[size_t(i)]), host.data() + size_t(i) * page_bytes, page_bytes);
  }
  hashes.set_offered(0);  // the fresh copies are offered again; the pool names those not taken
}

// One request driven the way the engine drives it: take the cached prefix (when `use_cache`),
// feed the rest in chunks of `chunk`, decode greedily, name each page as it fills, release.
struct Outcome {
  std::vector<std::vector<float>> logits;  // one row per generated token
  std::vector<int32_t> generated;
  int32_t cached_tokens = 0;
};

Outcome run(ModelRunner& runner, PagePool& pool, const std::vector<int32_t>& prompt, const PageHash& seed,
            bool use_cache, int32_t chunk = 16, int32_t n_new = 8, const LoraWeights* lora = nullptr,
            const SwapOut& swap = {}) {
  const int32_t tpp = pool.layout().tokens_per_page;
  const size_t vocab = size_t(runner.config().vocab_size);
  std::vector<int32_t> tokens = prompt;
  PrefixHashes hashes;
  hashes.reset(seed);
  BlockTable table(tpp);
  std::vector<int32_t> pages;
  const auto keys = hashes.lookup_keys(tokens, tpp);
  const int32_t taken = use_cache ? pool.take_prefix(0, keys, pool.match(keys).blocks, pages) : 0;
  table.grow(taken * tpp, taken * tpp, pages);
  hashes.set_offered(taken);
  int32_t n_cached = taken * tpp;
  Outcome out;
  out.cached_tokens = n_cached;
  std::vector<float> logits;
  while (int32_t(out.generated.size()) < n_new) {
    const int32_t n = std::min(chunk, int32_t(tokens.size()) - n_cached);
    if (!table.reserve(n_cached + n, pool)) throw std::runtime_error("the test's KV pool is too small");
    Batch batch;
    const bool last = n_cached + n == int32_t(tokens.size());
    batch.entries.push_back(
        {std::span<const int32_t>(tokens).subspan(size_t(n_cached), size_t(n)), n_cached, &table, last, lora});
    runner.forward(batch, pool.view(), logits);
    n_cached += n;
    if (use_cache) {
      std::vector<NamedPage> named;
      hashes.collect_full(tokens, n_cached, table, named);
      for (const NamedPage& p : named) pool.register_page(p.page, p.hash, p.group);
    }
    if (!last) continue;
    out.logits.emplace_back(logits.begin(), logits.begin() + ptrdiff_t(vocab));
    out.generated.push_back(argmax(out.logits.back()));
    tokens.push_back(out.generated.back());
    if (int32_t(out.generated.size()) == swap.after_tokens) swap_out_and_in(pool, table, hashes, n_cached, swap);
  }
  pool.release(table.take_pages());
  return out;
}

bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

class PrefixCacheLogits : public test::StoriesTest {
 protected:
  void SetUp() override {
    test::StoriesTest::SetUp();
    if (IsSkipped()) return;
    model = std::make_unique<Model>(load_model(model_));
    runner = std::make_unique<ModelRunner>(*model, 2);
    layout = KvLayout::for_model(model->config, 8);
    base_seed = prefix_seed(layout, "", 0);
    // Long prompts: a golden prompt and its story, so they span several pages.
    for (const auto& g : cases_) {
      std::vector<int32_t> p = g.prompt_ids;
      p.insert(p.end(), g.greedy_ids.begin(),
               g.greedy_ids.begin() + std::min<ptrdiff_t>(60, ptrdiff_t(g.greedy_ids.size())));
      prompts.push_back(p);
    }
  }

  // The request alone on a fresh pool, without the cache.
  Outcome reference(const std::vector<int32_t>& prompt, const LoraWeights* lora = nullptr) {
    PagePool fresh(layout, 64);
    return run(*runner, fresh, prompt, base_seed, false, 16, 8, lora);
  }

  std::unique_ptr<Model> model;
  std::unique_ptr<ModelRunner> runner;
  KvLayout layout;
  PageHash base_seed;
  std::vector<std::vector<int32_t>> prompts;
};

TEST_F(PrefixCacheLogits, SameRequestAgain) {
  for (size_t len : {prompts[0].size(), size_t(48)}) {  // 48: the whole prompt is full pages
    SCOPED_TRACE(len);
    PagePool pool(layout, 64);
    const std::vector<int32_t> prompt(prompts[0].begin(), prompts[0].begin() + ptrdiff_t(len));
    const Outcome want = reference(prompt);
    const Outcome cold = run(*runner, pool, prompt, base_seed, true);
    const Outcome warm = run(*runner, pool, prompt, base_seed, true);
    EXPECT_EQ(cold.cached_tokens, 0);
    // Every full page before the last token: a prompt of whole pages backs off one page.
    EXPECT_EQ(warm.cached_tokens, int32_t((len - 1) / 8 * 8));
    EXPECT_TRUE(bitwise_equal(cold.logits, want.logits));
    EXPECT_TRUE(bitwise_equal(warm.logits, want.logits));
    EXPECT_EQ(warm.generated, want.generated);
  }
}

TEST_F(PrefixCacheLogits, AfterAnotherRequestWarmedTheCache) {
  PagePool pool(layout, 64);
  // b shares a's first 27 tokens (3 full pages), then differs; warmed in chunks of 5.
  std::vector<int32_t> a = prompts[1], b(a.begin(), a.begin() + 27);
  b.insert(b.end(), prompts[2].begin(), prompts[2].end());
  run(*runner, pool, b, base_seed, true, 5);
  const Outcome got = run(*runner, pool, a, base_seed, true, 64);
  EXPECT_EQ(got.cached_tokens, 24);
  EXPECT_TRUE(bitwise_equal(got.logits, reference(a).logits));
}

TEST_F(PrefixCacheLogits, AfterEvictionAndRecompute) {
  // Room for one request: each new prompt evicts the cached pages of the last.
  const int32_t pages = int32_t((prompts[0].size() + 8 + 7) / 8) + 1;
  PagePool pool(layout, pages);
  const Outcome want = reference(prompts[0]);
  EXPECT_EQ(run(*runner, pool, prompts[0], base_seed, true).cached_tokens, 0);
  run(*runner, pool, prompts[1], base_seed, true);
  run(*runner, pool, prompts[2], base_seed, true);
  const Outcome recomputed = run(*runner, pool, prompts[0], base_seed, true);
  EXPECT_LT(recomputed.cached_tokens, int32_t(prompts[0].size()) - 8) << "its pages were evicted";
  EXPECT_TRUE(bitwise_equal(recomputed.logits, want.logits));
  const Outcome again = run(*runner, pool, prompts[0], base_seed, true);
  EXPECT_EQ(again.cached_tokens, int32_t((prompts[0].size() - 1) / 8 * 8));
  EXPECT_TRUE(bitwise_equal(again.logits, want.logits));
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_EQ(pool.free_pages() + pool.cached_pages(), pool.capacity());
}

// Under swap preemption, for every KV cache type (a random model whose head_dim, 32, holds
// q8_0 blocks): a warms the cache; b takes a's cached prefix and is swapped out after 3 tokens
// while c, in a pool just big enough, evicts a's pages; b comes back into other pages and
// finishes with the logits of the uncached run; then b again finds the copies it brought back.
TEST(PrefixCacheSwap, LogitsAreBitIdenticalForEveryKvType) {
  ModelConfig c;
  c.dim = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 256;
  c.vocab_size = 1000, c.context_length = 256;
  const std::string path = test::scratch_path("prefix-swap-hd32.gguf");
  write_synth_model(path, SynthSpec{c, 5});
  const Model model = load_model(path);
  ModelRunner runner(model, 2);
  std::mt19937 rng(3);
  auto random_tokens = [&](size_t n) {
    std::vector<int32_t> t(n);
    for (int32_t& id : t) id = int32_t(rng() % 999) + 1;
    return t;
  };
  const std::vector<int32_t> b = random_tokens(70), c_prompt = random_tokens(70);
  std::vector<int32_t> a(b.begin(), b.begin() + 40);
  for (int32_t id : random_tokens(9)) a.push_back(id);

  for (KvCacheType type : {KvCacheType::F32, KvCacheType::F16, KvCacheType::BF16, KvCacheType::Q8_0}) {
    SCOPED_TRACE(kv_cache_type_name(type));
    const KvLayout layout = KvLayout::for_model(model.config, 8, type);
    const PageHash seed = prefix_seed(layout, "", 0);
    PagePool fresh(layout, 64);
    const Outcome want = run(runner, fresh, b, seed, false);
    PagePool pool(layout, int32_t((b.size() + 8 + 7) / 8) + 2);
    run(runner, pool, a, seed, true);
    int32_t a_cached_while_b_was_out = -1;
    const SwapOut swap{3, [&] {
                         run(runner, pool, c_prompt, seed, true);
                         a_cached_while_b_was_out = run(runner, pool, a, seed, true).cached_tokens;
                       }};
    const Outcome got = run(runner, pool, b, seed, true, 16, 8, nullptr, swap);
    EXPECT_EQ(got.cached_tokens, 40) << "b takes a's five full pages";
    EXPECT_LT(a_cached_while_b_was_out, 40) << "c was meant to evict a's pages while b was out";
    EXPECT_TRUE(bitwise_equal(got.logits, want.logits));
    EXPECT_EQ(got.generated, want.generated);
    const Outcome again = run(runner, pool, b, seed, true);
    EXPECT_EQ(again.cached_tokens, int32_t(b.size()) / 8 * 8) << "the pages b brought back were named";
    EXPECT_TRUE(bitwise_equal(again.logits, want.logits));
    EXPECT_EQ(pool.used_pages(), 0);
    EXPECT_EQ(pool.free_pages() + pool.cached_pages(), pool.capacity());
  }
}

TEST_F(PrefixCacheLogits, WithAnAdapterWhichIsolatesItsPages) {
  const LoraAdapter adapter = test::random_adapter(model->config, 4, 1.0f, 9);
  const LoraWeights lora("story", adapter);
  const PageHash story_seed = prefix_seed(layout, "story", 1);
  PagePool pool(layout, 64);
  const Outcome want = reference(prompts[0], &lora);
  run(*runner, pool, prompts[0], story_seed, true, 16, 8, &lora);
  const Outcome warm = run(*runner, pool, prompts[0], story_seed, true, 16, 8, &lora);
  EXPECT_GT(warm.cached_tokens, 0);
  EXPECT_TRUE(bitwise_equal(warm.logits, want.logits));

  const Outcome base = run(*runner, pool, prompts[0], base_seed, true);
  EXPECT_EQ(base.cached_tokens, 0) << "the base model never reads an adapter's pages";
  EXPECT_TRUE(bitwise_equal(base.logits, reference(prompts[0]).logits));
  EXPECT_FALSE(bitwise_equal(base.logits, want.logits)) << "the adapter was meant to change the logits";
  const Outcome reloaded = run(*runner, pool, prompts[0], prefix_seed(layout, "story", 2), true, 16, 8, &lora);
  EXPECT_EQ(reloaded.cached_tokens, 0) << "a reloaded adapter of the same name is another adapter";
}

// Through the engine: stories with shared openings, greedy and sampled, with and without the
// cache, roomy and under preemption of either kind; every output equals the uncached one.
Request story(const std::vector<int32_t>& prompt, uint64_t seed, int32_t n = 48) {
  Request r;
  r.prompt_ids = prompt;
  r.sampling.temperature = seed == 0 ? 0.0f : 0.9f;
  r.sampling.seed = seed;
  r.max_new_tokens = n;
  r.ignore_eos = true;
  return r;
}

using PrefixCacheEngine = test::StoriesTest;

TEST_F(PrefixCacheEngine, OutputsMatchTheUncachedEngineUnderPreemption) {
  std::vector<Request> requests;
  for (size_t i = 0; i < 12; ++i) {
    const auto& g = cases_[i % cases_.size()];
    std::vector<int32_t> p = g.prompt_ids;
    p.insert(p.end(), g.greedy_ids.begin(), g.greedy_ids.begin() + ptrdiff_t(20 + 3 * (i / cases_.size())));
    requests.push_back(story(p, i % 3 == 0 ? 0 : i));
  }
  std::vector<std::vector<int32_t>> want;
  {
    Engine plain({.model_path = model_, .threads = 2, .tokens_per_page = 8, .prefix_caching = false});
    for (const Request& r : requests) {
      RequestHandle h = plain.submit(r);
      want.push_back(await(h).token_ids);
    }
    EXPECT_EQ(plain.metrics().prefix_queried_tokens, 0);
    EXPECT_EQ(plain.metrics().kv_pages_cached, 0);
  }
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    for (int32_t pages : {400, 30}) {
      SCOPED_TRACE(std::string(mode == PreemptionMode::Recompute ? "recompute" : "swap") + ", pages " +
                   std::to_string(pages));
      Engine engine({.model_path = model_,
                     .threads = 2,
                     .kv_pages = pages,
                     .tokens_per_page = 8,
                     .prefill_chunk = 16,
                     .preemption = mode});
      // Warm the cache with the first of each opening, then everything at once.
      for (size_t i = 0; i < cases_.size(); ++i) {
        RequestHandle h = engine.submit(requests[i]);
        EXPECT_EQ(await(h).token_ids, want[i]) << i;
      }
      std::vector<RequestHandle> handles;
      for (const Request& r : requests) handles.push_back(engine.submit(r));
      int preempted = 0;
      for (size_t i = 0; i < handles.size(); ++i) {
        const Completion c = await(handles[i]);
        EXPECT_EQ(c.token_ids, want[i]) << i;
        preempted += c.preemptions;
      }
      const EngineMetrics m = engine.metrics();
      EXPECT_GT(m.prefix_hit_tokens, 0);
      EXPECT_LE(m.prefix_hit_tokens, m.prefix_queried_tokens);
      if (pages == 30) {
        EXPECT_GT(preempted, 0) << "the pool was meant to run dry";
      }
    }
  }
}

// A conversation: each turn's prompt is the last one plus the reply plus a new message. The
// reply's pages were named as decoding filled them, so the next turn finds nearly everything.
TEST_F(PrefixCacheEngine, ConversationStaysHot) {
  Engine engine({.model_path = model_, .threads = 2, .tokens_per_page = 8});
  Engine plain({.model_path = model_, .threads = 2, .tokens_per_page = 8, .prefix_caching = false});
  std::vector<int32_t> prompt = cases_[0].prompt_ids;
  int64_t written = 0;
  for (int turn = 0; turn < 4; ++turn) {
    SCOPED_TRACE(turn);
    const int64_t hits_before = engine.metrics().prefix_hit_tokens;
    RequestHandle h = engine.submit(story(prompt, 0, 24)), p = plain.submit(story(prompt, 0, 24));
    const Completion c = await(h);
    EXPECT_EQ(c.token_ids, await(p).token_ids);
    const int64_t hits = engine.metrics().prefix_hit_tokens - hits_before;
    // Everything the last turn wrote (its prompt and all but the last reply token, which was
    // never fed), in whole pages.
    if (turn > 0) {
      EXPECT_EQ(hits, written / 8 * 8);
    }
    written = int64_t(prompt.size()) + int64_t(c.token_ids.size()) - 1;
    prompt.insert(prompt.end(), c.token_ids.begin(), c.token_ids.end());
    prompt.insert(prompt.end(), cases_[size_t(turn + 1) % cases_.size()].prompt_ids.begin() + 1,
                  cases_[size_t(turn + 1) % cases_.size()].prompt_ids.end());
  }
}

TEST_F(PrefixCacheEngine, ARequestMayOptOut) {
  Engine engine({.model_path = model_, .threads = 2, .tokens_per_page = 8});
  std::vector<int32_t> prompt = cases_[0].prompt_ids;
  prompt.insert(prompt.end(), cases_[0].greedy_ids.begin(), cases_[0].greedy_ids.begin() + 20);
  Request r = story(prompt, 0, 40);
  r.prefix_cache = false;
  RequestHandle a = engine.submit(r);
  const auto ids = await(a).token_ids;
  RequestHandle b = engine.submit(r);
  EXPECT_EQ(await(b).token_ids, ids);
  EXPECT_EQ(engine.metrics().prefix_queried_tokens, 0);
  EXPECT_EQ(engine.metrics().kv_pages_cached, 0) << "an opted-out request offers no pages either";
  r.prefix_cache = true;
  RequestHandle c = engine.submit(r);
  EXPECT_EQ(await(c).token_ids, ids);
  RequestHandle d = engine.submit(r);
  EXPECT_EQ(await(d).token_ids, ids);
  EXPECT_GT(engine.metrics().prefix_hit_tokens, 0);
}

// An adapter unloaded and loaded again under the same name from another file: the new one
// never reads the old one's pages.
TEST(PrefixCacheAdapters, AReloadedAdapterDoesNotHitOldPages) {
  std::vector<std::string> files;
  for (uint64_t seed : {3, 4}) {
    LoraSynthSpec spec;
    spec.seed = seed;
    files.push_back(test::scratch_path("prefix-adapter" + std::to_string(seed) + ".gguf"));
    write_synth_lora(files.back(), test::tiny_gqa_config(), spec);
  }
  Request r;
  r.prompt_ids.assign(40, 7);
  for (size_t i = 0; i < r.prompt_ids.size(); ++i) r.prompt_ids[i] = int32_t(5 + i * 13 % 900);
  r.adapter = "a";
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = 12;
  r.ignore_eos = true;
  auto outputs = [&](bool caching) {
    Engine engine(
        {.model_path = test::tiny_gqa_model(), .threads = 1, .tokens_per_page = 4, .prefix_caching = caching});
    std::vector<std::vector<int32_t>> ids;
    std::vector<int64_t> hits;
    for (const std::string& file : files) {
      engine.load_adapter("a", file);
      for (int k = 0; k < 2; ++k) {
        const int64_t before = engine.metrics().prefix_hit_tokens;
        RequestHandle h = engine.submit(r);
        ids.push_back(await(h).token_ids);
        hits.push_back(engine.metrics().prefix_hit_tokens - before);
      }
      engine.unload_adapter("a");
    }
    return std::pair(ids, hits);
  };
  const auto [want, no_hits] = outputs(false);
  const auto [got, hits] = outputs(true);
  EXPECT_EQ(got, want);
  EXPECT_NE(want[0], want[2]) << "the two adapters were meant to differ";
  EXPECT_EQ(hits, (std::vector<int64_t>{0, 36, 0, 36})) << "each load hits its own pages only";
}

}  // namespace
}  // namespace pagoda
