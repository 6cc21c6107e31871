// The KV cache's element types (f32, f16, bf16, q8_0): row conversions as ggml rounds them,
// page sizes, paged attention over each type on every ISA, the forward pass's batch
// invariance per type (alone vs in a crowd, any chunking, 1 vs 2 threads, pages swapped out and
// back), accuracy against f32 KV, and the Engine's preemption and page accounting per type.

#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "engine/forward/model_runner.h"
#include "engine/kv/page_pool.h"
#include "testing/synth.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/half.h"
#include "kernels/kv_rows.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/kernel_support.h"
#include "support/test_support.h"
#include "support/typed_kv_cache.h"

namespace pagoda {
namespace {

using test::DrivenSequence;
using test::random_uniform;
using test::run_together;
using test::supported_isas;
using test::TypedCache;

constexpr KvCacheType kAllTypes[] = {KvCacheType::F32, KvCacheType::F16, KvCacheType::BF16, KvCacheType::Q8_0};

std::vector<float> round_trip(KvCacheType type, const std::vector<float>& x) {
  std::vector<std::byte> row(kernels::kv_row_bytes(type, int(x.size())));
  std::vector<float> y(x.size());
  kernels::store_kv_row(type, x.data(), int(x.size()), row.data());
  kernels::load_kv_row(type, row.data(), int(x.size()), y.data());
  return y;
}

// A small random Llama whose head_dim (32) fits every type, q8_0 included.
ModelConfig q8_friendly_config() {
  ModelConfig c;
  c.dim = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 256;
  c.vocab_size = 1000, c.context_length = 256;
  return c;
}

const std::string& q8_friendly_model() {
  return test::synth_model_once("kv-dtype-hd32.gguf", q8_friendly_config(), 11);
}

// ---- Rows ----

TEST(KvRows, SizesPerType) {
  EXPECT_EQ(kernels::kv_row_bytes(KvCacheType::F32, 64), 256u);
  EXPECT_EQ(kernels::kv_row_bytes(KvCacheType::F16, 64), 128u);
  EXPECT_EQ(kernels::kv_row_bytes(KvCacheType::BF16, 64), 128u);
  EXPECT_EQ(kernels::kv_row_bytes(KvCacheType::Q8_0, 64), 68u);  // two blocks of 2 + 32 bytes
  EXPECT_TRUE(kernels::kv_row_fits(KvCacheType::F16, 8));
  EXPECT_FALSE(kernels::kv_row_fits(KvCacheType::Q8_0, 48));
  EXPECT_TRUE(kernels::kv_row_fits(KvCacheType::Q8_0, 96));
}

TEST(KvRows, NamesParseBack) {
  for (KvCacheType t : kAllTypes) EXPECT_EQ(parse_kv_cache_type(kv_cache_type_name(t)), t);
  EXPECT_EQ(parse_kv_cache_type("q4_0"), std::nullopt);
  EXPECT_EQ(parse_kv_cache_type("F16"), std::nullopt);
}

TEST(KvRows, F16AndBf16RoundToNearestEven) {
  // 1 + 2^-11 lies halfway between halves 1 and 1 + 2^-10: ties go to the even one (1).
  EXPECT_EQ(kernels::f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(kernels::f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie between 0x3c01 and 0x3c02
  EXPECT_EQ(kernels::f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above the tie
  EXPECT_EQ(kernels::f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(kernels::f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  const auto x = random_uniform(256, 1, -8.0f, 8.0f);
  const auto h = round_trip(KvCacheType::F16, x), b = round_trip(KvCacheType::BF16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(h[i] - x[i]), std::fabs(x[i]) * 0x1p-11f + 0x1p-25f) << i;
    EXPECT_LE(std::fabs(b[i] - x[i]), std::fabs(x[i]) * 0x1p-8f) << i;
  }
}

TEST(KvRows, Q8_0IsGgmlsBlockQuantization) {
  // One block: amax 63.5 gives d = 0.5 (exact in f16); x / d rounds half away from zero.
  std::vector<float> x(32, 0.0f);
  x[0] = 63.5f, x[1] = 0.25f, x[2] = -0.25f, x[3] = 0.74f, x[4] = -63.5f;
  std::vector<std::byte> row(kernels::kQ8_0BlockBytes);
  kernels::store_kv_row(KvCacheType::Q8_0, x.data(), 32, row.data());
  uint16_t d;
  std::memcpy(&d, row.data(), 2);
  EXPECT_EQ(d, kernels::f32_to_f16(0.5f));
  EXPECT_EQ(int8_t(row[2]), 127);
  EXPECT_EQ(int8_t(row[3]), 1);
  EXPECT_EQ(int8_t(row[4]), -1);
  EXPECT_EQ(int8_t(row[5]), 1);
  EXPECT_EQ(int8_t(row[6]), -127);
  EXPECT_EQ(int8_t(row[7]), 0);
  // A zero block has scale 0 and reads back as zeros.
  EXPECT_EQ(round_trip(KvCacheType::Q8_0, std::vector<float>(64, 0.0f)), std::vector<float>(64, 0.0f));
  // Each value within half a step (plus the scale's f16 rounding) of the input, per block.
  const auto r = random_uniform(96, 2, -3.0f, 3.0f);
  const auto y = round_trip(KvCacheType::Q8_0, r);
  for (size_t b = 0; b < 3; ++b) {
    float amax = 0.0f;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(r[32 * b + i]));
    for (size_t i = 0; i < 32; ++i) {
      EXPECT_LE(std::fabs(y[32 * b + i] - r[32 * b + i]), amax / 127.0f * 0.5f + amax * 0x1p-11f) << 32 * b + i;
    }
  }
}

// ---- Layout and pool ----

TEST(KvLayout, PagesAreSizedByTheirType) {
  KvLayout layout{2, 3, 64, 16, KvCacheType::F32};
  EXPECT_EQ(layout.bytes_per_page(), size_t(2 * 2 * 3 * 16 * 64 * 4));
  layout.dtype = KvCacheType::F16;
  EXPECT_EQ(layout.bytes_per_page(), size_t(2 * 2 * 3 * 16 * 64 * 2));
  EXPECT_EQ(layout.block_offset(1, 1, 2), size_t((1 * 2 + 1) * 3 + 2) * 16 * 128);
  layout.dtype = KvCacheType::Q8_0;
  EXPECT_EQ(layout.bytes_per_page(), size_t(2 * 2 * 3 * 16 * 68));
  // A byte budget buys pages in inverse proportion to their size.
  const size_t budget = size_t(64) << 20;
  const KvLayout f32{2, 3, 64, 16, KvCacheType::F32}, f16{2, 3, 64, 16, KvCacheType::F16};
  EXPECT_EQ(PagePool::pages_for_bytes(f16, budget), 2 * PagePool::pages_for_bytes(f32, budget));
  EXPECT_GT(PagePool::pages_for_bytes(layout, budget), PagePool::pages_for_bytes(f16, budget));
}

TEST(KvLayout, Q8_0NeedsHeadDimInWholeBlocks) {
  ModelConfig c = q8_friendly_config();
  c.n_heads = 8, c.n_kv_heads = 8;  // head_dim 16
  try {
    KvLayout::for_model(c, 16, KvCacheType::Q8_0);
    FAIL() << "head_dim 16 cannot hold q8_0 blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim is 16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PagePool(KvLayout{1, 1, 48, 16, KvCacheType::Q8_0}, 4), Error);
  EXPECT_NO_THROW(KvLayout::for_model(c, 16, KvCacheType::F16));
}

// ---- Paged attention per type, on every ISA ----

// Every ISA writes f16 and bf16 rows with the bits of the scalar conversions: ties, the edges
// of overflow and of the subnormals, infinities, zeros and NaNs with payloads, at every length
// (whole vectors and tails).
TEST(KvRows, EveryIsaNarrowsAsTheScalarConversions) {
  std::vector<float> x = {1.0f + 0x1p-11f,
                          1.0f + 3 * 0x1p-11f,
                          1.0f + 0x1p-8f,
                          1.0f + 3 * 0x1p-8f,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          0x1p-14f,
                          0x1p-24f,
                          0x1p-25f,
                          0x1.8p-25f,
                          0x1p-26f,
                          -0x1.4p-20f,
                          0x1p-130f,
                          3e38f,
                          0.0f,
                          -0.0f,
                          __builtin_inff(),
                          -__builtin_inff()};
  for (uint32_t bits : {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fa5a5a5u, 0xff812345u}) {
    x.push_back(std::bit_cast<float>(bits));
  }
  for (float v : random_uniform(200, 3, -70000.0f, 70000.0f)) x.push_back(v);
  for (float v : random_uniform(200, 4, -1e-4f, 1e-4f)) x.push_back(v);
  const kernels::Isa before = kernels::active_isa();
  for (KvCacheType type : {KvCacheType::F16, KvCacheType::BF16}) {
    for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(15), size_t(16), size_t(33), x.size()}) {
      std::vector<uint16_t> want(n);
      for (size_t i = 0; i < n; ++i)
        want[i] = type == KvCacheType::F16 ? kernels::f32_to_f16(x[i]) : kernels::f32_to_bf16(x[i]);
      for (kernels::Isa isa : supported_isas()) {
        SCOPED_TRACE(std::string(kv_cache_type_name(type)) + " n=" + std::to_string(n) + " " + kernels::isa_name(isa));
        ASSERT_TRUE(kernels::set_isa(isa));
        std::vector<uint16_t> got(n);
        kernels::store_kv_row(type, x.data(), int(n), reinterpret_cast<std::byte*>(got.data()));
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "x[" << i << "] = " << x[i];
      }
    }
  }
  kernels::set_isa(before);
}

// Attention in double over the floats the cache reads back as.
std::vector<double> reference_attention(const std::vector<float>& q, int group, const TypedCache& c, float scale) {
  const int hd = c.head_dim;
  std::vector<double> out(size_t(group) * hd, 0.0);
  for (int g = 0; g < group; ++g) {
    std::vector<double> s(c.n_ctx);
    double max = -INFINITY, sum = 0.0;
    for (int t = 0; t < c.n_ctx; ++t) {
      double dot = 0.0;
      for (int d = 0; d < hd; ++d) dot += double(q[g * hd + d]) * c.k[size_t(t) * hd + d];
      max = std::max(max, s[t] = scale * dot);
    }
    for (int t = 0; t < c.n_ctx; ++t) sum += s[t] = std::exp(s[t] - max);
    for (int t = 0; t < c.n_ctx; ++t)
      for (int d = 0; d < hd; ++d) out[g * hd + d] += s[t] / sum * c.v[size_t(t) * hd + d];
  }
  return out;
}

class KvAttention : public ::testing::TestWithParam<kernels::Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(kernels::set_isa(GetParam())); }
  void TearDown() override { kernels::set_isa(kernels::detected_isa()); }
};

INSTANTIATE_TEST_SUITE_P(AllIsas, KvAttention, ::testing::ValuesIn(supported_isas()),
                         [](const auto& info) { return std::string(kernels::isa_name(info.param)); });

TEST_P(KvAttention, EveryTypeMatchesTheReferenceOnItsStoredValues) {
  for (KvCacheType type : kAllTypes) {
    for (int head_dim : {20, 32, 64, 72, 96}) {  // 20 and 72 leave SIMD tails
      if (!kernels::kv_row_fits(type, head_dim)) continue;
      for (int tokens_per_page : {1, 16}) {
        for (int n_ctx : {1, 17, 200}) {
          const TypedCache cache(type, head_dim, n_ctx, tokens_per_page, 30 + n_ctx);
          for (int group : {1, 3}) {
            const auto q = random_uniform(size_t(group) * head_dim, 40 + group, -2.0f, 2.0f);
            const float scale = 1.0f / std::sqrt(float(head_dim));
            const auto out = cache.attend(q, group, scale);
            const auto ref = reference_attention(q, group, cache, scale);
            for (size_t i = 0; i < out.size(); ++i)
              ASSERT_NEAR(out[i], ref[i], 2e-6) << kv_cache_type_name(type) << " head_dim " << head_dim << " page "
                                                << tokens_per_page << " n_ctx " << n_ctx << " at " << i;
          }
        }
      }
    }
  }
}

TEST_P(KvAttention, EveryTypeIsBitwiseIndependentOfGroupPlaceAndPageSize) {
  for (KvCacheType type : kAllTypes) {
    SCOPED_TRACE(kv_cache_type_name(type));
    const int head_dim = 64, n_ctx = 150;
    const TypedCache cache(type, head_dim, n_ctx, 16, 50), other_pages(type, head_dim, n_ctx, 5, 50);
    const auto q = random_uniform(size_t(3) * head_dim, 51);
    const auto out = cache.attend(q, 3, 0.125f);
    EXPECT_EQ(out, other_pages.attend(q, 3, 0.125f));
    for (int g = 0; g < 3; ++g) {
      const std::vector<float> alone_q(q.begin() + g * head_dim, q.begin() + (g + 1) * head_dim);
      const auto alone = cache.attend(alone_q, 1, 0.125f);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), out.begin() + g * head_dim)) << g;
    }
  }
}

// A prefill chunk's tokens attended together give each token the bits it gets alone: chunks
// that start inside and at the edges of 64-position blocks, groups above and below the rows a
// call carries, pages of odd sizes, every type.
TEST_P(KvAttention, TokensTogetherAreBitwiseTheTokensAlone) {
  for (KvCacheType type : kAllTypes) {
    for (int head_dim : {32, 72}) {
      if (!kernels::kv_row_fits(type, head_dim)) continue;
      for (int group : {1, 4, 40}) {
        for (int n_ctx0 : {1, 63, 64, 130}) {
          const int tokens = group == 40 ? 3 : 70;
          const int tokens_per_page = n_ctx0 == 63 ? 7 : 16;
          SCOPED_TRACE(std::string(kv_cache_type_name(type)) + " head_dim " + std::to_string(head_dim) + " group " +
                       std::to_string(group) + " n_ctx0 " + std::to_string(n_ctx0));
          const TypedCache cache(type, head_dim, n_ctx0 + tokens - 1, tokens_per_page, 60 + unsigned(n_ctx0));
          const size_t stride = size_t(group) * head_dim + 5;  // rows need not be packed
          const auto q = random_uniform(size_t(tokens) * stride, 61, -2.0f, 2.0f);
          std::vector<float> together(size_t(tokens) * stride, NAN);
          kernels::paged_attention_tokens(type, q.data(), stride, tokens, group, head_dim, n_ctx0, cache.k_pages.data(),
                                          cache.v_pages.data(), tokens_per_page, 0.2f, together.data(), stride);
          for (int t = 0; t < tokens; ++t) {
            std::vector<float> alone(size_t(group) * head_dim, NAN);
            kernels::paged_attention(type, q.data() + t * stride, group, head_dim, n_ctx0 + t, cache.k_pages.data(),
                                     cache.v_pages.data(), tokens_per_page, 0.2f, alone.data());
            ASSERT_EQ(std::memcmp(alone.data(), together.data() + t * stride, alone.size() * sizeof(float)), 0)
                << "token " << t;
          }
          // A group's heads one at a time, with one token, are the same bits too.
          for (int h = 0; h < std::min(group, 3); ++h) {
            float one[72];
            kernels::paged_attention(type, q.data() + h * head_dim, 1, head_dim, n_ctx0, cache.k_pages.data(),
                                     cache.v_pages.data(), tokens_per_page, 0.2f, one);
            ASSERT_EQ(std::memcmp(one, together.data() + h * head_dim, size_t(head_dim) * sizeof(float)), 0)
                << "head " << h;
          }
        }
      }
    }
  }
}

// ---- The forward pass per type ----

struct Fixture {
  Model model;
  ModelRunner runner;
  PagePool pool;
  Fixture(const std::string& path, int threads, KvCacheType type, int32_t tokens_per_page = 16, int32_t pages = 2048)
      : model(load_model(path)),
        runner(model, threads),
        pool(KvLayout::for_model(model.config, tokens_per_page, type), pages) {}
};

std::vector<std::vector<int32_t>> random_prompts(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p{1};
    const int len = 2 + int(rng() % 30);
    for (int j = 0; j < len; ++j) p.push_back(int32_t(2 + rng() % uint32_t(vocab - 2)));
    prompts.push_back(p);
  }
  return prompts;
}

// Moves a sequence's pages elsewhere in the pool as swap preemption does: bytes out to host
// memory, pages released (and overwritten by someone else), new pages taken, bytes back.
void swap_out_and_in(DrivenSequence& s, PagePool& pool) {
  const size_t page_bytes = pool.layout().bytes_per_page();
  std::vector<std::byte> host(s.table.pages().size() * page_bytes);
  for (size_t i = 0; i < s.table.pages().size(); ++i) {
    std::memcpy(host.data() + i * page_bytes, pool.page_data(s.table.pages()[i]), page_bytes);
  }
  const size_t n_pages = s.table.pages().size();
  BlockTable squatter(s.table.tokens_per_page());
  ASSERT_TRUE(squatter.reserve(int32_t(n_pages) * s.table.tokens_per_page(), pool));  // the freed pages' next owner
  s.table.release(pool);
  std::vector<int32_t> fresh;
  ASSERT_TRUE(pool.allocate(int32_t(n_pages), fresh));
  for (int32_t p : squatter.pages()) std::memset(pool.page_data(p), 0x5a, page_bytes);
  squatter.release(pool);
  for (size_t i = 0; i < n_pages; ++i) std::memcpy(pool.page_data(fresh[i]), host.data() + i * page_bytes, page_bytes);
  s.table.grow(0, int32_t(n_pages) * s.table.tokens_per_page(), fresh);
}

// A target sequence's logits, bit for bit, under every batch composition, chunk size, thread
// count, and with its pages swapped out and back mid-generation, for each KV type.
TEST(KvDtypeForward, BatchInvariancePerType) {
  const std::string& path = q8_friendly_model();
  const auto prompts = random_prompts(40, q8_friendly_config().vocab_size, 3);
  const std::vector<int32_t>& target_prompt = prompts[0];
  constexpr int32_t kGenerated = 12;
  for (KvCacheType type : kAllTypes) {
    SCOPED_TRACE(kv_cache_type_name(type));
    std::vector<std::vector<float>> baseline;
    auto check = [&](const DrivenSequence& target, const std::string& what) {
      const auto& logits = target.logits;
      ASSERT_GE(logits.size(), size_t(kGenerated + 1)) << what;
      std::vector<std::vector<float>> tail(logits.end() - (kGenerated + 1), logits.end());
      if (baseline.empty()) baseline = tail;
      EXPECT_TRUE(tail == baseline) << what;
    };
    for (int threads : {1, 2}) {
      Fixture f(path, threads, type);
      for (int32_t chunk : {1, 7, 64, 100000}) {
        for (bool crowd : {false, true}) {
          std::vector<DrivenSequence> seqs;
          seqs.emplace_back(target_prompt, int32_t(target_prompt.size()) + kGenerated, -1, 16);
          if (crowd) {
            for (size_t i = 1; i < prompts.size(); ++i)
              seqs.emplace_back(prompts[i], int32_t(prompts[i].size()) + kGenerated, -1, 16);
          }
          run_together(f.runner, f.pool, seqs, chunk);
          check(seqs[0], "threads " + std::to_string(threads) + ", chunk " + std::to_string(chunk) +
                             (crowd ? ", crowd" : ", alone"));
          EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
        }
      }
      // Preempted: the prompt and a few tokens, then the pages swapped out and in, then the rest.
      std::vector<DrivenSequence> seqs;
      seqs.emplace_back(target_prompt, int32_t(target_prompt.size()) + 4, -1, 16);
      run_together(f.runner, f.pool, seqs, 5, false, false);
      DrivenSequence target = std::move(seqs[0]);
      target.done = false;
      target.max_positions = int32_t(target_prompt.size()) + kGenerated;
      swap_out_and_in(target, f.pool);
      std::vector<DrivenSequence> rest;
      rest.push_back(std::move(target));
      run_together(f.runner, f.pool, rest, 5);
      check(rest[0], "threads " + std::to_string(threads) + ", swapped out and in");
      rest[0].table.release(f.pool);
      EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
    }
  }
}

// Teacher-forced logits at every position with `type` KV against f32 KV: max relative error.
double logits_error_vs_f32(const std::string& path, KvCacheType type,
                           const std::vector<std::vector<int32_t>>& prompts) {
  Fixture exact(path, 2, KvCacheType::F32), lossy(path, 2, type);
  double worst = 0.0;
  for (const auto& p : prompts) {
    std::vector<DrivenSequence> a, b;
    a.emplace_back(p, int32_t(p.size()), -1, 16);
    b.emplace_back(p, int32_t(p.size()), -1, 16);
    run_together(exact.runner, exact.pool, a, 1, true);
    run_together(lossy.runner, lossy.pool, b, 1, true);
    for (size_t i = 0; i < a[0].logits.size(); ++i)
      worst = std::max(worst, test::relative_error(b[0].logits[i], a[0].logits[i]));
  }
  return worst;
}

// Stated tolerances (max |Δlogit| / max |logit| over every position) against f32 KV.
double tolerance(KvCacheType type) {
  switch (type) {
    case KvCacheType::F32: return 0.0;
    case KvCacheType::F16: return 2e-3;
    case KvCacheType::BF16: return 2e-2;
    case KvCacheType::Q8_0: return 2e-2;
  }
  return 0.0;
}

TEST(KvDtypeAccuracy, LogitsStayCloseToF32OnStories260K) {
  PAGODA_SHARED_OR_SKIP(path, test::kStoriesGguf);
  const Model m = load_model(path);
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"Once upon a time, there was a little girl named Lily. She loved to play outside",
                           "Tom and his dog went to the park. They saw a big red ball and"}) {
    prompts.push_back(m.tokenizer.encode(text, true));
  }
  for (KvCacheType type : {KvCacheType::F16, KvCacheType::BF16}) {
    const double error = logits_error_vs_f32(path, type, prompts);
    std::printf("stories260K, %s KV: max relative logit error vs f32 KV %.3g\n", kv_cache_type_name(type), error);
    EXPECT_LT(error, tolerance(type)) << kv_cache_type_name(type);
  }
  // stories260K's head_dim is 8: q8_0 cannot store it, and says so.
  EXPECT_THROW(Fixture(path, 1, KvCacheType::Q8_0), Error);
}

TEST(KvDtypeAccuracy, LogitsStayCloseToF32OnARandomModel) {
  const auto prompts = random_prompts(3, q8_friendly_config().vocab_size, 5);
  for (KvCacheType type : {KvCacheType::F16, KvCacheType::BF16, KvCacheType::Q8_0}) {
    const double error = logits_error_vs_f32(q8_friendly_model(), type, prompts);
    std::printf("random hd32 model, %s KV: max relative logit error vs f32 KV %.3g\n", kv_cache_type_name(type), error);
    EXPECT_LT(error, tolerance(type)) << kv_cache_type_name(type);
    EXPECT_GT(error, 0.0) << kv_cache_type_name(type) << " rounds: some logit must move";
  }
}

TEST(KvDtypeAccuracy, GreedyGoldensHoldWithF16Kv) {
  PAGODA_SHARED_OR_SKIP(path, test::kStoriesGguf);
  PAGODA_SHARED_OR_SKIP(golden_path, test::kGolden);
  const auto cases = test::load_golden(golden_path);
  Fixture f(path, 2, KvCacheType::F16);
  std::vector<DrivenSequence> seqs;
  for (const auto& g : cases) seqs.emplace_back(g.prompt_ids, g.max_positions, 1, 16);
  run_together(f.runner, f.pool, seqs, 64);
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(seqs[i].generated(), cases[i].greedy_ids) << cases[i].prompt;
}

// ---- The Engine per type ----

Request greedy_request(const std::vector<int32_t>& prompt) {
  Request r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = 60;
  r.ignore_eos = true;
  return r;
}

// A pool far too small for the load: both preemption modes, every type, finish everything
// with outputs identical to an unconstrained engine of the same type, and every page returns.
TEST(KvDtypeEngine, PreemptionGivesIdenticalOutputsPerType) {
  const auto prompts = random_prompts(8, q8_friendly_config().vocab_size, 9);
  for (KvCacheType type : kAllTypes) {
    std::vector<std::vector<int32_t>> want;
    {
      Engine roomy({.model_path = q8_friendly_model(), .threads = 1, .kv_cache_type = type});
      for (const auto& p : prompts) {
        RequestHandle h = roomy.submit(greedy_request(p));
        want.push_back(test::await(h).token_ids);
      }
    }
    for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
      SCOPED_TRACE(std::string(kv_cache_type_name(type)) + (mode == PreemptionMode::Swap ? ", swap" : ", recompute"));
      Engine engine({.model_path = q8_friendly_model(),
                     .threads = 2,
                     .kv_pages = 24,
                     .tokens_per_page = 8,
                     .kv_cache_type = type,
                     .preemption = mode});
      std::vector<RequestHandle> handles;
      for (const auto& p : prompts) handles.push_back(engine.submit(greedy_request(p)));
      int preempted = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        const Completion c = test::await(handles[i]);
        preempted += c.preemptions;
        EXPECT_EQ(c.token_ids, want[i]) << i;
      }
      EXPECT_GT(preempted, 0) << "the pool was meant to run dry";
      for (int i = 0; i < 30000 && engine.metrics().kv_pages_used != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(engine.metrics().kv_pages_used, 0);
      EXPECT_EQ(engine.metrics().kv_pages_total, 24);
    }
  }
}

TEST(KvDtypeEngine, ByteBudgetBuysPagesByType) {
  int64_t pages[4];
  for (KvCacheType type : kAllTypes) {
    Engine engine(
        {.model_path = q8_friendly_model(), .threads = 1, .kv_bytes = size_t(8) << 20, .kv_cache_type = type});
    pages[int(type)] = engine.metrics().kv_pages_total;
  }
  // hd 32: a row is 128, 64, 64 and 34 bytes.
  EXPECT_EQ(pages[int(KvCacheType::F16)], 2 * pages[int(KvCacheType::F32)]);
  EXPECT_EQ(pages[int(KvCacheType::BF16)], pages[int(KvCacheType::F16)]);
  EXPECT_EQ(pages[int(KvCacheType::Q8_0)],
            int64_t((size_t(8) << 20) / (2 * 2 * 2 * 16 * 34)));  // layers·K|V·heads·slots·row
}

TEST(KvDtypeEngine, Q8_0OnAnIncompatibleHeadDimIsAClearError) {
  const std::string path = test::scratch_path("kv-dtype-hd48.gguf");
  ModelConfig c = q8_friendly_config();
  c.dim = 96, c.n_heads = 2, c.n_kv_heads = 2;  // head_dim 48
  write_synth_model(path, SynthSpec{c, 4});
  try {
    Engine engine({.model_path = path, .threads = 1, .kv_cache_type = KvCacheType::Q8_0});
    FAIL() << "q8_0 KV with head_dim 48 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim is 48"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(Engine({.model_path = path, .threads = 1, .kv_cache_type = KvCacheType::F16}));
}

}  // namespace
}  // namespace pagoda
