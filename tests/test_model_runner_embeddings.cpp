// Embedding rows fed in place of token embeddings (BatchEntry::embeddings, how image rows enter
// the language model): rows equal to the tokens' own embeddings give the tokens' logits bit for
// bit, however the prompt is chunked and whatever shares the batch; other rows change them.

#include <gtest/gtest.h>

#include "engine/forward/model_runner.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::DrivenSequence;
using test::run_together;

struct Fixture {
  Model model;
  ModelRunner runner;
  PagePool pool;
  explicit Fixture(const std::string& path)
      : model(load_model(path)), runner(model, 2), pool(KvLayout::for_model(model.config, 16), 1024) {}
};

std::vector<int32_t> prompt_of(int32_t n, int32_t vocab, int32_t salt) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(1 + (i * 37 + salt * 11) % (vocab - 1));
  return p;
}

// Positions [from, from + count) of `tokens` as rows: their embeddings, scaled as the model
// scales token embeddings when `scaled` (Gemma's √dim), so the rows stand for the tokens exactly.
std::vector<float> token_rows(const Model& model, const std::vector<int32_t>& tokens, int32_t from, int32_t count,
                              bool scaled) {
  const int32_t dim = model.config.dim;
  std::vector<float> rows(size_t(count) * dim);
  for (int32_t i = 0; i < count; ++i) {
    model.weights.token_embd.dequantize_row(tokens[size_t(from + i)], rows.data() + size_t(i) * dim);
    if (scaled)
      for (int32_t j = 0; j < dim; ++j) rows[size_t(i) * dim + j] *= model.config.embedding_scale();
  }
  return rows;
}

// Each prompt fed in chunks of `chunk` with its runs, then six greedy tokens; a logits row at
// each chunk's end and each decode.
std::vector<DrivenSequence> drive(Fixture& f, const std::vector<std::vector<int32_t>>& prompts,
                                  const std::vector<std::vector<EmbeddingRun>>& runs, int32_t chunk) {
  std::vector<DrivenSequence> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs.emplace_back(prompts[i], int32_t(prompts[i].size()) + 6, -1, 16);
    seqs.back().embeddings = runs[i];
  }
  run_together(f.runner, f.pool, seqs, chunk, true);
  return seqs;
}

void expect_rows_stand_for_tokens(const std::string& path) {
  Fixture f(path);
  const bool gemma = f.model.config.embedding_scale() != 1.0f;
  const std::vector<int32_t> prompt = prompt_of(41, f.model.config.vocab_size, 1);
  const std::vector<int32_t> other = prompt_of(23, f.model.config.vocab_size, 2);
  const std::vector<float> a = token_rows(f.model, prompt, 5, 12, true);
  const std::vector<float> b = token_rows(f.model, prompt, 30, 3, true);
  const std::vector<EmbeddingRun> runs = {{5, 12, a.data()}, {30, 3, b.data()}};

  for (int32_t chunk : {1, 4, 7, 64}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    // A logits row at each chunk's end: the same chunks with and without the rows, the rows'
    // sequence beside another that has none.
    const auto plain = drive(f, {prompt}, {{}}, chunk);
    const auto fed = drive(f, {other, prompt}, {{}, runs}, chunk);
    ASSERT_EQ(fed[1].logits.size(), plain[0].logits.size());
    for (size_t p = 0; p < plain[0].logits.size(); ++p) EXPECT_EQ(fed[1].logits[p], plain[0].logits[p]) << p;
    EXPECT_EQ(fed[1].tokens, plain[0].tokens);
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());

  // Rows are not scaled like token embeddings: Gemma's unscaled rows are other inputs.
  if (gemma) {
    const std::vector<float> unscaled = token_rows(f.model, prompt, 5, 12, false);
    const auto plain = drive(f, {prompt}, {{}}, 64);
    const auto fed = drive(f, {prompt}, {{{5, 12, unscaled.data()}}}, 64);
    EXPECT_NE(fed[0].logits.front(), plain[0].logits.front());
  }
}

TEST(ModelRunnerEmbeddings, RowsEqualToTheTokensEmbeddingsGiveTheTokensLogitsBitForBit) {
  expect_rows_stand_for_tokens(test::tiny_gqa_model());
}

TEST(ModelRunnerEmbeddings, GemmaRowsAreTakenAsTheyAreWithoutTheTokenScale) {
  ModelConfig c = test::tiny_gqa_config();
  c.arch = Architecture::Gemma3;
  c.n_layers = 6, c.key_length = 32, c.sliding_window = 8, c.rope_theta = 1e6f;  // layers 0–4 sliding
  expect_rows_stand_for_tokens(test::synth_model_once("gemma3-embedding-rows.gguf", c, 7));
}

TEST(ModelRunnerEmbeddings, OtherRowsChangeTheLogitsFromTheirFirstPositionOn) {
  Fixture f(test::tiny_gqa_model());
  const std::vector<int32_t> prompt = prompt_of(20, f.model.config.vocab_size, 3);
  std::vector<float> rows = token_rows(f.model, prompt, 8, 4, true);
  for (float& v : rows) v = -v;
  const auto plain = drive(f, {prompt}, {{}}, 1);  // logits at every position
  const auto fed = drive(f, {prompt}, {{{8, 4, rows.data()}}}, 1);
  for (size_t p = 0; p < 8; ++p) EXPECT_EQ(fed[0].logits[p], plain[0].logits[p]) << p;
  for (size_t p = 8; p < plain[0].logits.size(); ++p) EXPECT_NE(fed[0].logits[p], plain[0].logits[p]) << p;
}

TEST(ModelRunnerEmbeddings, OverlappingOrEmptyRunsAreRefused) {
  Fixture f(test::tiny_gqa_model());
  const std::vector<int32_t> prompt = prompt_of(10, f.model.config.vocab_size, 4);
  const std::vector<float> rows = token_rows(f.model, prompt, 0, 4, true);
  for (const std::vector<EmbeddingRun>& runs : std::vector<std::vector<EmbeddingRun>>{
           {{2, 3, rows.data()}, {4, 1, rows.data()}}, {{2, 0, rows.data()}}, {{2, 2, nullptr}}}) {
    std::vector<DrivenSequence> seqs;
    seqs.emplace_back(prompt, 12, -1, 16);
    seqs.back().embeddings = runs;
    EXPECT_THROW(run_together(f.runner, f.pool, seqs, 64), Error);
    seqs.back().table.release(f.pool);
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
}

}  // namespace
}  // namespace pagoda
