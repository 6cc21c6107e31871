// Bidirectional embedding runs (EmbeddingRun::bidirectional: Gemma 3's images, whose rows attend
// to each other both ways) in the forward pass of a tiny random Gemma 3 whose sliding window (8)
// is shorter than its images: against the oracle, which runs an image layer by layer with
// transformers' mask; a later row reaching the earlier ones; nothing reaching the positions
// before an image; and batch invariance, for the image's sequence and for its neighbours.

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "engine/forward/model_runner.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/kernel_support.h"
#include "support/test_support.h"
#include "testing/reference_model.h"

namespace pagoda {
namespace {

using test::DrivenSequence;
using test::run_together;

const std::string& gemma3_model() {
  ModelConfig c = test::tiny_gqa_config();
  c.arch = Architecture::Gemma3;
  c.n_layers = 6, c.key_length = 32, c.sliding_window = 8, c.rope_theta = 1e6f;  // layers 0–4 sliding
  return test::synth_model_once("gemma3-bidirectional.gguf", c, 7);
}

struct Fixture {
  Model model;
  ModelRunner runner;
  PagePool pool;
  Fixture() : model(load_model(gemma3_model())), runner(model, 2), pool(KvLayout::for_model(model.config, 16), 512) {}
};

std::vector<int32_t> prompt_of(int32_t n, int32_t vocab, int32_t salt) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(1 + (i * 37 + salt * 11) % (vocab - 1));
  return p;
}

// An image's rows: `count` random rows of the model's width.
std::vector<float> image_rows(const Fixture& f, int32_t count, unsigned seed) {
  return test::random_uniform(size_t(count) * size_t(f.model.config.dim), seed, -2.0f, 2.0f);
}

// A prompt of 32 positions with a 12-row image at 9 and a 4-row one at 23 (two positions
// between, as <end_of_image> and <start_of_image> would be), both bidirectional.
struct ImageCase {
  std::vector<int32_t> tokens;
  std::vector<float> a, b;
  std::vector<EmbeddingRun> runs;
  ImageCase(const Fixture& f, int32_t salt, unsigned seed)
      : tokens(prompt_of(32, f.model.config.vocab_size, salt)),
        a(image_rows(f, 12, seed)),
        b(image_rows(f, 4, seed + 1)) {
    runs = {{9, 12, a.data(), true}, {23, 4, b.data(), true}};
  }
};

// The logits at every position of `prompt`, all computed in one step.
std::vector<std::vector<float>> one_step(Fixture& f, const std::vector<int32_t>& prompt,
                                         const std::vector<EmbeddingRun>& runs) {
  BlockTable table(f.pool.layout());
  if (!table.reserve(int32_t(prompt.size()), f.pool)) throw std::runtime_error("the test's KV pool is too small");
  BatchEntry e;
  e.tokens = prompt;
  e.block_table = &table;
  e.all_logits = true;
  e.embeddings = runs;
  Batch batch;
  batch.entries.push_back(e);
  std::vector<float> logits;
  f.runner.forward(batch, f.pool.view(), logits);
  table.release(f.pool);
  const auto vocab = size_t(f.model.config.vocab_size);
  std::vector<std::vector<float>> rows;
  for (size_t p = 0; p < prompt.size(); ++p)
    rows.emplace_back(logits.begin() + p * vocab, logits.begin() + (p + 1) * vocab);
  return rows;
}

TEST(ModelRunnerBidirectional, ImagesMatchTheOracleWhichAttendsWithinEachImageBothWays) {
  Fixture f;
  const ImageCase in(f, 1, 3);
  std::vector<DrivenSequence> seqs;
  seqs.emplace_back(in.tokens, 38, -1, 16);
  seqs.back().embeddings = in.runs;
  run_together(f.runner, f.pool, seqs, 1, true);  // a logits row at each chunk's end: an image is one chunk
  const DrivenSequence& s = seqs[0];

  // The oracle the same way: token by token, each image in one call.
  for (bool bidirectional : {true, false}) {
    ReferenceModel oracle(f.model);
    double worst = 0.0;
    size_t row = 0;
    for (int32_t pos = 0; pos + 1 < int32_t(s.tokens.size()); ++row) {
      const EmbeddingRun* run = nullptr;
      for (const EmbeddingRun& r : in.runs) run = r.position == pos ? &r : run;
      ASSERT_LT(row, s.logits.size());
      const std::vector<float>& want = run ? oracle.forward_rows(run->rows, run->count, pos, bidirectional)
                                           : oracle.forward(s.tokens[size_t(pos)], pos);
      const double error = test::relative_error(s.logits[row], want);
      if (bidirectional) {
        EXPECT_LT(error, 1e-4) << "position " << pos;
      }
      worst = std::max(worst, error);
      pos += run ? run->count : 1;
    }
    EXPECT_EQ(row, s.logits.size());
    // The same comparison tells a causal image from a bidirectional one.
    if (!bidirectional) {
      EXPECT_GT(worst, 1e-2);
    }
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
}

TEST(ModelRunnerBidirectional, AnImagesLastRowReachesItsFirstPositionButNoPositionBeforeTheImage) {
  Fixture f;
  const ImageCase in(f, 2, 5);
  std::vector<float> changed = in.a;
  for (int32_t i = 0; i < f.model.config.dim; ++i) changed[size_t(11 * f.model.config.dim + i)] *= -1.0f;
  for (bool bidirectional : {true, false}) {
    std::vector<EmbeddingRun> runs = in.runs, other = in.runs;
    runs[0].bidirectional = other[0].bidirectional = bidirectional;
    other[0].rows = changed.data();
    const auto before = one_step(f, in.tokens, runs);
    const auto after = one_step(f, in.tokens, other);
    for (size_t p = 0; p < 9; ++p) EXPECT_EQ(after[p], before[p]) << "position " << p;
    // Causal rows see their own past alone; bidirectional ones, the whole image.
    for (size_t p = 9; p < 20; ++p) EXPECT_EQ(after[p] != before[p], bidirectional) << "position " << p;
    for (size_t p = 20; p < in.tokens.size(); ++p) EXPECT_NE(after[p], before[p]) << "position " << p;
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
}

TEST(ModelRunnerBidirectional, PositionsBeforeAnImageAreBitwiseTheTextWithoutIt) {
  Fixture f;
  const ImageCase in(f, 3, 7);
  const auto with = one_step(f, in.tokens, in.runs);
  const auto without = one_step(f, in.tokens, {});
  for (size_t p = 0; p < 9; ++p) EXPECT_EQ(with[p], without[p]) << "position " << p;
  EXPECT_NE(with[9], without[9]);
}

// Alone and chunked 64 at a time, or beside text-only sequences and another image's, chunked
// 1, 5, 7 or 16 at a time (chunks that start inside, at and after the images' edges).
TEST(ModelRunnerBidirectional, ImagesAndTheirNeighboursAreBitwiseTheSameAloneOrInACrowdUnderAnyChunking) {
  Fixture f;
  const ImageCase in(f, 4, 9), other(f, 5, 11);
  const int32_t vocab = f.model.config.vocab_size;
  auto drive = [&](bool crowd, int32_t chunk) {
    std::vector<DrivenSequence> seqs;
    if (crowd) seqs.emplace_back(prompt_of(13, vocab, 6), 30, -1, 16);
    seqs.emplace_back(in.tokens, 40, -1, 16);
    seqs.back().embeddings = in.runs;
    if (crowd) {
      seqs.emplace_back(other.tokens, 36, -1, 16);
      seqs.back().embeddings = other.runs;
      seqs.emplace_back(prompt_of(40, vocab, 7), 50, -1, 16);
    }
    run_together(f.runner, f.pool, seqs, chunk);
    return seqs;
  };
  const auto alone = drive(false, 64);
  std::vector<DrivenSequence> text_alone;
  text_alone.emplace_back(prompt_of(13, vocab, 6), 30, -1, 16);
  text_alone.emplace_back(prompt_of(40, vocab, 7), 50, -1, 16);
  run_together(f.runner, f.pool, text_alone, 64);
  for (int32_t chunk : {1, 5, 7, 16}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const auto crowd = drive(true, chunk);
    EXPECT_EQ(crowd[1].tokens, alone[0].tokens);
    EXPECT_EQ(crowd[1].logits, alone[0].logits);
    EXPECT_EQ(crowd[0].logits, text_alone[0].logits);
    EXPECT_EQ(crowd[3].logits, text_alone[1].logits);
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
}

TEST(ModelRunnerBidirectional, AnImageCutAcrossStepsIsRefused) {
  Fixture f;
  const ImageCase in(f, 6, 13);
  BlockTable table(f.pool.layout());
  ASSERT_TRUE(table.reserve(int32_t(in.tokens.size()), f.pool));
  for (auto [from, to] : {std::pair{0, 15}, std::pair{15, 32}, std::pair{12, 18}}) {
    BatchEntry e;
    e.tokens = std::span<const int32_t>(in.tokens).subspan(size_t(from), size_t(to - from));
    e.n_cached = from;
    e.block_table = &table;
    e.needs_logits = true;
    e.embeddings = in.runs;
    Batch batch;
    batch.entries.push_back(e);
    std::vector<float> logits;
    test::expect_error_containing([&] { f.runner.forward(batch, f.pool.view(), logits); }, "whole in one step");
  }
  table.release(f.pool);
}

}  // namespace
}  // namespace pagoda
