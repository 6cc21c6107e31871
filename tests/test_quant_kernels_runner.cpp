// The forward pass on llama-quantize's own files, computing on the weights in their file
// encoding: close to the dequantize-then-fp32 oracle, and batch invariant bit for bit.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "engine/forward/model_runner.h"
#include "testing/reference_model.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::DrivenSequence;

// Teacher-forcing inputs of the l3v model: 4 sequences of 96 token ids.
std::vector<std::vector<int32_t>> teacher_ids() {
  const std::string path = test::shared_file("models/llamacpp-quant/l3v.teacher_ids.json");
  if (path.empty()) return {};
  std::ifstream in(path);
  return nlohmann::json::parse(in).get<std::vector<std::vector<int32_t>>>();
}

// The model, or nullptr with the reason in `why` when it cannot be loaded here.
std::unique_ptr<Model> try_load(const std::string& path, std::string& why) {
  try {
    return std::make_unique<Model>(load_model(path));
  } catch (const Error& e) {
    why = e.what();
    return nullptr;
  }
}

class QuantizedRunner : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizedRunner, MatchesOracleAndIsBatchInvariant) {
  PAGODA_SHARED_OR_SKIP(path, std::string("models/llamacpp-quant/l3v-") + GetParam() + ".gguf");
  std::string why;
  const std::unique_ptr<Model> model = try_load(path, why);
  if (!model) GTEST_SKIP() << "cannot load " << path << " yet: " << why;
  const std::vector<std::vector<int32_t>> ids = teacher_ids();
  ASSERT_EQ(ids.size(), 4u);
  const int32_t length = 24;
  auto sequences = [&](int count) {
    std::vector<DrivenSequence> seqs;
    for (int i = 0; i < count; ++i)
      seqs.emplace_back(std::vector<int32_t>(ids[i].begin(), ids[i].begin() + length), length, -1, 16);
    return seqs;
  };

  // Against the oracle, which computes in f32 on dequantized weights: the difference is the
  // int8 activation quantization's.
  std::vector<std::vector<float>> baseline;
  {
    ModelRunner runner(*model, 2);
    PagePool pool(KvLayout::for_model(model->config, 16), 256);
    std::vector<DrivenSequence> alone = sequences(1);
    test::run_together(runner, pool, alone, 1, true);
    ReferenceModel oracle(*model);
    ASSERT_EQ(alone[0].logits.size(), size_t(length));
    for (int32_t pos = 0; pos < length; ++pos) {
      const std::vector<float>& want = oracle.forward(alone[0].tokens[pos], pos);
      EXPECT_LT(test::relative_error(alone[0].logits[pos], want), 0.05) << GetParam() << " position " << pos;
    }
    baseline = alone[0].logits;
  }
  // The first sequence's logits, bit for bit, with others beside it, any chunking, 1 or 2 threads.
  for (int threads : {1, 2})
    for (int32_t chunk : {1, 5, 64}) {
      ModelRunner runner(*model, threads);
      PagePool pool(KvLayout::for_model(model->config, 16), 256);
      std::vector<DrivenSequence> crowd = sequences(4);
      test::run_together(runner, pool, crowd, chunk, true);
      // With chunks, logits come at each chunk's last token; compare those positions.
      const std::vector<std::vector<float>>& got = crowd[0].logits;
      ASSERT_FALSE(got.empty());
      EXPECT_EQ(got.back(), baseline.back()) << GetParam() << " threads " << threads << " chunk " << chunk;
      if (chunk == 1) {
        EXPECT_EQ(got, baseline) << GetParam() << " threads " << threads;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(LlamaQuantizeFiles, QuantizedRunner,
                         ::testing::Values("Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M", "Q4_1", "Q4_0", "Q2_K",
                                           "Q3_K_M", "IQ4_NL", "IQ4_XS"));

}  // namespace
}  // namespace pagoda
