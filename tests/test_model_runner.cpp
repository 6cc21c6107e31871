// The batched paged forward pass against the reference oracle, the golden outputs, and its
// batch-invariance promise (bit-for-bit, whatever the batch, chunking or thread count).

#include <gtest/gtest.h>

#include <cmath>

#include "engine/forward/model_runner.h"
#include "testing/reference_model.h"
#include "engine/sampling/sampler.h"
#include "kernels/cpu_features.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::DrivenSequence;
using test::run_together;
using Sequence = DrivenSequence;

struct Fixture {
  Model model;
  ModelRunner runner;
  PagePool pool;
  Fixture(const std::string& path, int threads, int32_t tokens_per_page = 16, int32_t pages = 4096)
      : model(load_model(path)),
        runner(model, threads),
        pool(KvLayout::for_model(model.config, tokens_per_page), pages) {}
};

// Logits at every position, batched with chunk size 1, against the oracle.
void expect_matches_oracle(const std::string& model_path) {
  Fixture f(model_path, 2, 4);
  const std::vector<std::string> prompts = {"Once upon a time", "The cat", "A", "Tom and his dog went to the park."};
  std::vector<Sequence> seqs;
  for (const auto& p : prompts) seqs.emplace_back(f.model.tokenizer.encode(p, true), 40, -1, 4);
  run_together(f.runner, f.pool, seqs, 1, true);
  for (Sequence& s : seqs) {
    ReferenceModel oracle(f.model);
    ASSERT_EQ(s.logits.size(), s.tokens.size() - 1);
    for (size_t pos = 0; pos + 1 < s.tokens.size(); ++pos) {
      const auto& want = oracle.forward(s.tokens[pos], int32_t(pos));
      EXPECT_LT(test::relative_error(s.logits[pos], want), 1e-4) << "position " << pos;
    }
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
}

TEST(ModelRunner, MatchesOracleOnStories260K) {
  PAGODA_SHARED_OR_SKIP(path, test::kStoriesGguf);
  expect_matches_oracle(path);
}

TEST(ModelRunner, MatchesOracleOnRandomGqaModel) { expect_matches_oracle(test::tiny_gqa_model()); }

TEST(ModelRunner, MatchesOracleOnEveryIsa) {
  const kernels::Isa original = kernels::active_isa();
  for (kernels::Isa isa : {kernels::Isa::Portable, kernels::Isa::Avx2, kernels::Isa::Avx512}) {
    if (!kernels::set_isa(isa)) continue;
    SCOPED_TRACE(kernels::isa_name(isa));
    expect_matches_oracle(test::tiny_gqa_model());
  }
  kernels::set_isa(original);
}

std::vector<Sequence> golden_sequences(const std::vector<test::GoldenCase>& cases) {
  std::vector<Sequence> seqs;
  for (const auto& g : cases) seqs.emplace_back(g.prompt_ids, g.max_positions, 1, 16);
  return seqs;
}

TEST(ModelRunner, GoldenGreedyAllInOneBatchAndEachAlone) {
  PAGODA_SHARED_OR_SKIP(path, test::kStoriesGguf);
  PAGODA_SHARED_OR_SKIP(golden_path, test::kGolden);
  const auto cases = test::load_golden(golden_path);
  Fixture f(path, 2);
  auto together = golden_sequences(cases);
  run_together(f.runner, f.pool, together, 64);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(together[i].generated(), cases[i].greedy_ids) << "together: " << cases[i].prompt;
    std::vector<Sequence> alone = golden_sequences({cases[i]});
    run_together(f.runner, f.pool, alone, 7);
    EXPECT_EQ(alone[0].generated(), cases[i].greedy_ids) << "alone: " << cases[i].prompt;
    EXPECT_EQ(alone[0].logits, together[i].logits) << "logits differ bitwise: " << cases[i].prompt;
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
}

// A target sequence's logits, bit for bit, under every batch composition, chunk size and
// thread count.
TEST(ModelRunner, BatchInvariance) {
  const std::string path = test::tiny_gqa_model();
  std::vector<int32_t> target_prompt;
  std::vector<std::vector<int32_t>> others;
  {
    const Model m = load_model(path);
    target_prompt =
        m.tokenizer.encode("The quick brown fox jumps over the lazy dog, and then it naps in the sun.", true);
    for (int i = 0; i < 63; ++i) {
      others.push_back(m.tokenizer.encode(
          std::string(size_t(1 + i % 9), 'a' + char(i % 26)) + " story number " + std::to_string(i), true));
    }
  }
  std::vector<std::vector<float>> baseline;
  for (int threads : {1, 2}) {
    Fixture f(path, threads);
    for (int32_t chunk : {1, 7, 16, 64, 100000}) {
      for (bool crowd : {false, true}) {
        std::vector<Sequence> seqs;
        seqs.emplace_back(target_prompt, int32_t(target_prompt.size()) + 12, -1, 16);
        if (crowd) {
          for (const auto& o : others) seqs.emplace_back(o, int32_t(o.size()) + 12, -1, 16);
        }
        run_together(f.runner, f.pool, seqs, chunk);
        SCOPED_TRACE("threads " + std::to_string(threads) + ", chunk " + std::to_string(chunk) +
                     (crowd ? ", with 63 others" : ", alone"));
        // Only logits at the same positions compare: those after the whole prompt.
        const auto& logits = seqs[0].logits;
        std::vector<std::vector<float>> tail(logits.end() - 13, logits.end());
        if (baseline.empty()) baseline = tail;
        EXPECT_TRUE(tail == baseline);
        EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
      }
    }
  }
}

TEST(ModelRunner, RefusesInconsistentBatches) {
  Fixture f(test::tiny_gqa_model(), 1, 16, 8);
  BlockTable table(16);
  ASSERT_TRUE(table.reserve(16, f.pool));
  const std::vector<int32_t> tokens(17, 5), bad_token{100000};
  std::vector<float> logits;
  Batch batch;
  batch.entries.push_back({tokens, 0, &table, true});
  EXPECT_THROW(f.runner.forward(batch, f.pool.view(), logits), Error) << "17 positions, 16 slots";
  batch.entries[0] = {bad_token, 0, &table, true};
  EXPECT_THROW(f.runner.forward(batch, f.pool.view(), logits), Error) << "token outside the vocabulary";
  table.release(f.pool);
}

}  // namespace
}  // namespace pagoda
