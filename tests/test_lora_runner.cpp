// Mixed-adapter batches: a request's output with an adapter equals the oracle run on weights
// merged as W + scale·B·A, and is bit-identical whether its batch holds only its adapter or a
// mix of eight adapters and the base model.

#include <gtest/gtest.h>

#include <random>

#include "engine/model_runner.h"
#include "engine/reference_model.h"
#include "engine/sampler.h"
#include "support/batch_driver.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::DrivenSequence;

// [n_out][n_in] of each projection, in LoraProjection order.
std::pair<int32_t, int32_t> projection_shape(const ModelConfig& c, int32_t p) {
  const int32_t q = c.n_heads * c.head_dim();
  switch (LoraProjection(p)) {
    case LoraProjection::Q: return {q, c.dim};
    case LoraProjection::K:
    case LoraProjection::V: return {c.kv_dim(), c.dim};
    case LoraProjection::Output: return {c.dim, q};
    case LoraProjection::Gate:
    case LoraProjection::Up: return {c.ffn_dim, c.dim};
    case LoraProjection::Down: return {c.dim, c.ffn_dim};
  }
  return {0, 0};
}

std::vector<float> LayerWeights::*projection_member(int32_t p) {
  static std::vector<float> LayerWeights::*const members[] = {&LayerWeights::attn_q, &LayerWeights::attn_k,
                                                                &LayerWeights::attn_v, &LayerWeights::attn_output,
                                                                &LayerWeights::ffn_gate, &LayerWeights::ffn_up,
                                                                &LayerWeights::ffn_down};
  return members[p];
}

LoraAdapter random_adapter(const ModelConfig& c, int32_t rank, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  LoraAdapter a;
  a.layers.resize(c.n_layers);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    for (int32_t p = 0; p < kLoraProjections; ++p) {
      if ((l + p + int32_t(seed)) % 5 == 0) continue;  // leave some targets out
      const auto [n_out, n_in] = projection_shape(c, p);
      LoraTarget t{rank, n_in, n_out, scale, std::vector<float>(size_t(rank) * n_in), std::vector<float>(size_t(n_out) * rank)};
      for (float& v : t.a) v = u(rng) / std::sqrt(float(n_in));
      for (float& v : t.b) v = u(rng) / std::sqrt(float(rank));
      a.layers[l][size_t(p)] = std::move(t);
    }
  }
  return a;
}

// The base model with every target merged in: W + scale·B·A.
Model merged(const Model& base, const LoraAdapter& adapter) {
  Model m = base;
  for (int32_t l = 0; l < base.config.n_layers; ++l) {
    for (int32_t p = 0; p < kLoraProjections; ++p) {
      const auto& t = adapter.layers[l][size_t(p)];
      if (!t) continue;
      std::vector<float>& w = m.weights.layers[l].*projection_member(p);
      for (int32_t o = 0; o < t->n_out; ++o) {
        for (int32_t i = 0; i < t->n_in; ++i) {
          double delta = 0.0;
          for (int32_t r = 0; r < t->rank; ++r) delta += double(t->b[size_t(o) * t->rank + r]) * t->a[size_t(r) * t->n_in + i];
          w[size_t(o) * t->n_in + i] += float(t->scale * delta);
        }
      }
    }
  }
  return m;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double max_diff = 0.0, max_ref = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, double(std::abs(got[i] - want[i])));
    max_ref = std::max(max_ref, double(std::abs(want[i])));
  }
  return max_diff / max_ref;
}

struct LoraFixture : ::testing::Test {
  Model base = load_model(test::tiny_gqa_model());
  ModelRunner runner{base, 2};
  PagePool pool{KvLayout::for_model(base.config, 16), 2048};
  std::vector<LoraAdapter> adapters;
  std::vector<std::unique_ptr<LoraWeights>> weights;

  void SetUp() override {
    for (uint32_t i = 0; i < 8; ++i) {
      adapters.push_back(random_adapter(base.config, 2 + int32_t(i % 3) * 3, 0.5f + 0.25f * float(i), 100 + i));
      weights.push_back(std::make_unique<LoraWeights>("adapter" + std::to_string(i), adapters.back()));
    }
  }
  std::vector<int32_t> prompt(int i) const {
    return base.tokenizer.encode("Story " + std::to_string(i) + ": the fox and the " + std::string(size_t(1 + i % 4), 'o') + "wl", true);
  }
};

TEST_F(LoraFixture, MatchesTheOracleOnMergedWeights) {
  for (int i : {0, 3, 7}) {
    std::vector<DrivenSequence> seqs;
    seqs.emplace_back(prompt(i), 40, -1, 16);
    seqs[0].lora = weights[size_t(i)].get();
    test::run_together(runner, pool, seqs, 1, true);

    const Model m = merged(base, adapters[size_t(i)]);
    ReferenceModel oracle(m);
    ReferenceModel plain(base);
    const auto& s = seqs[0];
    double base_difference = 0.0;
    for (size_t pos = 0; pos + 1 < s.tokens.size(); ++pos) {
      const auto& want = oracle.forward(s.tokens[pos], int32_t(pos));
      EXPECT_LT(relative_error(s.logits[pos], want), 1e-4) << "adapter " << i << ", position " << pos;
      base_difference = std::max(base_difference, relative_error(s.logits[pos], plain.forward(s.tokens[pos], int32_t(pos))));
    }
    EXPECT_GT(base_difference, 1e-2) << "the adapter should change the output";

    // Greedy ids equal the oracle's.
    std::vector<int32_t> tokens = prompt(i);
    oracle.reset();
    for (size_t pos = 0; pos < 40; ++pos) {
      const auto& logits = oracle.forward(tokens[pos], int32_t(pos));
      if (pos + 1 >= tokens.size()) tokens.push_back(argmax(logits));
    }
    EXPECT_EQ(s.tokens, tokens) << "adapter " << i;
  }
  EXPECT_EQ(pool.free_pages(), pool.capacity());
}

// Each sequence's logits, bit for bit: alone with its adapter, in a batch of that adapter only,
// and in a mix of eight adapters and the base model, at several chunk sizes.
TEST_F(LoraFixture, MixedBatchesAreBitIdentical) {
  auto run = [&](const std::vector<int>& which, const std::vector<int>& adapter_of, int32_t chunk) {
    std::vector<DrivenSequence> seqs;
    for (size_t k = 0; k < which.size(); ++k) {
      seqs.emplace_back(prompt(which[k]), int32_t(prompt(which[k]).size()) + 10, -1, 16);
      seqs.back().lora = adapter_of[k] < 0 ? nullptr : weights[size_t(adapter_of[k])].get();
    }
    test::run_together(runner, pool, seqs, chunk);
    return seqs;
  };
  for (int target : {0, 5}) {
    const auto alone = run({target}, {target}, 100);
    const auto same_adapter = run({target, 1, 2, 3}, {target, target, target, target}, 7);
    std::vector<int> mix_seqs, mix_adapters;
    for (int k = 0; k < 18; ++k) {
      mix_seqs.push_back(k == 9 ? target : k);
      mix_adapters.push_back(k == 9 ? target : (k % 9) - 1);  // adapters 0..7 and the base (-1)
    }
    const auto mixed = run(mix_seqs, mix_adapters, 3);
    EXPECT_TRUE(alone[0].logits.back() == same_adapter[0].logits.back()) << "adapter " << target;
    EXPECT_TRUE(alone[0].logits.back() == mixed[9].logits.back()) << "adapter " << target;
    EXPECT_EQ(alone[0].generated(), mixed[9].generated());
  }
  // Base-model rows are untouched by the adapters beside them.
  const auto base_alone = run({4}, {-1}, 100);
  const auto base_mixed = run({4, 1, 2}, {-1, 1, 2}, 5);
  EXPECT_TRUE(base_alone[0].logits.back() == base_mixed[0].logits.back());
  EXPECT_EQ(pool.free_pages(), pool.capacity());
}

}  // namespace
}  // namespace pagoda
