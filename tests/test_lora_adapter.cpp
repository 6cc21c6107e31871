// LoRA adapter files: the synthetic adapter writer, and llama.cpp's GGUF adapter format as the
// loader reads it and refuses it.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/lora/lora_adapter.h"
#include "testing/lora_synth.h"
#include "engine/model/model.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

constexpr LoraProjection kAll[] = {LoraProjection::Q,      LoraProjection::K,    LoraProjection::V,
                                   LoraProjection::Output, LoraProjection::Gate, LoraProjection::Up,
                                   LoraProjection::Down};

std::string stem(int32_t layer, LoraProjection p) {
  return "blk." + std::to_string(layer) + "." + lora_projection_name(p) + ".weight";
}

std::string synth(const std::string& name, const LoraSynthSpec& spec,
                  const ModelConfig& base = test::tiny_gqa_config()) {
  const std::string path = test::scratch_path(name);
  write_synth_lora(path, base, spec);
  return path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(LoraAdapter, ProjectionNamesAndShapesAreLlamaCpps) {
  std::vector<std::string> names;
  for (LoraProjection p : kAll) names.push_back(lora_projection_name(p));
  EXPECT_EQ(names,
            std::vector<std::string>({"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}));

  // Every projection's {n_in, n_out} is the shape of the base weight the loader reads.
  const Model m = load_model(test::tiny_gqa_model());
  const LayerWeights& w = m.weights.layers[0];
  const WeightTensor* weights[] = {&w.attn_q,   &w.attn_k, &w.attn_v,  &w.attn_output,
                                   &w.ffn_gate, &w.ffn_up, &w.ffn_down};
  const GgufFile f = GgufFile::open(test::tiny_gqa_model());
  for (LoraProjection p : kAll) {
    SCOPED_TRACE(lora_projection_name(p));
    const LoraShape s = lora_projection_shape(m.config, p);
    const GgufTensorInfo* t = f.find_tensor(stem(0, p));
    ASSERT_TRUE(t);
    EXPECT_EQ(t->shape, std::vector<uint64_t>({uint64_t(s.n_in), uint64_t(s.n_out)}));
    EXPECT_EQ(weights[size_t(p)]->cols, s.n_in);
    EXPECT_EQ(weights[size_t(p)]->rows, s.n_out);
  }
}

TEST(LoraAdapter, SynthRoundTrip) {
  const ModelConfig c = test::tiny_gqa_config();
  const std::string path = synth("round-trip.gguf", {.rank = 4, .alpha = 6.0f, .seed = 7});
  const LoraAdapter adapter = load_lora_adapter(path, c, 0.5f);
  EXPECT_EQ(adapter.path, path);
  EXPECT_EQ(adapter.alpha, 6.0f);
  EXPECT_EQ(adapter.user_scale, 0.5f);
  ASSERT_EQ(adapter.layers.size(), size_t(c.n_layers));

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.type"), "adapter");
  EXPECT_EQ(f.get_string("adapter.type"), "lora");
  EXPECT_EQ(f.get_float("adapter.lora.alpha"), 6.0f);
  EXPECT_TRUE(f.get_string_opt("general.name"));
  EXPECT_EQ(f.tensors().size(), size_t(c.n_layers) * kLoraProjections * 2);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    for (LoraProjection p : kAll) {
      SCOPED_TRACE(stem(l, p));
      const auto& t = adapter.layers[l][size_t(p)];
      ASSERT_TRUE(t);
      const LoraShape s = lora_projection_shape(c, p);
      EXPECT_EQ(t->rank, 4);
      EXPECT_EQ(t->n_in, s.n_in);
      EXPECT_EQ(t->n_out, s.n_out);
      EXPECT_EQ(t->scale, 6.0f / 4.0f * 0.5f);
      const GgufTensorInfo* a = f.find_tensor(stem(l, p) + ".lora_a");
      const GgufTensorInfo* b = f.find_tensor(stem(l, p) + ".lora_b");
      ASSERT_TRUE(a && b);
      EXPECT_EQ(a->shape, std::vector<uint64_t>({uint64_t(s.n_in), 4}));
      EXPECT_EQ(b->shape, std::vector<uint64_t>({4, uint64_t(s.n_out)}));
      EXPECT_EQ(t->a, f.read_f32(*a));
      EXPECT_EQ(t->b, f.read_f32(*b));
      // The magnitudes the writer promises: a within 1/√n_in, b within 1/(2√rank), not zero.
      auto max_abs = [](const std::vector<float>& v) {
        float m = 0.0f;
        for (float x : v) m = std::max(m, std::abs(x));
        return m;
      };
      EXPECT_LE(max_abs(t->a), 1.0f / std::sqrt(float(s.n_in)));
      EXPECT_GT(max_abs(t->a), 0.5f / std::sqrt(float(s.n_in)));
      EXPECT_LE(max_abs(t->b), 0.5f / std::sqrt(4.0f));
      EXPECT_GT(max_abs(t->b), 0.25f / std::sqrt(4.0f));
    }
  }
}

TEST(LoraAdapter, SynthIsDeterministicFromItsSeed) {
  EXPECT_EQ(read_bytes(synth("seed3a.gguf", {.seed = 3})), read_bytes(synth("seed3b.gguf", {.seed = 3})));
  EXPECT_NE(read_bytes(synth("seed3c.gguf", {.seed = 3})), read_bytes(synth("seed4.gguf", {.seed = 4})));
}

TEST(LoraAdapter, AlphaZeroMeansTheUserScale) {
  const LoraAdapter adapter =
      load_lora_adapter(synth("alpha0.gguf", {.rank = 4, .alpha = 0.0f}), test::tiny_gqa_config(), 0.25f);
  for (const auto& layer : adapter.layers) {
    for (const auto& t : layer) {
      ASSERT_TRUE(t);
      EXPECT_EQ(t->scale, 0.25f);
    }
  }
}

TEST(LoraAdapter, SubsetsOfProjectionsAndLayers) {
  const ModelConfig c = test::tiny_gqa_config();
  const LoraAdapter full = load_lora_adapter(synth("full.gguf", {.rank = 3, .seed = 9}), c);
  const std::string path = synth(
      "subset.gguf", {.rank = 3, .seed = 9, .projections = {LoraProjection::K, LoraProjection::Down}, .layers = {1}});
  const LoraAdapter subset = load_lora_adapter(path, c);
  EXPECT_EQ(GgufFile::open(path).tensors().size(), 4u);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    for (LoraProjection p : kAll) {
      SCOPED_TRACE(stem(l, p));
      const auto& t = subset.layers[l][size_t(p)];
      const bool chosen = l == 1 && (p == LoraProjection::K || p == LoraProjection::Down);
      ASSERT_EQ(t.has_value(), chosen);
      if (!chosen) continue;
      // A target's values do not depend on which others were chosen.
      EXPECT_EQ(t->a, full.layers[l][size_t(p)]->a);
      EXPECT_EQ(t->b, full.layers[l][size_t(p)]->b);
    }
  }
}

TEST(LoraAdapter, SynthStorageTypesLoadCloseToF32) {
  const ModelConfig c = test::tiny_gqa_config();
  const LoraAdapter f32 = load_lora_adapter(synth("types-f32.gguf", {.rank = 32}), c);
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    SCOPED_TRACE(ggml_type_name(type));
    const LoraAdapter other =
        load_lora_adapter(synth(std::string("types-") + ggml_type_name(type) + ".gguf", {.rank = 32, .type = type}), c);
    const auto& want = f32.layers[1][size_t(LoraProjection::Down)]->a;
    const auto& got = other.layers[1][size_t(LoraProjection::Down)]->a;
    ASSERT_EQ(got.size(), want.size());
    float max_err = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::abs(got[i] - want[i]));
    EXPECT_GT(max_err, 0.0f) << "should be lossy";
    EXPECT_LT(max_err, 1e-3f);
    // 16-bit halves say so (the kernels keep them in 16 bits); Q8_0 is widened to f32.
    EXPECT_EQ(other.layers[1][size_t(LoraProjection::Down)]->stored, type == GgmlType::Q8_0 ? GgmlType::F32 : type);
  }
  EXPECT_EQ(f32.layers[1][size_t(LoraProjection::Down)]->stored, GgmlType::F32);
}

TEST(LoraAdapter, SynthRefusesBadSpecs) {
  const ModelConfig c = test::tiny_gqa_config();
  const std::string path = test::scratch_path("never.gguf");
  EXPECT_THROW(write_synth_lora(path, c, {.rank = 0}), Error);
  EXPECT_THROW(write_synth_lora(path, c, {.projections = {}}), Error);
  EXPECT_THROW(write_synth_lora(path, c, {.layers = {c.n_layers}}), Error);
  EXPECT_THROW(write_synth_lora(path, c, {.alpha = std::numeric_limits<float>::infinity()}), Error);
  EXPECT_THROW(write_synth_lora(path, c, {.rank = 8, .type = GgmlType::Q8_0}), Error) << "Q8_0 rows of 8";
  EXPECT_THROW(write_synth_lora(path, ModelConfig{}, {}), Error);
}

// ---- Files written by hand: every way an adapter can be wrong -------------------------------

using Tensors = std::vector<std::pair<std::string, std::vector<uint64_t>>>;

// The two tensors of a target of `rank` on the base weight `name` of shape {n_in, n_out}.
Tensors lora_pair(const std::string& name, uint64_t n_in, uint64_t rank, uint64_t n_out) {
  return {{name + ".lora_a", {n_in, rank}}, {name + ".lora_b", {rank, n_out}}};
}

Tensors operator+(Tensors a, const Tensors& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A correct target for the tiny model, to keep a file otherwise valid.
Tensors good_pair() { return lora_pair("blk.0.attn_q.weight", 64, 4, 64); }

// An adapter with `tensors`, all holding `value`, and valid metadata changed by `meta`
// (std::nullopt removes a key).
std::string write_adapter(const std::string& name, const Tensors& tensors,
                          const std::map<std::string, std::optional<GgufValue>>& meta = {}, float value = 0.01f) {
  std::map<std::string, std::optional<GgufValue>> kv = {
      {"general.architecture", GgufValue(std::string("llama"))},
      {"general.type", GgufValue(std::string("adapter"))},
      {"adapter.type", GgufValue(std::string("lora"))},
      {"adapter.lora.alpha", GgufValue(8.0f)},
  };
  for (const auto& [key, v] : meta) kv[key] = v;
  GgufWriter w;
  for (const auto& [key, v] : kv) {
    if (v) w.set(key, *v);
  }
  for (const auto& [tensor, shape] : tensors) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    w.add_tensor(tensor, shape, std::vector<float>(n, value));
  }
  const std::string path = test::scratch_path(name);
  w.write(path);
  return path;
}

void expect_refused(const std::string& path, const std::string& phrase, float user_scale = 1.0f) {
  try {
    load_lora_adapter(path, test::tiny_gqa_config(), user_scale);
    ADD_FAILURE() << "loading " << path << " should fail with '" << phrase << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(phrase), std::string::npos) << "want '" << phrase << "' in: " << what;
  }
}

TEST(LoraAdapterErrors, HandWrittenValidFileLoads) {
  // The control for every test below: the helper's file, unchanged, is accepted.
  const LoraAdapter a = load_lora_adapter(write_adapter("valid.gguf", good_pair()), test::tiny_gqa_config());
  ASSERT_TRUE(a.layers[0][size_t(LoraProjection::Q)]);
  EXPECT_EQ(a.layers[0][size_t(LoraProjection::Q)]->scale, 2.0f);
  EXPECT_EQ(a.layers[0][size_t(LoraProjection::Q)]->a, std::vector<float>(64 * 4, 0.01f));
}

TEST(LoraAdapterErrors, MissingFile) { expect_refused(test::scratch_path("no-such-adapter.gguf"), "cannot open"); }

TEST(LoraAdapterErrors, BaseModelIsNotAnAdapter) {
  expect_refused(test::tiny_gqa_model(), "not an adapter (general.type is missing");
  expect_refused(write_adapter("type-model.gguf", good_pair(), {{"general.type", GgufValue(std::string("model"))}}),
                 "not an adapter (general.type is 'model'");
}

TEST(LoraAdapterErrors, WrongKindOrArchitecture) {
  expect_refused(write_adapter("cvec.gguf", good_pair(), {{"adapter.type", GgufValue(std::string("control_vector"))}}),
                 "adapter type 'control_vector' is not supported");
  expect_refused(write_adapter("no-adapter-type.gguf", good_pair(), {{"adapter.type", std::nullopt}}), "adapter.type");
  expect_refused(write_adapter("mamba.gguf", good_pair(), {{"general.architecture", GgufValue(std::string("mamba"))}}),
                 "general.architecture is 'mamba' but the base model is 'llama'");
  expect_refused(write_adapter("no-arch.gguf", good_pair(), {{"general.architecture", std::nullopt}}),
                 "general.architecture");
}

TEST(LoraAdapterErrors, NonFiniteAlphaOrScale) {
  const float inf = std::numeric_limits<float>::infinity();
  expect_refused(write_adapter("alpha-nan.gguf", good_pair(), {{"adapter.lora.alpha", GgufValue(std::nanf(""))}}),
                 "adapter.lora.alpha = nan is not finite");
  expect_refused(write_adapter("alpha-inf.gguf", good_pair(), {{"adapter.lora.alpha", GgufValue(inf)}}),
                 "is not finite");
  expect_refused(write_adapter("scale-inf.gguf", good_pair()), "scale inf is not finite", inf);
  // Each finite, but alpha / rank × scale overflows.
  expect_refused(write_adapter("scale-overflow.gguf", good_pair(), {{"adapter.lora.alpha", GgufValue(3e38f)}}),
                 "the scale of 'blk.0.attn_q.weight' (alpha 3e+38 / rank 4 × 100) is not finite", 100.0f);
}

TEST(LoraAdapterErrors, MissingAlphaMeansTheUserScale) {
  const std::string path = write_adapter("no-alpha.gguf", good_pair(), {{"adapter.lora.alpha", std::nullopt}});
  const LoraAdapter a = load_lora_adapter(path, test::tiny_gqa_config(), 0.75f);
  EXPECT_EQ(a.alpha, 0.0f);
  EXPECT_EQ(a.layers[0][size_t(LoraProjection::Q)]->scale, 0.75f);
}

TEST(LoraAdapterErrors, LoneHalves) {
  const Tensors q = good_pair();
  expect_refused(write_adapter("lone-a.gguf", Tensors{q[0]} + lora_pair("blk.1.attn_q.weight", 64, 4, 64)),
                 "tensor 'blk.0.attn_q.weight.lora_a' has no matching 'blk.0.attn_q.weight.lora_b'");
  expect_refused(write_adapter("lone-b.gguf", lora_pair("blk.1.attn_q.weight", 64, 4, 64) + Tensors{q[1]}),
                 "tensor 'blk.0.attn_q.weight.lora_b' has no matching 'blk.0.attn_q.weight.lora_a'");
}

TEST(LoraAdapterErrors, UnknownAndUnsupportedTensors) {
  expect_refused(write_adapter("plain.gguf", good_pair() + Tensors{{"blk.0.attn_q.weight", {64, 64}}}),
                 "tensor 'blk.0.attn_q.weight' is not a LoRA tensor");
  expect_refused(write_adapter("lora-c.gguf", good_pair() + Tensors{{"blk.0.attn_q.weight.lora_c", {64, 4}}}),
                 "is not a LoRA tensor");
  for (const std::string name :
       {"token_embd.weight", "output.weight", "blk.0.attn_norm.weight", "blk.01.attn_q.weight", "blk.-1.attn_q.weight",
        "blk.x.attn_q.weight", "blk.0.attn_q.bias", "blk.0.attn_q", "blk.0.attn_qkv.weight", "attn_q.weight"}) {
    SCOPED_TRACE(name);
    expect_refused(write_adapter("unsupported.gguf", good_pair() + lora_pair(name, 64, 4, 64)),
                   "tensor '" + name + ".lora_a': LoRA on '" + name + "' is not supported");
  }
}

TEST(LoraAdapterErrors, BlockBeyondTheBaseModel) {
  expect_refused(write_adapter("blk2.gguf", good_pair() + lora_pair("blk.2.attn_q.weight", 64, 4, 64)),
                 "tensor 'blk.2.attn_q.weight.lora_a': block 2 does not exist (the base model has 2 blocks)");
  expect_refused(write_adapter("blk-huge.gguf", lora_pair("blk.4294967296.ffn_up.weight", 64, 4, 160)),
                 "block 4294967296 does not exist");
}

TEST(LoraAdapterErrors, ShapesThatDoNotFitTheBase) {
  const ModelConfig c = test::tiny_gqa_config();
  for (LoraProjection p : kAll) {
    SCOPED_TRACE(lora_projection_name(p));
    const LoraShape s = lora_projection_shape(c, p);
    const std::string name = stem(1, p);
    EXPECT_NO_THROW(load_lora_adapter(write_adapter("fits.gguf", lora_pair(name, s.n_in, 2, s.n_out)), c));
    expect_refused(write_adapter("bad-in.gguf", lora_pair(name, s.n_in + 1, 2, s.n_out)),
                   "do not fit the base model's '" + name + "' of shape [" + std::to_string(s.n_in) + ", " +
                       std::to_string(s.n_out) + "]");
    expect_refused(write_adapter("bad-out.gguf", lora_pair(name, s.n_in, 2, s.n_out * 2)), "do not fit");
    // In and out swapped, as a loader that confused [out][in] with {in, out} would write it.
    if (s.n_in != s.n_out)
      expect_refused(write_adapter("swapped.gguf", lora_pair(name, s.n_out, 2, s.n_in)), "do not fit");
  }
  // lora_a stored [in][rank] (untransposed) instead of {in, rank}.
  expect_refused(write_adapter("a-transposed.gguf",
                               {{"blk.0.attn_q.weight.lora_a", {4, 64}}, {"blk.0.attn_q.weight.lora_b", {4, 64}}}),
                 "do not fit");
  // An adapter written for another shape of model.
  ModelConfig other = c;
  other.ffn_dim = 96;
  expect_refused(synth("other-model.gguf", {}, other), "do not fit the base model's 'blk.0.ffn_gate.weight'");
}

TEST(LoraAdapterErrors, RanksThatDisagreeOrTensorsThatAreNotMatrices) {
  expect_refused(
      write_adapter("ranks.gguf", {{"blk.0.attn_v.weight.lora_a", {64, 4}}, {"blk.0.attn_v.weight.lora_b", {8, 16}}}),
      "disagree on the rank (4 and 8");
  expect_refused(
      write_adapter("vector.gguf", {{"blk.0.attn_v.weight.lora_a", {64}}, {"blk.0.attn_v.weight.lora_b", {1, 16}}}),
      "tensor 'blk.0.attn_v.weight.lora_a' has shape [64]; LoRA tensors are matrices");
  expect_refused(
      write_adapter("cube.gguf", {{"blk.0.attn_v.weight.lora_a", {64, 4}}, {"blk.0.attn_v.weight.lora_b", {4, 16, 2}}}),
      "tensor 'blk.0.attn_v.weight.lora_b' has shape [4, 16, 2]; LoRA tensors are matrices");
}

// A rank of 0 cannot be written (ggml has no empty dimensions), so patch it into a valid file:
// the GGUF reader refuses it before the adapter loader sees it.
TEST(LoraAdapterErrors, RankZero) {
  const std::string path = write_adapter("rank0.gguf", good_pair());
  std::string bytes = read_bytes(path);
  const std::string name = "blk.0.attn_q.weight.lora_a";
  const size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const size_t dim1 = at + name.size() + sizeof(uint32_t) + sizeof(uint64_t);  // after n_dims and dim 0
  uint64_t rank = 0;
  std::memcpy(&rank, bytes.data() + dim1, sizeof rank);
  ASSERT_EQ(rank, 4u) << "the tensor info layout changed";
  std::memset(bytes.data() + dim1, 0, sizeof rank);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  expect_refused(path, "dimension 1 is 0");
}

TEST(LoraAdapterErrors, NonFiniteValues) {
  expect_refused(write_adapter("nan-values.gguf", good_pair(), {}, std::nanf("")),
                 "tensor 'blk.0.attn_q.weight.lora_a' holds a non-finite value");
}

TEST(LoraAdapterErrors, NoTensors) {
  expect_refused(write_adapter("empty.gguf", {}), "the adapter has no LoRA tensors");
}

}  // namespace
}  // namespace pagoda
