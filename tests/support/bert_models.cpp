#include "support/bert_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "support/test_support.h"
#include "testing/reference_encoder.h"
#include "testing/synth.h"

namespace pagoda::test {

ModelConfig small_bert(int32_t pooling_type) {
  ModelConfig c;
  c.arch = Architecture::Bert;
  c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4, c.ffn_dim = 128;
  c.vocab_size = 600, c.context_length = 64, c.norm_eps = 1e-12f, c.pooling_type = pooling_type;
  return c;
}

std::string write_bert(const std::string& name, const ModelConfig& config, GgmlType type, uint64_t seed) {
  return write_encoder(name, config, type, seed);
}

ModelConfig small_encoder(Architecture arch, int32_t pooling_type) {
  ModelConfig c = small_bert(pooling_type);
  c.arch = arch;
  if (arch == Architecture::NomicBert) c.rope_theta = 1000.0f;
  if (arch == Architecture::JinaBertV2) c.dim = 96, c.n_heads = 6, c.n_kv_heads = 6;
  return c;
}

std::string write_encoder(const std::string& name, const ModelConfig& config, GgmlType type, uint64_t seed,
                          bool jina_norms) {
  SynthSpec spec{config, seed};
  spec.jina_norms = jina_norms;
  if (type == GgmlType::Q8_0) spec.quant = parse_quant_preset("q8_0");
  const std::string path = scratch_path(name);
  write_synth_model(path, spec);
  return path;
}

std::vector<int32_t> random_ids(std::mt19937& rng, int32_t n, int32_t vocab) {
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& t : ids) t = id(rng);
  return ids;
}

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
  return d;
}

std::vector<float> run_alone(EncoderRunner& runner, const std::vector<int32_t>& ids) {
  std::vector<float> hidden;
  const std::span<const int32_t> one[] = {ids};
  runner.forward(one, hidden);
  return hidden;
}

void expect_rows_match_reference(const Model& model, const std::string& what, double f32_bound,
                                 double quantized_cosine) {
  const ReferenceEncoder reference(model);
  EncoderRunner runner(model, 2);
  std::mt19937 rng(5);
  const bool f32 = model.weights.layers.at(0).attn_output.type == GgmlType::F32;
  const size_t dim = size_t(model.config.dim);
  for (const int32_t n : {1, 5, 17, 64}) {
    const std::vector<int32_t> ids = random_ids(rng, n, model.config.vocab_size);
    const std::vector<float> ours = run_alone(runner, ids), want = reference.hidden_states(ids);
    ASSERT_EQ(ours.size(), want.size()) << what;
    for (size_t r = 0; r < ours.size() / dim; ++r) {
      const std::span<const float> a(ours.data() + r * dim, dim), b(want.data() + r * dim, dim);
      if (f32) EXPECT_LT(max_abs_diff(a, b), f32_bound) << what << ", " << n << " tokens, row " << r;
      else EXPECT_GT(cosine(a, b), quantized_cosine) << what << ", " << n << " tokens, row " << r;
    }
  }
}

std::vector<float> expect_rank_scores_match_reference(const Model& model, double bound) {
  const ReferenceEncoder reference(model);
  EncoderRunner runner(model, 2);
  EXPECT_TRUE(runner.has_rank_head());
  std::mt19937 rng(2);
  std::vector<float> scores;
  for (const int32_t n : {2, 9, 40}) {
    const std::vector<int32_t> ids = random_ids(rng, n, model.config.vocab_size);
    const std::vector<float> hidden = run_alone(runner, ids);
    float score = 0;
    runner.rank_scores(hidden.data(), 1, &score);
    EXPECT_NEAR(score, reference.embed(ids, EncoderPooling::Rank).at(0), bound) << n << " tokens";
    scores.push_back(score);
  }
  return scores;
}

void expect_token_rows_match(const ReferenceEncoder& reference, Engine& engine, const std::vector<int32_t>& ids,
                             const std::vector<float>& want, bool f32) {
  const size_t dim = want.size() / ids.size();
  ASSERT_EQ(want.size(), ids.size() * dim);
  const std::vector<float> hidden = reference.hidden_states(ids), rows = engine.embed({ids}, {Pooling::None}).at(0);
  ASSERT_EQ(hidden.size(), want.size());
  ASSERT_EQ(rows.size(), want.size());
  for (size_t r = 0; r < ids.size(); ++r) {
    const std::span<const float> wanted(want.data() + r * dim, dim);
    std::vector<float> ours(hidden.begin() + ptrdiff_t(r * dim), hidden.begin() + ptrdiff_t((r + 1) * dim));
    const double length = std::sqrt(std::inner_product(ours.begin(), ours.end(), ours.begin(), 0.0));
    for (float& x : ours) x = float(x / length);
    for (const std::span<const float> got : {std::span<const float>(ours), std::span(rows.data() + r * dim, dim)}) {
      EXPECT_GE(cosine(got, wanted), f32 ? 0.9999 : 0.999) << "token " << r;
      EXPECT_LT(max_abs_diff(got, wanted), f32 ? 2e-4 : 1e-2) << "token " << r;
    }
  }
}

void expect_batch_invariant(const Model& model, const std::string& what) {
  EncoderRunner one_thread(model, 1), two_threads(model, 2);
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> inputs;
  for (const int32_t n : {3, 64, 1, 20, 7, 33}) inputs.push_back(random_ids(rng, n, model.config.vocab_size));
  std::vector<std::vector<float>> alone;
  for (const std::vector<int32_t>& ids : inputs) alone.push_back(run_alone(one_thread, ids));
  const size_t dim = size_t(model.config.dim);
  for (const bool reversed : {false, true}) {
    std::vector<size_t> order(inputs.size());
    std::iota(order.begin(), order.end(), 0);
    if (reversed) std::reverse(order.begin(), order.end());
    std::vector<std::span<const int32_t>> batch;
    for (size_t i : order) batch.emplace_back(inputs[i]);
    std::vector<float> hidden;
    two_threads.forward(batch, hidden);
    size_t row = 0;
    for (size_t i : order) {
      ASSERT_EQ(std::memcmp(hidden.data() + row * dim, alone[i].data(), alone[i].size() * sizeof(float)), 0)
          << what << " input " << i << (reversed ? " in the reversed batch" : " in the batch");
      row += inputs[i].size();
    }
  }
}

}  // namespace pagoda::test
