// Scoring every position of a sequence: ModelRunner's all_logits rows against the reference
// oracle and alone vs in a crowd, and pagoda-perplexity (-f chunks as llama-perplexity cuts
// them, --ids sequences, --json figures, errors) against the oracle's own argmax and NLL.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/forward/model_runner.h"
#include "testing/reference_model.h"
#include "engine/sampling/sampler.h"
#include "testing/synth.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

const std::string kText = std::string(PAGODA_SOURCE_DIR) + "/tests/data/tiny_stories.txt";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Logits of every position of `tokens` from the oracle.
std::vector<std::vector<float>> oracle_logits(const Model& model, const std::vector<int32_t>& tokens) {
  ReferenceModel oracle(model);
  std::vector<std::vector<float>> rows;
  for (size_t pos = 0; pos < tokens.size(); ++pos) rows.push_back(oracle.forward(tokens[pos], int32_t(pos)));
  return rows;
}

double nll(const std::vector<float>& logits, int32_t token) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float v : logits) sum += std::exp(double(v) - max);
  return -(double(logits[token]) - max - std::log(sum));
}

// The argmax the engine reported must be the oracle's, unless the oracle's own top two are
// closer than the logits' tolerance (then either is right).
void expect_same_argmax(int32_t got, const std::vector<float>& want, const std::string& where) {
  const int32_t best = argmax(want);
  if (got == best) return;
  float scale = 0.0f;
  for (float v : want) scale = std::max(scale, std::abs(v));
  EXPECT_LT(want[best] - want[got], 1e-4f * scale) << where << ": argmax " << got << ", oracle " << best;
}

class ScoringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::shared_file(test::kStoriesGguf);
    if (path_.empty()) GTEST_SKIP() << "../shared/" << test::kStoriesGguf << " is absent; skipping";
    model_ = std::make_unique<Model>(load_model(path_));
  }
  std::vector<int32_t> encode(const std::string& text) const { return model_->tokenizer.encode(text, true); }
  std::string path_;
  std::unique_ptr<Model> model_;
};

TEST_F(ScoringTest, AllLogitsRowsMatchTheOracleAndDoNotDependOnTheCrowd) {
  ModelRunner runner(*model_, 2);
  PagePool pool(KvLayout::for_model(model_->config, 16), 64);
  const std::vector<int32_t> text = encode(read_all(kText).substr(0, 400));
  const std::vector<int32_t> other1 = encode("The cat sat on the mat."), other2 = encode("Lily and Ben went home.");
  ASSERT_GT(text.size(), 60u);

  auto run = [&](std::vector<const std::vector<int32_t>*> seqs, bool all) {
    std::vector<BlockTable> tables(seqs.size(), BlockTable(16));
    Batch batch;
    for (size_t i = 0; i < seqs.size(); ++i) {
      EXPECT_TRUE(tables[i].reserve(int32_t(seqs[i]->size()), pool));
      BatchEntry e{*seqs[i], 0, &tables[i]};
      e.all_logits = all;
      e.needs_logits = !all;
      batch.entries.push_back(e);
    }
    std::vector<float> logits;
    runner.forward(batch, pool.view(), logits);
    for (BlockTable& t : tables) t.release(pool);
    return logits;
  };
  const auto vocab = size_t(model_->config.vocab_size);
  const std::vector<float> alone = run({&text}, true);
  ASSERT_EQ(alone.size(), text.size() * vocab);
  const auto want = oracle_logits(*model_, text);
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const std::vector<float> row(alone.begin() + ptrdiff_t(pos * vocab), alone.begin() + ptrdiff_t((pos + 1) * vocab));
    EXPECT_LT(test::relative_error(row, want[pos]), 1e-4) << "position " << pos;
  }
  // In the middle of a crowd, its rows are the same bits.
  const std::vector<float> crowd = run({&other1, &text, &other2}, true);
  ASSERT_EQ(crowd.size(), (other1.size() + text.size() + other2.size()) * vocab);
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), crowd.begin() + ptrdiff_t(other1.size() * vocab)));
  // The last row is the row needs_logits gives.
  const std::vector<float> last = run({&text}, false);
  EXPECT_TRUE(std::equal(last.begin(), last.end(), alone.end() - ptrdiff_t(vocab)));
  EXPECT_EQ(pool.free_pages(), pool.capacity());
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_all(path)); }

TEST_F(ScoringTest, IdsAreScoredAtEveryPositionAsTheOracleScoresThem) {
  if (!std::filesystem::exists(test::program_path("pagoda-perplexity")))
    GTEST_SKIP() << "pagoda-perplexity is not built";
  const std::vector<std::vector<int32_t>> seqs = {
      encode(read_all(kText).substr(0, 300)), encode("Once upon a time, there was a dog."), {1, 403}};
  const std::string ids = test::scratch_path("ids.json"), out = test::scratch_path("ids.out.json");
  std::ofstream(ids) << nlohmann::json(seqs).dump();
  // -b 64: the long sequence runs alone, the two short ones share a step.
  const test::ProgramRun r = test::run_program(
      "pagoda-perplexity", "-m " + path_ + " --ids " + ids + " -b 64 -t 2 --cache-type f32 --json " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("in 2 steps"), std::string::npos) << r.output;
  const nlohmann::json j = read_json(out);
  ASSERT_EQ(j["sequences"].size(), seqs.size());
  double sum = 0.0;
  size_t count = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const nlohmann::json& got = j["sequences"][s];
    const auto want = oracle_logits(*model_, seqs[s]);
    EXPECT_EQ(got["first_scored"], 0);
    ASSERT_EQ(got["argmax"].size(), seqs[s].size());
    ASSERT_EQ(got["nll"].size(), seqs[s].size() - 1);
    for (size_t pos = 0; pos < seqs[s].size(); ++pos) {
      const std::string where = "sequence " + std::to_string(s) + " position " + std::to_string(pos);
      expect_same_argmax(got["argmax"][pos].get<int32_t>(), want[pos], where);
      if (pos + 1 == seqs[s].size()) continue;
      const double want_nll = nll(want[pos], seqs[s][pos + 1]);
      EXPECT_NEAR(got["nll"][pos].get<double>(), want_nll, 1e-3 * (1.0 + want_nll)) << where;
      sum += got["nll"][pos].get<double>();
      ++count;
    }
  }
  EXPECT_NEAR(j["ppl"].get<double>(), std::exp(sum / double(count)), 1e-9 * j["ppl"].get<double>());
}

TEST_F(ScoringTest, TextIsCutIntoChunksAsLlamaPerplexityCutsIt) {
  if (!std::filesystem::exists(test::program_path("pagoda-perplexity")))
    GTEST_SKIP() << "pagoda-perplexity is not built";
  const std::string out = test::scratch_path("text.out.json");
  const test::ProgramRun r = test::run_program(
      "pagoda-perplexity", "-m " + path_ + " -f " + kText + " -c 128 --chunks 3 -t 2 --cache-type f32 --json " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json j = read_json(out);
  ASSERT_EQ(j["sequences"].size(), 3u);
  const std::vector<int32_t> ids = encode(read_all(kText));
  double sum = 0.0;
  for (size_t c = 0; c < 3; ++c) {
    const nlohmann::json& got = j["sequences"][c];
    EXPECT_EQ(got["first_scored"], 64);
    ASSERT_EQ(got["argmax"].size(), 128u);
    ASSERT_EQ(got["nll"].size(), 63u);  // positions 64..126 predict tokens 65..127
    std::vector<int32_t> chunk(ids.begin() + ptrdiff_t(c * 128), ids.begin() + ptrdiff_t((c + 1) * 128));
    chunk[0] = model_->tokenizer.bos_id();
    const auto want = oracle_logits(*model_, chunk);
    for (size_t pos = 0; pos < 128; ++pos) {
      expect_same_argmax(got["argmax"][pos].get<int32_t>(), want[pos],
                         "chunk " + std::to_string(c) + " position " + std::to_string(pos));
    }
    for (size_t k = 0; k < 63; ++k) {
      const double want_nll = nll(want[64 + k], chunk[65 + k]);
      EXPECT_NEAR(got["nll"][k].get<double>(), want_nll, 1e-3 * (1.0 + want_nll)) << "chunk " << c << " scored " << k;
      sum += got["nll"][k].get<double>();
    }
  }
  char line[64];
  std::snprintf(line, sizeof line, "Final estimate: PPL = %.4f +/- ", std::exp(sum / (3 * 63)));
  EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  EXPECT_NE(r.output.find("[3]"), std::string::npos) << r.output;  // the running estimate
}

// --cache-type: the default is f16, as llama-perplexity's; every type scores the text near the
// f32 cache's perplexity (the cache's rounding is all that differs). q8_0 blocks 32 values of a
// head, so it runs on a random model with stories260K's vocabulary and head_dim 32.
TEST_F(ScoringTest, EveryCacheTypeScoresTheTextNearTheF32Cache) {
  if (!std::filesystem::exists(test::program_path("pagoda-perplexity")))
    GTEST_SKIP() << "pagoda-perplexity is not built";
  ModelConfig shape;
  shape.dim = 128, shape.n_layers = 2, shape.n_heads = 4, shape.n_kv_heads = 4, shape.ffn_dim = 256;
  shape.context_length = 256;
  SynthSpec spec{shape, 3};
  spec.vocab_path = path_;
  const std::string head_dim_32 = test::scratch_path("perplexity-hd32.gguf");
  write_synth_model(head_dim_32, spec);
  auto ppl = [&](const std::string& model, const std::string& flag, const std::string& named) {
    const test::ProgramRun r =
        test::run_program("pagoda-perplexity", "-m " + model + " -f " + kText + " -c 128 --chunks 3 -t 2" + flag);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(", " + named + " KV cache"), std::string::npos) << r.output;
    const size_t at = r.output.find("PPL = ");
    EXPECT_NE(at, std::string::npos) << r.output;
    return at == std::string::npos ? 0.0 : std::stod(r.output.substr(at + 6));
  };
  for (const std::string& model : {path_, head_dim_32}) {
    const double f32 = ppl(model, " --cache-type f32", "f32");
    ASSERT_GT(f32, 1.0) << model;
    EXPECT_NEAR(ppl(model, "", "f16"), f32, 0.01 * f32) << model;
    EXPECT_NEAR(ppl(model, " --cache-type bf16", "bf16"), f32, 0.03 * f32) << model;
    if (model == head_dim_32) {
      EXPECT_NEAR(ppl(model, " --cache-type q8_0", "q8_0"), f32, 0.03 * f32);
    }
  }
  const test::ProgramRun q8 =
      test::run_program("pagoda-perplexity", "-m " + path_ + " -f " + kText + " --cache-type q8_0");
  EXPECT_NE(q8.status, 0);
  EXPECT_NE(q8.output.find("q8_0 stores blocks of 32 values, but the model's head_dim is 8"), std::string::npos)
      << q8.output;
}

TEST_F(ScoringTest, BadInputsAreClearErrors) {
  if (!std::filesystem::exists(test::program_path("pagoda-perplexity")))
    GTEST_SKIP() << "pagoda-perplexity is not built";
  auto expect_error = [&](const std::string& args, const std::string& message) {
    const test::ProgramRun r = test::run_program("pagoda-perplexity", args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  };
  const std::string m = "-m " + path_ + " ";
  const std::string short_text = test::scratch_path("short.txt");
  std::ofstream(short_text) << "Once upon a time.";
  expect_error(m + "-f " + short_text, "at least 1024");
  expect_error(m + "-f /nonexistent/text.txt", "/nonexistent/text.txt: cannot open");
  const std::string bad_ids = test::scratch_path("bad_ids.json");
  std::ofstream(bad_ids) << "[[1, 2, 3], [1, 512]]";
  expect_error(m + "--ids " + bad_ids, "sequence 1: 512 is not a token id below the vocabulary size 512");
  const std::string long_ids = test::scratch_path("long_ids.json");
  std::ofstream(long_ids) << nlohmann::json({std::vector<int32_t>(2100, 5)}).dump();
  expect_error(m + "--ids " + long_ids, "do not fit the model's context of 2048");
  expect_error(m, "give one of -f TEXT or --ids FILE.json");
  expect_error(m + "-f " + kText + " --cache-type q4_0", "--cache-type must be f32, f16, bf16 or q8_0, got 'q4_0'");
  expect_error("-f " + kText, "-m MODEL is required");
}

}  // namespace
}  // namespace pagoda
