// Mixed-adapter batches: a request's output with an adapter equals the oracle run on weights
// merged as W + scale·B·A, and is bit-identical whether its batch holds only its adapter or a
// mix of eight adapters and the base model.

#include <gtest/gtest.h>

#include <random>

#include "engine/forward/model_runner.h"
#include "testing/reference_model.h"
#include "engine/sampling/sampler.h"
#include "support/batch_driver.h"
#include "support/lora_support.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::DrivenSequence;
using test::merged;
using test::random_adapter;

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
    return base.tokenizer.encode(
        "Story " + std::to_string(i) + ": the fox and the " + std::string(size_t(1 + i % 4), 'o') + "wl", true);
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
      EXPECT_LT(test::relative_error(s.logits[pos], want), 1e-4) << "adapter " << i << ", position " << pos;
      base_difference =
          std::max(base_difference, test::relative_error(s.logits[pos], plain.forward(s.tokens[pos], int32_t(pos))));
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
