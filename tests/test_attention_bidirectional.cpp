// Paged attention with a bidirectional span (AttentionVariant::bidirectional_begin/end: the
// positions of one of Gemma 3's images attend to each other both ways), on every ISA and KV
// cache type: against a naive reference that applies transformers' mask key by key (causal and
// in the window, or both in the span), each token's bits its own however tokens share a call,
// and the tokens outside the span bit for bit what they are without it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_rows.h"
#include "support/kernel_support.h"
#include "support/typed_kv_cache.h"

namespace pagoda {
namespace {

using kernels::AttentionVariant;
using test::random_uniform;
using test::TypedCache;

constexpr KvCacheType kAllTypes[] = {KvCacheType::F32, KvCacheType::F16, KvCacheType::BF16, KvCacheType::Q8_0};

// `tokens` query tokens at positions n_ctx0 - 1, n_ctx0, ..., and what their attention adds.
struct Call {
  int n_ctx0, tokens;
  AttentionVariant variant;
};

// The calls every test makes: the span around the tokens, behind them, ahead of them, starting
// before the window, longer than the window, across 64-position blocks, of one position.
std::vector<Call> calls() {
  auto span = [](int window, float softcap, int begin, int end) {
    return AttentionVariant{window, softcap, begin, end};
  };
  return {
      {1, 40, span(0, 0.0f, 5, 25)},       // tokens before, in and after the span
      {60, 40, span(0, 0.0f, 70, 140)},    // the span goes on past the last token, over two blocks
      {100, 30, span(8, 0.0f, 90, 120)},   // begun before the first token and before its window
      {131, 32, span(8, 1.5f, 130, 200)},  // every token in a span longer than the window; soft-capped
      {45, 10, span(0, 0.0f, 50, 51)},     // one position: nothing to see both ways
  };
}

// Whether the query at position p sees the key at position j.
bool sees(const AttentionVariant& v, int p, int j) {
  auto in_span = [&](int x) { return x >= v.bidirectional_begin && x < v.bidirectional_end; };
  const bool causal = j <= p && (v.window <= 0 || j > p - v.window);
  return causal || (in_span(p) && in_span(j));
}

// Positions the call's cache must hold: up to the last a token sees.
int positions(const Call& call) { return std::max(call.n_ctx0 + call.tokens - 1, call.variant.bidirectional_end); }

// One query head at position p, in double over the values the cache reads back as.
std::vector<double> reference(const float* q, int p, const TypedCache& c, const AttentionVariant& v, float scale) {
  const int hd = c.head_dim;
  std::vector<double> s(size_t(c.n_ctx), 0.0), out(size_t(hd), 0.0);
  double max = -INFINITY, sum = 0.0;
  for (int j = 0; j < c.n_ctx; ++j) {
    if (!sees(v, p, j)) continue;
    double dot = 0.0;
    for (int d = 0; d < hd; ++d) dot += double(q[d]) * c.k[size_t(j) * hd + d];
    s[j] = scale * dot;
    if (v.softcap > 0.0f) s[j] = v.softcap * std::tanh(s[j] / v.softcap);
    max = std::max(max, s[j]);
  }
  for (int j = 0; j < c.n_ctx; ++j) sum += s[j] = sees(v, p, j) ? std::exp(s[j] - max) : 0.0;
  for (int j = 0; j < c.n_ctx; ++j)
    for (int d = 0; d < hd; ++d) out[d] += s[j] / sum * c.v[size_t(j) * hd + d];
  return out;
}

// The call's output for q (rows `stride` apart), with the pages wholly before every position
// its first token sees null: they may be holes, and must not be read.
std::vector<float> attend(const TypedCache& c, const Call& call, const std::vector<float>& q, size_t stride, int group,
                          float scale) {
  int first_seen = call.n_ctx0 - 1;
  for (int j = 0; j < c.n_ctx; ++j)
    if (sees(call.variant, call.n_ctx0 - 1, j)) first_seen = std::min(first_seen, j);
  std::vector<const std::byte*> k = c.k_pages, v = c.v_pages;
  for (int page = 0; (page + 1) * c.tokens_per_page <= first_seen; ++page) k[page] = v[page] = nullptr;
  std::vector<float> out(size_t(call.tokens) * stride, NAN);
  kernels::paged_attention_tokens(c.type, q.data(), stride, call.tokens, group, c.head_dim, call.n_ctx0, k.data(),
                                  v.data(), c.tokens_per_page, scale, out.data(), stride, call.variant);
  return out;
}

class BidirectionalAttention : public ::testing::TestWithParam<kernels::Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(kernels::set_isa(GetParam())); }
  void TearDown() override { kernels::set_isa(kernels::detected_isa()); }

  // Runs `check(cache, call, q, stride, group)` over every type, head_dim, page size, call and
  // group (40 heads: more rows than a kernel call carries, so fewer tokens).
  template <class Check>
  void for_each_shape(Check&& check) {
    for (KvCacheType type : kAllTypes) {
      for (int head_dim : {32, 72}) {
        if (!kernels::kv_row_fits(type, head_dim)) continue;
        for (int tokens_per_page : {7, 16}) {
          for (const Call& full : calls()) {
            for (int group : {1, 4, 40}) {
              Call call = full;
              if (group == 40) call.tokens = std::min(call.tokens, 3);
              SCOPED_TRACE(std::string(kv_cache_type_name(type)) + " head_dim " + std::to_string(head_dim) + " page " +
                           std::to_string(tokens_per_page) + " n_ctx0 " + std::to_string(call.n_ctx0) + " group " +
                           std::to_string(group));
              const TypedCache cache(type, head_dim, positions(full), tokens_per_page, unsigned(7 + call.n_ctx0));
              const size_t stride = size_t(group) * head_dim + 3;  // rows need not be packed
              const auto q = random_uniform(size_t(call.tokens) * stride, unsigned(11 + group), -2.0f, 2.0f);
              check(cache, call, q, stride, group);
            }
          }
        }
      }
    }
  }
};

INSTANTIATE_TEST_SUITE_P(AllIsas, BidirectionalAttention, ::testing::ValuesIn(test::supported_isas()),
                         [](const auto& info) { return std::string(kernels::isa_name(info.param)); });

TEST_P(BidirectionalAttention, EveryTokenMatchesTheNaiveMaskOnEveryType) {
  for_each_shape([](const TypedCache& cache, const Call& call, const std::vector<float>& q, size_t stride, int group) {
    const float scale = 1.0f / std::sqrt(float(cache.head_dim));
    const std::vector<float> out = attend(cache, call, q, stride, group, scale);
    for (int t = 0; t < call.tokens; ++t) {
      for (int h = 0; h < group; ++h) {
        const size_t at = size_t(t) * stride + size_t(h) * cache.head_dim;
        const auto want = reference(q.data() + at, call.n_ctx0 + t - 1, cache, call.variant, scale);
        for (int d = 0; d < cache.head_dim; ++d)
          ASSERT_NEAR(out[at + d], want[size_t(d)], 5e-6) << "token " << t << " head " << h << " at " << d;
      }
    }
  });
}

TEST_P(BidirectionalAttention, EachTokensBitsAreItsOwnHoweverTheTokensAreCalled) {
  for_each_shape([](const TypedCache& cache, const Call& call, const std::vector<float>& q, size_t stride, int group) {
    const std::vector<float> together = attend(cache, call, q, stride, group, 0.2f);
    const size_t row = size_t(group) * cache.head_dim;
    for (int t = 0; t < call.tokens; ++t) {
      const Call alone{call.n_ctx0 + t, 1, call.variant};
      const std::vector<float> one(q.begin() + ptrdiff_t(t * stride), q.begin() + ptrdiff_t((t + 1) * stride));
      const std::vector<float> out = attend(cache, alone, one, stride, group, 0.2f);
      ASSERT_EQ(std::memcmp(out.data(), together.data() + t * stride, row * sizeof(float)), 0) << "token " << t;
    }
  });
}

TEST_P(BidirectionalAttention, TokensOutsideTheSpanAreBitwiseWhatTheyAreWithoutIt) {
  for_each_shape([](const TypedCache& cache, const Call& call, const std::vector<float>& q, size_t stride, int group) {
    const std::vector<float> with = attend(cache, call, q, stride, group, 0.2f);
    Call plain = call;
    plain.variant.bidirectional_begin = plain.variant.bidirectional_end = 0;
    const std::vector<float> without = attend(cache, plain, q, stride, group, 0.2f);
    const AttentionVariant& v = call.variant;
    for (int t = 0; t < call.tokens; ++t) {
      const int p = call.n_ctx0 + t - 1;
      // A span of one position adds nothing to what its token sees.
      const bool outside = p < v.bidirectional_begin || p >= v.bidirectional_end;
      if (!outside && v.bidirectional_end - v.bidirectional_begin > 1) continue;
      ASSERT_EQ(std::memcmp(with.data() + t * stride, without.data() + t * stride,
                            size_t(group) * cache.head_dim * sizeof(float)),
                0)
          << "token " << t;
    }
  });
}

}  // namespace
}  // namespace pagoda
