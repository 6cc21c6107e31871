// nomic-bert and jina-bert-v2, bert's two relatives, as facts: pagoda-synth's files in
// llama.cpp's layout load with their configs and weights (nomic's fused attn_qkv as row views,
// jina's optional norms), bad files are refused naming what is wrong, ALiBi's slopes are
// ggml's, positions matter (RoPE, ALiBi) where bert would need learned ones; EncoderRunner
// computes what the reference encoder computes, with the same bits alone or batched on any
// thread count; jina-reranker's one-row rank head scores; pagoda-quantize writes what
// pagoda-synth does; and both agree with llama.cpp's llama-embedding on the same synthetic files
// (tests/data/encoders_llamacpp.json, recorded offline by scripts/encoders_vs_llamacpp.sh).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "engine/forward/encoder_runner.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quantize_gguf.h"
#include "engine/model/model.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/bert_models.h"
#include "support/test_support.h"
#include "testing/reference_encoder.h"

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;
using test::small_encoder;
using test::write_encoder;

constexpr Architecture kNomic = Architecture::NomicBert, kJina = Architecture::JinaBertV2;

std::string file_name(Architecture arch, const std::string& what, GgmlType type = GgmlType::F32) {
  return std::string(architecture_name(arch)) + "-" + what + (type == GgmlType::F32 ? "" : "-q8") + ".gguf";
}

using test::cosine;
using test::max_abs_diff;
using test::random_ids;
using test::run_alone;

// What rewritten() changes in a file.
struct Edit {
  std::string drop_key;                        // a key left out
  std::function<void(GgufWriter&)> keys = {};  // keys set afterwards
  std::string drop_tensor;                     // a tensor left out
  std::string short_tensor;                    // an F32 matrix given one column less
};

// The file at `src` copied as scratch file `name` with `edit` applied.
std::string rewritten(const std::string& src, const std::string& name, const Edit& edit) {
  const GgufFile good = GgufFile::open(src);
  GgufWriter w;
  for (const std::string& key : good.keys())
    if (key != edit.drop_key) w.set(key, *good.find(key));
  if (edit.keys) edit.keys(w);
  for (const GgufTensorInfo& t : good.tensors()) {
    if (t.name == edit.drop_tensor) continue;
    std::vector<uint64_t> shape = t.shape;
    if (t.name == edit.short_tensor) shape[0] -= 1;
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    w.add_tensor(t.name, shape, t.type,
                 t.name == edit.short_tensor ? good.tensor_bytes(t).first(n * sizeof(float)) : good.tensor_bytes(t));
  }
  const std::string path = test::scratch_path(name);
  w.write(path);
  return path;
}

TEST(EncoderArchitectures, ANomicBertFileLoadsWithRopeFusedQkvViewsAndAGatedFfnWithoutBiases) {
  const Model m = load_model(write_encoder(file_name(kNomic, "load"), small_encoder(kNomic, 2)));
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, kNomic);
  EXPECT_TRUE(c.is_encoder());
  EXPECT_TRUE(c.has_rope());
  EXPECT_FLOAT_EQ(c.rope_theta, 1000.0f);
  EXPECT_EQ(c.pooling_type, 2);
  EXPECT_EQ(c.alibi_max_bias, 0.0f);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-12f);
  EXPECT_TRUE(m.weights.encoder.position_embd.empty());
  EXPECT_EQ(m.weights.encoder.token_types.rows, 2);
  const LayerWeights& l = m.weights.layers[1];
  // Q, K and V are consecutive row ranges of one attn_qkv tensor.
  EXPECT_EQ(l.attn_q.rows, 64);
  EXPECT_EQ(l.attn_k.data, l.attn_q.data + 64 * l.attn_q.row_bytes());
  EXPECT_EQ(l.attn_v.data, l.attn_k.data + 64 * l.attn_k.row_bytes());
  EXPECT_TRUE(l.attn_q_bias.empty());
  EXPECT_TRUE(l.attn_output_bias.empty());
  EXPECT_EQ(l.ffn_gate.rows, 128);
  EXPECT_EQ(l.ffn_up.rows, 128);
  EXPECT_TRUE(l.ffn_up_bias.empty());
  EXPECT_TRUE(l.ffn_down_bias.empty());
  EXPECT_EQ(l.layer_output_norm_bias.size(), 64u);

  const Model q8 =
      load_model(write_encoder(file_name(kNomic, "load", GgmlType::Q8_0), small_encoder(kNomic, 1), GgmlType::Q8_0));
  EXPECT_EQ(q8.weights.layers[0].attn_k.type, GgmlType::Q8_0);
  EXPECT_EQ(q8.weights.layers[0].ffn_gate.type, GgmlType::Q8_0);
  EXPECT_EQ(q8.weights.encoder.token_types.type, GgmlType::F32);
}

TEST(EncoderArchitectures, AJinaBertV2FileLoadsWithAlibiItsOptionalNormsAndAGatedFfn) {
  const Model m = load_model(write_encoder(file_name(kJina, "load"), small_encoder(kJina, 1)));
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, kJina);
  EXPECT_FALSE(c.has_rope());
  EXPECT_EQ(c.alibi_max_bias, 8.0f);
  EXPECT_EQ(c.n_heads, 6);
  EXPECT_TRUE(m.weights.encoder.position_embd.empty());
  const LayerWeights& l = m.weights.layers[0];
  EXPECT_EQ(l.attn_q_bias.size(), 96u);
  EXPECT_EQ(l.attn_v_bias.size(), 96u);
  EXPECT_EQ(l.attn_q_norm.size(), 96u);
  EXPECT_EQ(l.attn_k_norm_bias.size(), 96u);
  EXPECT_EQ(l.attn_norm_2.size(), 96u);
  EXPECT_EQ(l.attn_output_bias.size(), 96u);
  EXPECT_EQ(l.ffn_gate.rows, 128);
  EXPECT_TRUE(l.ffn_up_bias.empty());
  EXPECT_EQ(l.ffn_down_bias.size(), 96u);

  const Model plain = load_model(write_encoder(file_name(kJina, "plain"), small_encoder(kJina, 1), GgmlType::F32, 3,
                                               /*jina_norms=*/false));
  EXPECT_TRUE(plain.weights.layers[0].attn_q_norm.empty());
  EXPECT_TRUE(plain.weights.layers[0].attn_k_norm.empty());
  EXPECT_TRUE(plain.weights.layers[0].attn_norm_2.empty());
}

TEST(EncoderArchitectures, AlibiSlopesAreGgmlsWithInterleavedOnesPastAPowerOfTwo) {
  ModelConfig c = small_encoder(kJina, 1);
  c.alibi_max_bias = 8.0f;
  // 6 heads: the first 4 are 2^(-8/4)^(h+1); heads 4 and 5 are 2^(-4/4)^1 and ^3.
  const float six[] = {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
  for (int h = 0; h < 6; ++h) EXPECT_FLOAT_EQ(c.alibi_slope(h), six[h]) << h;
  c.n_heads = 8;
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(c.alibi_slope(h), std::ldexp(1.0f, -(h + 1))) << h;
}

TEST(EncoderArchitectures, BadFilesAreRefusedNamingTheKeyOrTheTensor) {
  const std::string nomic = write_encoder(file_name(kNomic, "bad-src"), small_encoder(kNomic, 1));
  const std::string jina = write_encoder(file_name(kJina, "bad-src"), small_encoder(kJina, 1));
  auto refused = [](const std::string& src, const std::string& name, const Edit& edit, const std::string& why) {
    test::expect_error_containing([&] { load_model(rewritten(src, name, edit)); }, why);
  };
  refused(nomic, "nomic-no-pooling.gguf", {.drop_key = "nomic-bert.pooling_type"},
          "nomic-bert.pooling_type is missing");
  refused(nomic, "nomic-no-qkv.gguf", {.drop_tensor = "blk.1.attn_qkv.weight"},
          "tensor 'blk.1.attn_qkv.weight' is missing");
  refused(nomic, "nomic-short-gate.gguf", {.short_tensor = "blk.0.ffn_gate.weight"},
          "tensor 'blk.0.ffn_gate.weight' has shape [63, 128], expected [64, 128]");
  refused(jina, "jina-no-gate.gguf", {.drop_tensor = "blk.1.ffn_gate.weight"},
          "tensor 'blk.1.ffn_gate.weight' is missing");
  refused(jina, "jina-no-down-bias.gguf", {.drop_tensor = "blk.0.ffn_down.bias"},
          "tensor 'blk.0.ffn_down.bias' is missing");
  refused(jina, "jina-causal.gguf", {.keys = [](GgufWriter& w) { w.set_bool("jina-bert-v2.attention.causal", true); }},
          "jina-bert-v2.attention.causal is not false");
}

TEST(EncoderArchitectures, TheOrderOfTheTokensMattersThroughRopeAndAlibiWithoutLearnedPositions) {
  for (const Architecture arch : {kNomic, kJina}) {
    const Model m = load_model(write_encoder(file_name(arch, "order"), small_encoder(arch, 1)));
    const ReferenceEncoder enc(m);
    const size_t dim = size_t(m.config.dim);
    // The first row, [CLS], sees the same tokens in another order.
    const std::vector<float> a = enc.hidden_states(Ids{101, 200, 300, 400, 102});
    const std::vector<float> b = enc.hidden_states(Ids{101, 400, 300, 200, 102});
    EXPECT_GT(max_abs_diff({a.data(), dim}, {b.data(), dim}), 1e-4) << architecture_name(arch);
  }
}

TEST(EncoderArchitectures, TheRunnerComputesWhatTheReferenceComputesRowForRow) {
  struct Case {
    Architecture arch;
    bool jina_norms;
  };
  for (const Case k : {Case{kNomic, true}, Case{kJina, true}, Case{kJina, false}}) {
    for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
      const Model model = load_model(write_encoder(file_name(k.arch, k.jina_norms ? "rows" : "rows-plain", type),
                                                   small_encoder(k.arch, 1), type, 3, k.jina_norms));
      // The gated FFNs multiply two quantized-activation products, so a Q8_0 row moves a little
      // more than bert's.
      test::expect_rows_match_reference(
          model, std::string(architecture_name(k.arch)) + (k.jina_norms ? "" : " without norms"), 2e-5, 0.9995);
    }
  }
}

TEST(EncoderArchitectures, EachSequenceGetsTheSameBitsAloneOrInAnyBatchOnAnyThreadCount) {
  for (const Architecture arch : {kNomic, kJina}) {
    for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
      const Model model = load_model(write_encoder(file_name(arch, "inv", type), small_encoder(arch, 1), type));
      test::expect_batch_invariant(model, architecture_name(arch));
    }
  }
}

TEST(EncoderArchitectures, TheEngineEmbedsTextWithTheModelsPoolingAsTheReferenceDoes) {
  const std::vector<std::string> texts = {"hello world", "the quick brown fox jumps over the lazy dog", "a"};
  for (const Architecture arch : {kNomic, kJina}) {
    for (const int32_t pooling_type : {1, 2, 3}) {
      const std::string path =
          write_encoder(file_name(arch, "engine-" + std::to_string(pooling_type)), small_encoder(arch, pooling_type));
      const Model model = load_model(path);
      const ReferenceEncoder reference(model);
      Engine engine({.model_path = path, .threads = 2});
      EXPECT_TRUE(engine.embedding_only());
      const std::vector<std::vector<float>> got = engine.embed({texts[0], texts[1], texts[2]});
      for (size_t i = 0; i < texts.size(); ++i) {
        const std::vector<float> want =
            reference.embed(engine.tokenize(texts[i], engine.add_bos()), EncoderPooling(pooling_type));
        EXPECT_LT(max_abs_diff(got[i], want), 1e-5)
            << architecture_name(arch) << ", pooling " << pooling_type << ", input " << i;
      }
    }
  }
}

TEST(EncoderArchitectures, PagodaQuantizeWritesTheBytesPagodaSynthWritesForQ8_0) {
  // Both are llama-quantize's bytes for these files too (checked offline against the 2025-02
  // snapshot's llama-quantize).
  for (const Architecture arch : {kNomic, kJina}) {
    const ModelConfig c = small_encoder(arch, 4);
    const std::string f32 = write_encoder(file_name(arch, "quantize-src"), c);
    const std::string quantized = test::scratch_path(file_name(arch, "quantized", GgmlType::Q8_0));
    quantize_gguf(f32, quantized, parse_quant_preset("q8_0"));
    EXPECT_EQ(test::read_file(quantized),
              test::read_file(write_encoder(file_name(arch, "synth", GgmlType::Q8_0), c, GgmlType::Q8_0)))
        << architecture_name(arch);
  }
}

TEST(EncoderArchitectures, AJinaRerankerScoresWithItsOneRowHeadAsTheReferenceDoes) {
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    const std::string path = write_encoder(file_name(kJina, "rank", type), small_encoder(kJina, 4), type);
    const Model model = load_model(path);
    const EncoderWeights& e = model.weights.encoder;
    ASSERT_EQ(e.cls.rows, 1);
    EXPECT_EQ(e.cls.type, GgmlType::F32);  // one row is a vector to llama-quantize
    EXPECT_TRUE(e.cls_output.empty());
    // Q8_0: the runner quantizes the activations too, as ggml does; one unnormalized score shows
    // that most (the bound of bert's Q8_0 scores against llama.cpp).
    const double bound = type == GgmlType::F32 ? 1e-5 : 3e-2;
    for (const float score : test::expect_rank_scores_match_reference(model, bound))
      EXPECT_LT(std::abs(score), 1.0f);  // a tanh
    const ReferenceEncoder reference(model);
    Engine engine({.model_path = path, .threads = 2});
    const std::vector<std::string> documents = {"a fox is an animal", "the weather is nice", "foxes run"};
    const std::vector<float> scores = engine.rerank("what is a fox", documents);
    ASSERT_EQ(scores.size(), documents.size());
    for (size_t i = 0; i < documents.size(); ++i) {
      const float want = reference.embed(engine.rerank_tokens("what is a fox", documents[i]), EncoderPooling::Rank)[0];
      EXPECT_NEAR(scores[i], want, bound) << "document " << i;
    }
  }
}

// llama.cpp's llama-embedding (2025-02 snapshot) on files pagoda-synth writes from fixed seeds:
// the files are written again here, and both the reference and the Engine must agree with
// llama.cpp's vectors and tokenize the prompts as it did. The F32 difference is mostly ggml's
// GELU (jina), read from a table at the input rounded to f16, and its float RoPE angles (nomic).
TEST(EncoderArchitectures, TheReferenceAndTheEngineAgreeWithLlamaCppsEmbeddingsOnTheRecordedModels) {
  const nlohmann::json data =
      nlohmann::json::parse(test::read_file(std::string(PAGODA_SOURCE_DIR) + "/tests/data/encoders_llamacpp.json"));
  ASSERT_EQ(data.at("cases").size(), 90u);
  for (const Architecture arch : {kNomic, kJina}) {
    const nlohmann::json& shape = data.at("models").at(architecture_name(arch));
    ModelConfig c = small_encoder(arch, 1);
    c.dim = shape.at("dim"), c.n_layers = shape.at("layers"), c.n_heads = shape.at("heads");
    c.n_kv_heads = c.n_heads, c.ffn_dim = shape.at("ffn"), c.vocab_size = shape.at("vocab");
    c.context_length = shape.at("context");
    if (arch == kNomic) c.rope_theta = shape.at("rope_theta");
    for (const std::string type : {"f32", "q8_0"}) {
      const GgmlType storage = type == "f32" ? GgmlType::F32 : GgmlType::Q8_0;
      const std::string path =
          write_encoder(file_name(arch, "llamacpp", storage), c, storage, uint64_t(shape.at("seed")));
      const Model m = load_model(path);
      const ReferenceEncoder enc(m);
      Engine engine({.model_path = path, .threads = 2});
      // jina-reranker's head, on a file of the same seed with pooling rank.
      std::optional<Model> ranker;
      std::optional<Engine> rank_engine;
      if (arch == kJina) {
        ModelConfig rank = c;
        rank.pooling_type = 4;
        const std::string rank_path =
            write_encoder(file_name(arch, "llamacpp-rank", storage), rank, storage, uint64_t(shape.at("seed")));
        ranker.emplace(load_model(rank_path));
        rank_engine.emplace(EngineConfig{.model_path = rank_path, .threads = 2});
      }
      int checked = 0;
      for (const nlohmann::json& k : data.at("cases")) {
        if (k.at("arch") != architecture_name(arch) || k.at("type") != type) continue;
        const std::string prompt = k.at("prompt"), pooling = k.at("pooling");
        SCOPED_TRACE(std::string(architecture_name(arch)) + " " + type + " " + pooling + " '" + prompt + "'");
        const Ids ids = k.at("tokens");
        EXPECT_EQ(m.tokenizer.encode(prompt, true), ids);
        const std::vector<float> want = k.at("embedding");
        ++checked;
        if (pooling == "none") {
          test::expect_token_rows_match(enc, engine, ids, want, storage == GgmlType::F32);
          continue;
        }
        if (pooling == "rank") {
          const double bound = type == "f32" ? 1e-3 : 3e-2;
          EXPECT_NEAR(ReferenceEncoder(*ranker).embed(ids, EncoderPooling::Rank).at(0), want.at(0), bound);
          EXPECT_NEAR(rank_engine->embed({ids}, {Pooling::Rank, false}).at(0).at(0), want.at(0), bound);
          continue;
        }
        const EncoderPooling by_number = pooling == "mean"  ? EncoderPooling::Mean
                                         : pooling == "cls" ? EncoderPooling::Cls
                                                            : EncoderPooling::Last;
        const Pooling by_name = pooling == "mean" ? Pooling::Mean : pooling == "cls" ? Pooling::Cls : Pooling::Last;
        for (const std::vector<float>& got : {enc.embed(ids, by_number), engine.embed({ids}, {by_name, true}).at(0)}) {
          EXPECT_GE(cosine(got, want), type == "f32" ? 0.9999 : 0.999);
          EXPECT_LT(max_abs_diff(got, want), type == "f32" ? 2e-4 : 1e-2);
        }
      }
      EXPECT_EQ(checked, arch == kJina ? 25 : 20);
    }
  }
}

}  // namespace
}  // namespace pagoda
