// The bert encoder as facts: a pagoda-synth file in llama.cpp's layout loads with the right
// config and weights; the reference encoder (testing/reference_encoder.*) does what an encoder
// must (attention in both directions, pooling as llama.cpp pools, L2 normalization); the
// decoder's forward pass refuses it, saying why; and the reference agrees with llama.cpp's
// llama-embedding on the same synthetic files (tests/data/bert_llamacpp.json, recorded offline
// by scripts/bert_vs_llamacpp.sh).

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <span>
#include <nlohmann/json.hpp>

#include "engine/forward/model_runner.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/bert_models.h"
#include "support/gguf_edit.h"
#include "support/test_support.h"
#include "testing/lora_synth.h"
#include "testing/reference_encoder.h"
#include "testing/synth.h"

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;

using test::small_bert;
using test::write_bert;

const Model& mean_model() {
  static const Model model = load_model(write_bert("bert-mean.gguf", small_bert(1)));
  return model;
}

using test::cosine;
using test::max_abs_diff;

TEST(BertModel, ASynthFileLoadsWithItsConfigAndWeightsInTheirTypes) {
  const Model& m = mean_model();
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, Architecture::Bert);
  EXPECT_TRUE(c.is_encoder());
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.ffn_dim, 128);
  EXPECT_EQ(c.vocab_size, 600);
  EXPECT_EQ(c.context_length, 64);
  EXPECT_EQ(c.n_token_types, 2);
  EXPECT_EQ(c.pooling_type, 1);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-12f);
  const EncoderWeights& e = m.weights.encoder;
  EXPECT_EQ(e.position_embd.rows, 64);
  EXPECT_EQ(e.token_types.rows, 2);
  EXPECT_EQ(e.token_embd_norm_bias.size(), 64u);
  EXPECT_TRUE(e.cls.empty());
  const LayerWeights& l = m.weights.layers[1];
  EXPECT_EQ(l.attn_q_bias.size(), 64u);
  EXPECT_EQ(l.ffn_up.rows, 128);
  EXPECT_EQ(l.ffn_up_bias.size(), 128u);
  EXPECT_EQ(l.layer_output_norm_bias.size(), 64u);
  EXPECT_TRUE(l.ffn_gate.empty());

  const Model q8 = load_model(write_bert("bert-q8.gguf", small_bert(2), GgmlType::Q8_0));
  EXPECT_EQ(q8.config.pooling_type, 2);
  EXPECT_EQ(q8.weights.token_embd.type, GgmlType::Q8_0);
  EXPECT_EQ(q8.weights.layers[0].attn_q.type, GgmlType::Q8_0);
  EXPECT_EQ(q8.weights.layers[0].ffn_down.type, GgmlType::Q8_0);
  // llama-quantize leaves the position and token type tables alone.
  EXPECT_EQ(q8.weights.encoder.position_embd.type, GgmlType::F32);
  EXPECT_EQ(q8.weights.encoder.token_types.type, GgmlType::F32);
}

TEST(BertModel, OneTokenTypeLoadsAlsoAsTheVectorLlamaQuantizeWrites) {
  ModelConfig c = small_bert(1);
  c.n_token_types = 1;
  const std::string path = write_bert("bert-one-type-q8.gguf", c, GgmlType::Q8_0);
  EXPECT_EQ(GgufFile::open(path).find_tensor("token_types.weight")->shape, std::vector<uint64_t>{64});
  const Model m = load_model(path);
  EXPECT_EQ(m.config.n_token_types, 1);
  EXPECT_EQ(m.weights.encoder.token_types.rows, 1);
  EXPECT_EQ(load_model(write_bert("bert-one-type.gguf", c)).weights.encoder.token_types.rows, 1);
}

TEST(BertModel, TheSyntheticWordPieceVocabularyWrapsTextInClsAndSep) {
  const Tokenizer& tok = mean_model().tokenizer;
  EXPECT_EQ(tok.model(), TokenizerModel::Wpm);
  const Ids ids = tok.encode("Hello, world!", true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 101);  // [CLS]
  EXPECT_EQ(ids.back(), 102);   // [SEP]
  for (int32_t id : ids) EXPECT_NE(id, 100) << "no [UNK] in lower-case ASCII";
}

TEST(BertModel, SynthWritesTheSameFileForTheSameSeed) {
  const std::string a = write_bert("bert-seed-a.gguf", small_bert(4), GgmlType::Q8_0, 9);
  const std::string b = write_bert("bert-seed-b.gguf", small_bert(4), GgmlType::Q8_0, 9);
  EXPECT_EQ(test::read_file(a), test::read_file(b));
}

TEST(BertModel, ACausalBertIsRefusedByName) {
  // A bert whose attention.causal is true would need a mask pagoda does not apply; the key is
  // rewritten by copying the file's keys into a new writer.
  const GgufFile good = GgufFile::open(write_bert("bert-causal-src.gguf", small_bert(1)));
  GgufWriter w;
  for (const std::string& key : good.keys()) w.set(key, *good.find(key));
  w.set_bool("bert.attention.causal", true);
  for (const GgufTensorInfo& t : good.tensors()) w.add_tensor(t.name, t.shape, t.type, good.tensor_bytes(t));
  const std::string path = test::scratch_path("bert-causal.gguf");
  w.write(path);
  try {
    load_model(path);
    FAIL() << "a causal bert loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert.attention.causal is not false"), std::string::npos) << e.what();
  }
}

TEST(ReferenceEncoder, AttentionLooksBothWays) {
  const ReferenceEncoder enc(mean_model());
  const int dim = mean_model().config.dim;
  const std::vector<float> a = enc.hidden_states(Ids{101, 200, 300, 400, 102});
  const std::vector<float> b = enc.hidden_states(Ids{101, 200, 300, 401, 102});
  // The first row sees the changed fourth token; a causal model's would not.
  EXPECT_GT(max_abs_diff({a.begin(), a.begin() + dim}, {b.begin(), b.begin() + dim}), 1e-4);
}

TEST(ReferenceEncoder, EveryRowIsTheLastLayerNormsOutput) {
  const Model& m = mean_model();
  const ReferenceEncoder enc(m);
  const int dim = m.config.dim;
  const LayerWeights& last = m.weights.layers.back();
  const std::vector<float> h = enc.hidden_states(Ids{101, 250, 251, 252, 102});
  for (size_t row = 0; row < 5; ++row) {
    // Undoing the affine part leaves mean 0 and variance 1.
    double mean = 0.0, var = 0.0;
    std::vector<double> z(static_cast<size_t>(dim));
    for (int j = 0; j < dim; ++j) {
      z[size_t(j)] = (h[row * dim + j] - last.layer_output_norm_bias[size_t(j)]) / last.layer_output_norm[size_t(j)];
      mean += z[size_t(j)] / dim;
    }
    for (double x : z) var += (x - mean) * (x - mean) / dim;
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(var, 1.0, 1e-4);
  }
}

TEST(ReferenceEncoder, PoolsTheMeanTheFirstOrTheLastRow) {
  const ReferenceEncoder enc(mean_model());
  const int dim = mean_model().config.dim;
  const Ids ids{101, 120, 130, 140, 102};
  const std::vector<float> h = enc.hidden_states(ids);
  const std::vector<float> mean = enc.pool(h, EncoderPooling::Mean);
  ASSERT_EQ(mean.size(), size_t(dim));
  for (int j = 0; j < dim; ++j) {
    double sum = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) sum += h[i * dim + j];
    EXPECT_NEAR(mean[size_t(j)], sum / double(ids.size()), 1e-6);
  }
  EXPECT_EQ(enc.pool(h, EncoderPooling::Cls), std::vector<float>(h.begin(), h.begin() + dim));
  EXPECT_EQ(enc.pool(h, EncoderPooling::Last), std::vector<float>(h.end() - dim, h.end()));
  EXPECT_THROW(enc.pool(h, EncoderPooling::Rank), Error);  // no rank head in this model

  const std::vector<float> embedding = enc.embed(ids, EncoderPooling::Mean);
  double norm = 0.0;
  for (float x : embedding) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-6);
  EXPECT_GT(cosine(embedding, mean), 1.0 - 1e-9);
}

TEST(ReferenceEncoder, TheRankHeadGivesOneScoreFromTheFirstRow) {
  const Model m = load_model(write_bert("bert-rank.gguf", small_bert(4)));
  ASSERT_FALSE(m.weights.encoder.cls.empty());
  EXPECT_EQ(m.weights.encoder.cls.rows, 64);
  EXPECT_EQ(m.weights.encoder.cls_output.rows, 1);
  const ReferenceEncoder enc(m);
  const std::vector<float> score = enc.embed(Ids{101, 150, 102, 160, 170, 102}, EncoderPooling::Rank);
  ASSERT_EQ(score.size(), 1u);
  EXPECT_TRUE(std::isfinite(score[0]));
  EXPECT_NE(score, enc.embed(Ids{101, 150, 102, 160, 171, 102}, EncoderPooling::Rank));

  // Quantized as llama-quantize does it: cls.output.weight, a vector to ggml, stays F32 and is
  // written as [dim].
  const Model q8 = load_model(write_bert("bert-rank-q8.gguf", small_bert(4), GgmlType::Q8_0));
  EXPECT_EQ(GgufFile::open(test::scratch_path("bert-rank-q8.gguf")).find_tensor("cls.output.weight")->shape,
            std::vector<uint64_t>{64});
  EXPECT_EQ(q8.weights.encoder.cls_output.type, GgmlType::F32);
  EXPECT_EQ(q8.weights.encoder.cls.type, GgmlType::Q8_0);
  const std::vector<float> q8_score =
      ReferenceEncoder(q8).embed(Ids{101, 150, 102, 160, 170, 102}, EncoderPooling::Rank);
  EXPECT_NEAR(q8_score[0], score[0], 0.05);
}

// BertForSequenceClassification without a pooler: cls.output alone, as llama.cpp reads it, and
// several labels of which the first is the score.
TEST(BertEngine, ARankHeadOfClsOutputAloneScoresItsFirstLabelOnTheClsRow) {
  const std::string base = write_bert("bert-rank-head.gguf", small_bert(4));
  const std::string alone = test::edited_model(
      "bert-cls-output-alone.gguf", base, [](GgufWriter&) {},
      [](const std::string& tensor) { return tensor != "cls.weight" && tensor != "cls.bias"; });
  const Model m = load_model(alone);
  ASSERT_TRUE(m.weights.encoder.cls.empty());
  ASSERT_EQ(m.weights.encoder.cls_output.rows, 1);
  const Ids ids{101, 150, 102, 160, 170, 102};
  const ReferenceEncoder enc(m);
  const std::vector<float> hidden = enc.hidden_states(ids);
  const std::vector<float> head = m.weights.encoder.cls_output.to_f32();
  double want = m.weights.encoder.cls_output_bias.at(0);
  for (size_t j = 0; j < head.size(); ++j) want += double(head[j]) * hidden[j];
  EXPECT_NEAR(enc.embed(ids, EncoderPooling::Rank).at(0), want, 1e-5);
  Engine engine({.model_path = alone, .threads = 2});
  EXPECT_EQ(engine.model_pooling(), Pooling::Rank);
  EXPECT_NEAR(engine.embed({ids}, {Pooling::Rank, false}).at(0).at(0), want, 1e-4);

  // Three labels (cls.output [3][dim], its bias [3]): the first row's output is the score.
  const std::vector<float> rows(size_t(3 * 64), 0.25f), bias = {0.5f, -1.0f, 2.0f};
  const std::string three = test::edited_model(
      "bert-three-labels.gguf", alone,
      [&](GgufWriter& w) {
        w.set_string_array("bert.classifier.output_labels", {"a", "b", "c"});
        w.add_tensor("cls.output.weight", {64, 3}, rows);
        w.add_tensor("cls.output.bias", {3}, bias);
      },
      [](const std::string& tensor) { return !tensor.starts_with("cls.output"); });
  double sum = 0.0;
  for (size_t j = 0; j < 64; ++j) sum += hidden[j];
  Engine three_engine({.model_path = three, .threads = 1});
  EXPECT_NEAR(three_engine.embed({ids}, {Pooling::Rank, false}).at(0).at(0), 0.25 * sum + 0.5, 1e-4);
}

TEST(BertEngine, TheDecodersForwardPassRefusesAnEncoder) {
  try {
    ModelRunner runner(mean_model(), 1);
    FAIL() << "ModelRunner took a bert model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert is an encoder"), std::string::npos) << e.what();
  }
}

TEST(BertEngine, PagodaSynthWritesNoAdapterForAnEncoder) {
  EXPECT_THROW(write_synth_lora(test::scratch_path("bert-lora.gguf"), mean_model().config, LoraSynthSpec{}), Error);
}

EncoderPooling pooling_named(const std::string& name) {
  if (name == "mean") return EncoderPooling::Mean;
  if (name == "cls") return EncoderPooling::Cls;
  if (name == "last") return EncoderPooling::Last;
  if (name == "rank") return EncoderPooling::Rank;
  throw Error("unknown pooling '" + name + "'");
}

// llama.cpp's llama-embedding (2025-02 snapshot) on files pagoda-synth writes from a fixed
// seed, recorded by scripts/bert_vs_llamacpp.sh: the files are written again here, and both
// the reference and the engine (EncoderRunner behind Engine) must agree with llama.cpp's
// vectors and scores and tokenize the prompts as it did. Most of the F32 difference is ggml's
// GELU, read from a table at the input rounded to f16; a rank score, one unnormalized number
// at the end of the rank head, shows it most.
TEST(BertEngine, TheReferenceAndTheEngineAgreeWithLlamaCppsEmbeddingsAndScoresOnTheRecordedModels) {
  const nlohmann::json data =
      nlohmann::json::parse(test::read_file(std::string(PAGODA_SOURCE_DIR) + "/tests/data/bert_llamacpp.json"));
  const nlohmann::json& shape = data.at("model");
  ModelConfig c;
  c.arch = Architecture::Bert;
  c.dim = shape.at("dim"), c.n_layers = shape.at("layers"), c.n_heads = shape.at("heads");
  c.n_kv_heads = c.n_heads, c.ffn_dim = shape.at("ffn"), c.vocab_size = shape.at("vocab");
  c.context_length = shape.at("context"), c.norm_eps = 1e-12f;
  ASSERT_EQ(data.at("cases").size(), 40u);
  for (const std::string type : {"f32", "q8_0"}) {
    const GgmlType storage = type == "f32" ? GgmlType::F32 : GgmlType::Q8_0;
    c.pooling_type = 1;
    const std::string path = write_bert("bert-llamacpp-" + type + ".gguf", c, storage, shape.at("seed"));
    c.pooling_type = 4;
    const std::string rank_path = write_bert("bert-llamacpp-rank-" + type + ".gguf", c, storage, shape.at("seed"));
    const Model m = load_model(path), ranker = load_model(rank_path);
    const ReferenceEncoder enc(m), rank_enc(ranker);
    Engine engine({.model_path = path, .threads = 2}), rank_engine({.model_path = rank_path, .threads = 2});
    for (const nlohmann::json& k : data.at("cases")) {
      if (k.at("type") != type) continue;
      const std::string prompt = k.at("prompt"), pooling = k.at("pooling");
      SCOPED_TRACE(type + " " + pooling + " '" + prompt + "'");
      const Ids ids = k.at("tokens");
      EXPECT_EQ(m.tokenizer.encode(prompt, true), ids);
      const std::vector<float> want = k.at("embedding");
      if (pooling == "rank") {
        const double bound = type == "f32" ? 1e-3 : 3e-2;
        EXPECT_NEAR(rank_enc.embed(ids, EncoderPooling::Rank).at(0), want.at(0), bound);
        EXPECT_NEAR(rank_engine.embed({ids}, {Pooling::Rank, false}).at(0).at(0), want.at(0), bound);
        continue;
      }
      if (pooling == "none") {
        test::expect_token_rows_match(enc, engine, ids, want, storage == GgmlType::F32);
        continue;
      }
      const Pooling by_name = pooling == "mean" ? Pooling::Mean : pooling == "cls" ? Pooling::Cls : Pooling::Last;
      for (const std::vector<float>& got :
           {enc.embed(ids, pooling_named(pooling)), engine.embed({ids}, {by_name, true}).at(0)}) {
        // The acceptance bound is the cosine; the largest element's difference (about 1e-4 for
        // F32, from the GELU table) is held too, so a drift shows.
        EXPECT_GE(cosine(got, want), type == "f32" ? 0.9999 : 0.999);
        EXPECT_LT(max_abs_diff(got, want), type == "f32" ? 2e-4 : 1e-2);
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
