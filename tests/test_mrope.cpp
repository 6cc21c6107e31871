// Multimodal RoPE (M-RoPE: Qwen2-VL, Qwen2.5-VL). An image's rows turn by their grid's
// (t, t + y, t + x) and the text after an image goes on from t + max(rows, cols), as
// transformers' get_rope_index places them; each rotated pair takes its section's position; the
// forward pass agrees with the oracle fed the same rows and positions, bit for bit however it is
// chunked and whatever shares the batch.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/forward/model_runner.h"
#include "engine/forward/mrope_positions.h"
#include "kernels/rope.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/test_support.h"
#include "testing/reference_model.h"

namespace pagoda {
namespace {

using Position = std::array<int32_t, 4>;
using test::DrivenSequence;
using test::run_together;

// transformers' get_rope_index for one sequence, written out segment by segment: a text run
// counts on from the next free position; an image adds its (0, y, x) to it; the next segment
// starts one past the largest position so far.
std::vector<Position> transformers_positions(int32_t length, const std::vector<ImageGrid>& grids) {
  std::vector<Position> out;
  int32_t next = 0;
  size_t g = 0;
  while (int32_t(out.size()) < length) {
    if (g < grids.size() && int32_t(out.size()) == grids[g].position) {
      const ImageGrid& image = grids[g++];
      int32_t largest = next;
      for (int32_t y = 0; y < image.rows; ++y) {
        for (int32_t x = 0; x < image.cols; ++x) {
          out.push_back({next, next + y, next + x, 0});
          largest = std::max({largest, next + y, next + x});
        }
      }
      next = largest + 1;
    } else {
      out.push_back({next, next, next, 0});
      ++next;
    }
  }
  return out;
}

TEST(MropePositions, FollowTransformersGetRopeIndex) {
  // Wide, tall, square, back to back, a single row, and text between and after.
  const std::vector<ImageGrid> grids = {{3, 2, 5}, {14, 4, 1}, {18, 3, 3}, {27, 1, 1}, {33, 1, 4}};
  const std::vector<Position> want = transformers_positions(45, grids);
  for (int32_t p = 0; p < 45; ++p) EXPECT_EQ(mrope_position(grids, p), want[size_t(p)]) << "position " << p;
}

TEST(MropePositions, TextAloneTakesItsOwnPositionInEverySection) {
  for (int32_t p : {0, 1, 17, 4095}) EXPECT_EQ(mrope_position({}, p), (Position{p, p, p, 0}));
}

kernels::RopeParams neox_params() {
  kernels::RopeParams p;
  p.head_dim = 16;
  p.theta = 1e6f;
  p.style = kernels::RopeStyle::Neox;
  return p;
}

std::vector<float> random_heads(int n_heads, int head_dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(size_t(n_heads) * head_dim);
  for (float& v : x) v = normal(rng);
  return x;
}

TEST(RopeSections, EqualPositionsGivePlainRopesBits) {
  const kernels::RopeTable table(64, neox_params());
  for (int32_t pos : {0, 5, 63}) {
    std::vector<float> plain = random_heads(3, 16, 1), sections = plain;
    table.apply(plain.data(), 3, pos);
    table.apply_sections(sections.data(), 3, {pos, pos, pos, pos}, {2, 3, 3, 0});
    EXPECT_EQ(0, std::memcmp(plain.data(), sections.data(), plain.size() * sizeof(float))) << "position " << pos;
  }
}

TEST(RopeSections, EachPairTurnsByItsSectionsPosition) {
  const kernels::RopeTable table(64, neox_params());
  const Position positions = {5, 9, 2, 40};
  // Sections covering the 8 pairs once, and sections of 3 pairs that repeat (pair i in i mod 3).
  for (const Position& sections : {Position{2, 3, 3, 0}, Position{1, 1, 0, 1}}) {
    const int period = sections[0] + sections[1] + sections[2] + sections[3];
    const std::vector<float> x = random_heads(2, 16, 2);
    std::vector<float> out = x;
    table.apply_sections(out.data(), 2, positions, sections);
    for (int i = 0; i < 8; ++i) {
      int j = i % period, k = 0;
      while (j >= sections[size_t(k)]) j -= sections[size_t(k++)];
      std::vector<float> at = x;
      table.apply(at.data(), 2, positions[size_t(k)]);
      for (int h = 0; h < 2; ++h) {
        for (int value : {i, i + 8}) {  // a NEOX pair: values i and i + half
          EXPECT_EQ(out[size_t(h * 16 + value)], at[size_t(h * 16 + value)]) << "pair " << i << ", head " << h;
        }
      }
    }
  }
}

// A tiny random qwen2vl: 4 heads of 16 (8 rotated pairs, sections 2, 3, 3).
const std::string& qwen2vl_model() {
  static const std::string path = [] {
    ModelConfig c = test::tiny_gqa_config();
    c.arch = Architecture::Qwen2VL;
    c.n_heads = 4;
    return test::synth_model_once("qwen2vl-mrope.gguf", c, 13);
  }();
  return path;
}

struct Fixture {
  Model model = load_model(qwen2vl_model());
  ModelRunner runner{model, 2};
  PagePool pool{KvLayout::for_model(model.config, 16), 512};
};

std::vector<int32_t> prompt_of(int32_t n, int32_t vocab, int32_t salt) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(1 + (i * 31 + salt * 7) % (vocab - 1));
  return p;
}

// Image rows of an embedding's scale, from `seed`.
std::vector<float> image_rows(const ModelConfig& c, int32_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> rows(size_t(count) * c.dim);
  for (float& v : rows) v = normal(rng);
  return rows;
}

// A prompt of 40 positions holding a 2×3 image at 4 and a 4×2 one at 20.
struct ImagePrompt {
  std::vector<int32_t> tokens;
  std::vector<ImageGrid> grids = {{4, 2, 3}, {20, 4, 2}};
  std::vector<float> first, second;
  std::vector<EmbeddingRun> runs;
  explicit ImagePrompt(const ModelConfig& c)
      : tokens(prompt_of(40, c.vocab_size, 1)), first(image_rows(c, 6, 3)), second(image_rows(c, 8, 4)) {
    runs = {{4, 6, first.data()}, {20, 8, second.data()}};
  }
};

std::vector<DrivenSequence> drive(Fixture& f, const ImagePrompt& image, bool with_grids, int32_t chunk,
                                  bool crowd = false) {
  std::vector<DrivenSequence> seqs;
  if (crowd) seqs.emplace_back(prompt_of(23, f.model.config.vocab_size, 2), 29, -1, 16);
  seqs.emplace_back(image.tokens, 46, -1, 16);
  seqs.back().embeddings = image.runs;
  if (with_grids) seqs.back().image_grids = image.grids;
  run_together(f.runner, f.pool, seqs, chunk, true);
  return seqs;
}

TEST(MropeRunner, ImagesMatchTheOracleFedTheSameRowsAndPositions) {
  Fixture f;
  const ImagePrompt image(f.model.config);
  const auto seqs = drive(f, image, true, 1);
  const DrivenSequence& s = seqs[0];
  const std::vector<Position> positions = transformers_positions(int32_t(s.tokens.size()), image.grids);
  ReferenceModel oracle(f.model);
  ASSERT_EQ(s.logits.size(), s.tokens.size() - 1);
  for (size_t p = 0; p + 1 < s.tokens.size(); ++p) {
    const float* row = nullptr;
    for (const EmbeddingRun& run : image.runs) {
      if (int32_t(p) >= run.position && int32_t(p) < run.position + run.count)
        row = run.rows + size_t(int32_t(p) - run.position) * f.model.config.dim;
    }
    const auto& want = oracle.forward(s.tokens[p], int32_t(p), row, positions[p]);
    EXPECT_LT(test::relative_error(s.logits[p], want), 1e-4) << "position " << p;
  }
}

TEST(MropeRunner, ChunkingAndNeighboursChangeNoBit) {
  Fixture f;
  const ImagePrompt image(f.model.config);
  const auto alone = drive(f, image, true, 64);
  for (int32_t chunk : {1, 5, 7}) {
    const auto crowd = drive(f, image, true, chunk, true);
    const DrivenSequence& a = alone[0];
    const DrivenSequence& c = crowd[1];
    EXPECT_EQ(c.tokens, a.tokens) << "chunk " << chunk;
    // The rows both runs have: the prompt's last position and each decode.
    ASSERT_GE(c.logits.size(), 6u);
    for (size_t k = 1; k <= 6; ++k) {
      EXPECT_EQ(0, std::memcmp(c.logits[c.logits.size() - k].data(), a.logits[a.logits.size() - k].data(),
                               size_t(f.model.config.vocab_size) * sizeof(float)))
          << "chunk " << chunk << ", row " << k << " from the end";
    }
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
}

TEST(MropeRunner, GridsMoveOnlyTheImagesAndWhatFollowsThem) {
  Fixture f;
  const ImagePrompt image(f.model.config);
  const auto plain = drive(f, image, false, 1);  // every position turned by its KV position
  const auto placed = drive(f, image, true, 1);
  for (size_t p = 0; p < 4; ++p) EXPECT_EQ(placed[0].logits[p], plain[0].logits[p]) << "position " << p;
  // From the first image's second row on, its rows' positions differ (row 0 is (4, 4, 4) both ways).
  for (size_t p = 5; p < 10; ++p) EXPECT_NE(placed[0].logits[p], plain[0].logits[p]) << "position " << p;
}

TEST(MropeRunner, OverlappingOrEmptyGridsAreRefused) {
  Fixture f;
  const std::vector<int32_t> prompt = prompt_of(12, f.model.config.vocab_size, 5);
  for (const std::vector<ImageGrid>& grids : std::vector<std::vector<ImageGrid>>{
           {{2, 2, 2}, {5, 1, 1}}, {{2, 0, 3}}, {{-1, 1, 1}}, {{0, 1 << 16, 1 << 16}}}) {
    std::vector<DrivenSequence> seqs;
    seqs.emplace_back(prompt, 14, -1, 16);
    seqs.back().image_grids = grids;
    EXPECT_THROW(run_together(f.runner, f.pool, seqs, 64), Error);
    seqs.back().table.release(f.pool);
  }
  EXPECT_EQ(f.pool.free_pages(), f.pool.capacity());
}

}  // namespace
}  // namespace pagoda
