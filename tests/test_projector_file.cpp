// Vision projector (mmproj) files as facts: what testing/vision_synth writes for every family,
// in examples/llava's layout and in today's, loads with the config and the weights it was
// written with; malformed and hostile files are pagoda::Errors naming the problem, never a
// crash (run under ASan too).

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/vision/vision_model.h"
#include "pagoda/error.h"
#include "support/gguf_edit.h"
#include "support/test_support.h"
#include "testing/synth.h"
#include "testing/vision_synth.h"

namespace pagoda {
namespace {

using P = ProjectorType;
constexpr P kFamilies[] = {P::LlavaMlp, P::Gemma3, P::Qwen2VL, P::Qwen25VL};

bool has_legacy_layout(P family) { return family == P::LlavaMlp || family == P::Qwen2VL; }

std::string family_name(P family) {
  switch (family) {
    case P::LlavaMlp: return "llava";
    case P::Gemma3: return "gemma3";
    case P::Qwen2VL: return "qwen2vl";
    case P::Qwen25VL: return "qwen25vl";
  }
  return "?";
}

struct Written {
  std::string path;
  VisionConfig config;  // as write_synth_projector says the file states it
};

Written write_tiny(P family, ProjectorLayout layout, GgmlType type = GgmlType::F32, uint64_t seed = 5) {
  VisionSynthSpec spec;
  spec.config = find_vision_synth_preset(family, "tiny").config;
  spec.layout = layout;
  spec.type = type;
  spec.seed = seed;
  const std::string name = "mmproj-" + family_name(family) + (layout == ProjectorLayout::Legacy ? "-legacy" : "") +
                           (type == GgmlType::F16 ? "-f16" : "") + "-" + std::to_string(seed) + ".gguf";
  const std::string path = test::scratch_path(name);
  return {path, write_synth_projector(path, spec)};
}

void expect_same_config(const VisionConfig& got, const VisionConfig& want) {
  EXPECT_EQ(got.projector, want.projector);
  EXPECT_EQ(got.image_size, want.image_size);
  EXPECT_EQ(got.patch_size, want.patch_size);
  EXPECT_EQ(got.dim, want.dim);
  EXPECT_EQ(got.ffn_dim, want.ffn_dim);
  EXPECT_EQ(got.n_heads, want.n_heads);
  EXPECT_EQ(got.n_layers, want.n_layers);
  EXPECT_EQ(got.layers_run, want.layers_run);
  EXPECT_FLOAT_EQ(got.eps, want.eps);
  EXPECT_EQ(got.image_mean, want.image_mean);
  EXPECT_EQ(got.image_std, want.image_std);
  EXPECT_EQ(got.activation, want.activation);
  EXPECT_EQ(got.projection_dim, want.projection_dim);
  EXPECT_EQ(got.tokens_per_image, want.tokens_per_image);
  EXPECT_EQ(got.spatial_merge, want.spatial_merge);
  EXPECT_EQ(got.window_size, want.window_size);
  EXPECT_EQ(got.full_attention_layers, want.full_attention_layers);
  EXPECT_EQ(got.min_pixels, want.min_pixels);
  EXPECT_EQ(got.max_pixels, want.max_pixels);
}

// A tensor of the file as stored, in f32, read without the loader.
std::vector<float> file_tensor(const std::string& path, const std::string& name) {
  const GgufFile f = GgufFile::open(path);
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) throw Error(path + ": no tensor " + name);
  return f.read_f32(*t);
}

void expect_error(const std::string& path, const std::string& needle) {
  test::expect_error_containing([&] { load_projector(path); }, needle);
}

// ---- round trips ---------------------------------------------------------------------------

TEST(ProjectorFile, EveryFamilyLayoutAndTypeLoadsWithTheConfigItWasWrittenWith) {
  for (P family : kFamilies) {
    for (ProjectorLayout layout : {ProjectorLayout::Legacy, ProjectorLayout::Current}) {
      if (layout == ProjectorLayout::Legacy && !has_legacy_layout(family)) continue;
      for (GgmlType type : {GgmlType::F32, GgmlType::F16}) {
        SCOPED_TRACE(family_name(family) + (layout == ProjectorLayout::Legacy ? " legacy " : " current ") +
                     ggml_type_name(type));
        const Written w = write_tiny(family, layout, type);
        const VisionModel m = load_projector(w.path);
        expect_same_config(m.config, w.config);
        ASSERT_EQ(m.weights.layers.size(), size_t(w.config.n_layers));
        EXPECT_EQ(m.weights.layers[0].q.type, type);
        EXPECT_EQ(m.weights.patch_embd.type, type);
        EXPECT_EQ(m.weights.layers[0].ln1.size(), size_t(w.config.dim));
      }
    }
  }
}

TEST(ProjectorFile, TheTinyPresetsStateWhatEachFamilyNeeds) {
  const VisionConfig llava = write_tiny(P::LlavaMlp, ProjectorLayout::Current).config;
  EXPECT_EQ(llava.layers_run, llava.n_layers - 1);  // the penultimate block's features
  EXPECT_EQ(llava.activation, VisionActivation::QuickGelu);
  const VisionConfig gemma = write_tiny(P::Gemma3, ProjectorLayout::Current).config;
  EXPECT_EQ(gemma.tokens_per_image, 4);
  EXPECT_EQ(gemma.activation, VisionActivation::Gelu);
  const VisionConfig qwen25 = write_tiny(P::Qwen25VL, ProjectorLayout::Current).config;
  EXPECT_EQ(qwen25.full_attention_layers, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(qwen25.window_size, 112);
  EXPECT_EQ(qwen25.spatial_merge, 2);
  EXPECT_EQ(qwen25.activation, VisionActivation::Silu);
}

TEST(ProjectorFile, TheFullPresetsHaveTheRealEncodersShapes) {
  struct Shape {
    P family;
    int32_t image, dim, ffn, heads, layers, out;
  };
  for (const Shape& s :
       {Shape{P::LlavaMlp, 336, 1024, 4096, 16, 24, 4096}, Shape{P::Gemma3, 896, 1152, 4304, 16, 27, 2560},
        Shape{P::Qwen2VL, 560, 1280, 5120, 16, 32, 1536}, Shape{P::Qwen25VL, 560, 1280, 3420, 16, 32, 2048}}) {
    const VisionConfig& c = find_vision_synth_preset(s.family, "full").config;
    SCOPED_TRACE(family_name(s.family));
    EXPECT_EQ(c.image_size, s.image);
    EXPECT_EQ(c.patch_size, 14);
    EXPECT_EQ(c.dim, s.dim);
    EXPECT_EQ(c.ffn_dim, s.ffn);
    EXPECT_EQ(c.n_heads, s.heads);
    EXPECT_EQ(c.n_layers, s.layers);
    EXPECT_EQ(c.projection_dim, s.out);
  }
  EXPECT_EQ(find_vision_synth_preset(P::Gemma3, "full").config.tokens_per_image, 256);
  EXPECT_EQ(find_vision_synth_preset(P::Qwen25VL, "full").config.full_attention_layers,
            (std::vector<int32_t>{7, 15, 23, 31}));
  test::expect_error_containing([] { find_vision_synth_preset(P::Gemma3, "huge"); }, "known: tiny, full");
}

TEST(ProjectorFile, WeightsAreTheOnesWrittenWithTheFfnTheRightWayRoundInBothLayouts) {
  for (P family : {P::LlavaMlp, P::Qwen2VL}) {
    SCOPED_TRACE(family_name(family));
    const Written legacy = write_tiny(family, ProjectorLayout::Legacy);
    const Written current = write_tiny(family, ProjectorLayout::Current);
    const VisionModel a = load_projector(legacy.path), b = load_projector(current.path);
    const int32_t dim = b.config.dim, width = b.config.ffn_dim;
    ASSERT_NE(dim, width);  // else the shapes could not tell up from down
    for (const VisionModel* m : {&a, &b}) {
      const VisionLayerWeights& l = m->weights.layers[1];
      EXPECT_EQ(l.ffn_up.rows, width);
      EXPECT_EQ(l.ffn_up.cols, dim);
      EXPECT_EQ(l.ffn_down.rows, dim);
      EXPECT_EQ(l.ffn_down.cols, width);
      EXPECT_EQ(l.ffn_up_bias.size(), size_t(width));
      EXPECT_EQ(l.ffn_down_bias.size(), size_t(dim));
    }
    // One seed is one encoder in either layout: legacy's "ffn_down" is the current "ffn_up".
    EXPECT_EQ(a.weights.layers[1].ffn_up.to_f32(), b.weights.layers[1].ffn_up.to_f32());
    EXPECT_EQ(a.weights.layers[1].ffn_down.to_f32(), b.weights.layers[1].ffn_down.to_f32());
    EXPECT_EQ(a.weights.layers[1].ffn_up_bias, b.weights.layers[1].ffn_up_bias);
    EXPECT_EQ(b.weights.layers[1].ffn_up.to_f32(), file_tensor(current.path, "v.blk.1.ffn_up.weight"));
    EXPECT_EQ(a.weights.layers[1].ffn_up.to_f32(), file_tensor(legacy.path, "v.blk.1.ffn_down.weight"));
    EXPECT_EQ(a.weights.mm_2.to_f32(), b.weights.mm_2.to_f32());
    EXPECT_EQ(a.weights.post_ln, b.weights.post_ln);
  }
}

TEST(ProjectorFile, TensorsLoadFromTheirOwnNames) {
  const Written w = write_tiny(P::LlavaMlp, ProjectorLayout::Current);
  const VisionModel m = load_projector(w.path);
  const VisionWeights& v = m.weights;
  EXPECT_EQ(v.layers[2].q.to_f32(), file_tensor(w.path, "v.blk.2.attn_q.weight"));
  EXPECT_EQ(v.layers[2].o.to_f32(), file_tensor(w.path, "v.blk.2.attn_out.weight"));
  EXPECT_EQ(v.layers[0].k_bias, file_tensor(w.path, "v.blk.0.attn_k.bias"));
  EXPECT_EQ(v.layers[1].ln2_bias, file_tensor(w.path, "v.blk.1.ln2.bias"));
  EXPECT_EQ(v.patch_embd.to_f32(), file_tensor(w.path, "v.patch_embd.weight"));
  EXPECT_EQ(v.patch_embd.rows, 64);
  EXPECT_EQ(v.patch_embd.cols, 3 * 14 * 14);
  EXPECT_EQ(v.class_embd, file_tensor(w.path, "v.class_embd"));
  EXPECT_EQ(v.position_embd.rows, 4 * 4 + 1);  // the class token's position, then the patches'
  EXPECT_EQ(v.mm_0.to_f32(), file_tensor(w.path, "mm.0.weight"));
  EXPECT_EQ(v.mm_2_bias, file_tensor(w.path, "mm.2.bias"));
  EXPECT_FALSE(v.pre_ln.empty());
  EXPECT_TRUE(v.post_ln.empty());
  EXPECT_TRUE(v.layers[0].ffn_gate.empty());
  // Random weights in a sane range: norms near 1, small biases.
  for (float x : v.layers[0].ln1) EXPECT_NEAR(x, 1.0f, 0.1f);
  for (float x : v.layers[0].q_bias) EXPECT_LE(std::fabs(x), 0.1f);
}

TEST(ProjectorFile, QwenTwoPointFiveHasRmsNormsAndAGatedFfn) {
  const Written w = write_tiny(P::Qwen25VL, ProjectorLayout::Current);
  const VisionModel m = load_projector(w.path);
  const VisionLayerWeights& l = m.weights.layers[0];
  EXPECT_TRUE(l.ln1_bias.empty());
  EXPECT_EQ(l.ffn_gate.rows, m.config.ffn_dim);
  EXPECT_EQ(l.ffn_gate.to_f32(), file_tensor(w.path, "v.blk.0.ffn_gate.weight"));
  EXPECT_FALSE(m.weights.patch_embd_1.empty());
  EXPECT_TRUE(m.weights.position_embd.empty());
  EXPECT_TRUE(m.weights.post_ln_bias.empty());
  EXPECT_EQ(m.weights.mm_0.rows, 4 * 64);
  EXPECT_EQ(m.weights.mm_2.rows, 96);
}

TEST(ProjectorFile, GemmaProjectionIsTheTransposeOfTheFilesMatrix) {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16}) {
    const Written w = write_tiny(P::Gemma3, ProjectorLayout::Current, type);
    const VisionModel m = load_projector(w.path);
    const WeightTensor& t = m.weights.mm_input_projection;
    const int64_t out = m.config.projection_dim, dim = m.config.dim;
    ASSERT_EQ(t.rows, out);
    ASSERT_EQ(t.cols, dim);
    EXPECT_EQ(t.type, GgmlType::F32);
    const std::vector<float> stored = file_tensor(w.path, "mm.input_projection.weight");  // [dim][out]
    const std::vector<float> got = t.to_f32();
    for (int64_t j = 0; j < out; ++j)
      for (int64_t i = 0; i < dim; ++i) ASSERT_EQ(got[j * dim + i], stored[i * out + j]) << j << ", " << i;
    EXPECT_EQ(m.weights.mm_soft_emb_norm, file_tensor(w.path, "mm.soft_emb_norm.weight"));
    EXPECT_EQ(m.weights.position_embd.rows, 8 * 8);
    EXPECT_EQ(m.weights.patch_bias.size(), size_t(dim));
  }
}

TEST(ProjectorFile, ViewsPointIntoTheMappedFileWhichTheModelKeepsAlive) {
  const Written w = write_tiny(P::Qwen2VL, ProjectorLayout::Current);
  std::optional<VisionModel> kept;
  std::vector<float> q;
  {
    const VisionModel m = load_projector(w.path);
    EXPECT_TRUE(m.weights.layers[0].q.mapped);
    ASSERT_NE(m.file, nullptr);
    EXPECT_TRUE(m.file->maps_file());
    q = m.weights.layers[0].q.to_f32();
    kept = m;  // shares the storage
  }
  EXPECT_EQ(kept->weights.layers[0].q.to_f32(), q);
  const VisionModel copied = load_projector(w.path, MappedFile::Load::Copy);
  EXPECT_FALSE(copied.weights.layers[0].q.mapped);
  EXPECT_EQ(copied.weights.layers[0].q.to_f32(), q);
}

TEST(ProjectorFile, AFeatureLayerKeyChoosesTheBlocksLlavaRuns) {
  const Written w = write_tiny(P::LlavaMlp, ProjectorLayout::Current);
  const std::string one = test::edited_model("mmproj-feature-1.gguf", w.path,
                                             [](GgufWriter& g) { g.set_i32_array("clip.vision.feature_layer", {1}); });
  EXPECT_EQ(load_projector(one).config.layers_run, 1);
  VisionSynthSpec spec;
  spec.config = find_vision_synth_preset(P::LlavaMlp, "tiny").config;
  spec.config.layers_run = 3;  // every block, written as the key
  const std::string path = test::scratch_path("mmproj-feature-3.gguf");
  EXPECT_EQ(write_synth_projector(path, spec).layers_run, 3);
  EXPECT_EQ(load_projector(path).config.layers_run, 3);
  const std::string several = test::edited_model("mmproj-feature-many.gguf", w.path, [](GgufWriter& g) {
    g.set_i32_array("clip.vision.feature_layer", {1, 2});
  });
  expect_error(several, "clip.vision.feature_layer names 2 layers");
  const std::string deep = test::edited_model("mmproj-feature-deep.gguf", w.path,
                                              [](GgufWriter& g) { g.set_i32_array("clip.vision.feature_layer", {4}); });
  expect_error(deep, "clip.vision.feature_layer = 4 is out of range");
}

TEST(ProjectorFile, QwenMergerSecondLayerMayBeNamedMmOne) {
  const Written w = write_tiny(P::Qwen2VL, ProjectorLayout::Current);
  const std::vector<float> weight = file_tensor(w.path, "mm.2.weight"), bias = file_tensor(w.path, "mm.2.bias");
  const std::string renamed = test::edited_model(
      "mmproj-qwen-mm1.gguf", w.path,
      [&](GgufWriter& g) {
        g.add_tensor("mm.1.weight", {4 * 64, 96}, weight);
        g.add_tensor("mm.1.bias", {96}, bias);
      },
      [](const std::string& name) { return name.rfind("mm.2.", 0) != 0; });
  const VisionModel m = load_projector(renamed);
  EXPECT_EQ(m.weights.mm_2.to_f32(), weight);
  EXPECT_EQ(m.weights.mm_2_bias, bias);
}

// ---- malformed files -----------------------------------------------------------------------

TEST(ProjectorFile, AMissingTensorIsAnErrorNamingIt) {
  const Written w = write_tiny(P::LlavaMlp, ProjectorLayout::Legacy);
  const std::string path = test::edited_model(
      "mmproj-missing.gguf", w.path, [](GgufWriter&) {},
      [](const std::string& name) { return name != "v.blk.1.attn_q.weight"; });
  expect_error(path, "tensor 'v.blk.1.attn_q.weight' is missing");
}

TEST(ProjectorFile, AMisshapenTensorIsAnErrorGivingBothShapes) {
  const Written w = write_tiny(P::Gemma3, ProjectorLayout::Current);
  const std::string path = test::edited_model(
      "mmproj-misshapen.gguf", w.path,
      [](GgufWriter& g) {
        g.add_tensor("v.blk.0.attn_k.weight", {64, 32}, std::vector<float>(64 * 32, 0.0f));
      },
      [](const std::string& name) { return name != "v.blk.0.attn_k.weight"; });
  expect_error(path, "tensor 'v.blk.0.attn_k.weight' has shape [64, 32], expected [64, 64]");
  const std::string projection = test::edited_model(
      "mmproj-misshapen-projection.gguf", w.path,
      [](GgufWriter& g) {
        g.add_tensor("mm.input_projection.weight", {96, 32}, std::vector<float>(96 * 32, 0.0f));
      },
      [](const std::string& name) { return name != "mm.input_projection.weight"; });
  expect_error(projection, "tensor 'mm.input_projection.weight' has shape [96, 32], expected [any, 64]");
}

TEST(ProjectorFile, UnsupportedProjectorTypesAreRefusedNamingTheSupportedOnes) {
  const Written w = write_tiny(P::LlavaMlp, ProjectorLayout::Current);
  for (const char* type : {"ldp", "resampler", "pixtral", "qwen3vl_merger"}) {
    const std::string path = test::edited_model("mmproj-type.gguf", w.path,
                                                [&](GgufWriter& g) { g.set_string("clip.projector_type", type); });
    expect_error(path, std::string("projector type ") + type +
                           " is not supported; supported: mlp, gemma3, qwen2vl_merger, qwen2.5vl_merger");
  }
  // The vision-specific key of files with several encoders wins.
  const std::string mixed = test::edited_model(
      "mmproj-type-mixed.gguf", w.path, [](GgufWriter& g) { g.set_string("clip.vision.projector_type", "idefics3"); });
  expect_error(mixed, "projector type idefics3 is not supported");
}

TEST(ProjectorFile, YiVlsMlpNormIsRefusedAsUnsupported) {
  const Written w = write_tiny(P::LlavaMlp, ProjectorLayout::Legacy);
  const std::string path = test::edited_model("mmproj-mlp-norm.gguf", w.path, [](GgufWriter& g) {
    g.add_tensor("mm.3.weight", {96, 96}, std::vector<float>(96 * 96, 0.0f));
  });
  expect_error(path, "projector type mlp_norm");
}

TEST(ProjectorFile, ALanguageModelGivenAsAProjectorIsRefusedSayingSo) {
  const std::string path = test::synth_model_once("projector-not-an-lm.gguf", test::tiny_gqa_config(), 3);
  expect_error(path, "looks like a language model (general.architecture 'llama')");
}

TEST(ProjectorFile, AFileWithoutAVisionEncoderIsRefused) {
  const Written w = write_tiny(P::Gemma3, ProjectorLayout::Current);
  const std::string none = test::edited_model("mmproj-no-vision.gguf", w.path,
                                              [](GgufWriter& g) { g.set_bool("clip.has_vision_encoder", false); });
  expect_error(none, "no vision encoder");
  const std::string audio = test::edited_model("mmproj-audio.gguf", w.path, [](GgufWriter& g) {
    g.set_bool("clip.has_vision_encoder", false);
    g.set_bool("clip.has_audio_encoder", true);
  });
  expect_error(audio, "an audio encoder only");
}

TEST(ProjectorFile, AbsurdNumbersAreRefusedBeforeAnythingIsAllocated) {
  const Written w = write_tiny(P::Qwen2VL, ProjectorLayout::Legacy);
  auto with_u32 = [&](const char* key, uint32_t value) {
    return test::edited_model("mmproj-absurd.gguf", w.path, [&](GgufWriter& g) { g.set_u32(key, value); });
  };
  expect_error(with_u32("clip.vision.block_count", 4000000000u),
               "clip.vision.block_count = 4000000000 is out of range");
  expect_error(with_u32("clip.vision.embedding_length", 1u << 30), "clip.vision.embedding_length = 1073741824");
  expect_error(with_u32("clip.vision.block_count", 5), "tensor 'v.blk.3.ln1.weight' is missing");
  expect_error(with_u32("clip.vision.attention.head_count", 0), "head_count = 0 is out of range");
  expect_error(with_u32("clip.vision.attention.head_count", 3), "is not a multiple of the head count 3");
  expect_error(with_u32("clip.vision.attention.head_count", 32), "not a multiple of 4");  // head dim 2
  expect_error(with_u32("clip.vision.image_size", 50), "is not a multiple of the patch size 14");
  expect_error(with_u32("clip.vision.spatial_merge_size", 3), "tensor 'mm.0.weight' has shape [256, 256]");
}

TEST(ProjectorFile, KeysThatContradictTheTensorsAreErrors) {
  const Written w = write_tiny(P::LlavaMlp, ProjectorLayout::Current);
  auto with_u32 = [&](const char* key, uint32_t value) {
    return test::edited_model("mmproj-contradiction.gguf", w.path, [&](GgufWriter& g) { g.set_u32(key, value); });
  };
  expect_error(with_u32("clip.vision.projection_dim", 768), "projection_dim = 768 but the projector outputs 96");
  expect_error(with_u32("clip.vision.feed_forward_length", 100), "feed_forward_length = 100 but the FFN");
  // examples/llava's LLaVA files hold CLIP's own projection width there, which is not checked.
  const Written legacy = write_tiny(P::LlavaMlp, ProjectorLayout::Legacy);
  EXPECT_EQ(GgufFile::open(legacy.path).get_uint("clip.vision.projection_dim"), 768u);
  EXPECT_EQ(load_projector(legacy.path).config.projection_dim, 96);
}

TEST(ProjectorFile, FamilyKeysAreCheckedAsLlamaCppNeedsThem) {
  const Written gemma = write_tiny(P::Gemma3, ProjectorLayout::Current);
  const std::string pooled = test::edited_model(
      "mmproj-gemma-scale.gguf", gemma.path, [](GgufWriter& g) { g.set_u32("clip.vision.projector.scale_factor", 3); });
  expect_error(pooled, "patch grid does not pool evenly by clip.vision.projector.scale_factor = 3");
  const std::string two = test::edited_model("mmproj-gemma-scale-2.gguf", gemma.path,
                                             [](GgufWriter& g) { g.set_u32("clip.vision.projector.scale_factor", 2); });
  EXPECT_EQ(load_projector(two).config.tokens_per_image, 16);

  const Written qwen25 = write_tiny(P::Qwen25VL, ProjectorLayout::Current);
  // llama.cpp requires Qwen2.5-VL's n_wa_pattern, which a Qwen2-VL file lacks.
  const Written qwen2 = write_tiny(P::Qwen2VL, ProjectorLayout::Current);
  const std::string no_pattern = test::edited_model("mmproj-qwen25-no-pattern.gguf", qwen2.path, [](GgufWriter& g) {
    g.set_string("clip.projector_type", "qwen2.5vl_merger");
  });
  expect_error(no_pattern, "key clip.vision.n_wa_pattern is missing");
  const std::string window = test::edited_model("mmproj-qwen25-window.gguf", qwen25.path,
                                                [](GgufWriter& g) { g.set_u32("clip.vision.window_size", 100); });
  expect_error(window, "clip.vision.window_size = 100 is not a whole number of merged patches");
  const std::string all_full = test::edited_model("mmproj-qwen25-all-full.gguf", qwen25.path,
                                                  [](GgufWriter& g) { g.set_u32("clip.vision.n_wa_pattern", 0); });
  EXPECT_EQ(load_projector(all_full).config.full_attention_layers, (std::vector<int32_t>{0, 1, 2, 3}));

  const Written llava = write_tiny(P::LlavaMlp, ProjectorLayout::Current);
  const std::string both = test::edited_model("mmproj-gelu-silu.gguf", llava.path, [](GgufWriter& g) {
    g.set_bool("clip.use_gelu", true);
    g.set_bool("clip.use_silu", true);
  });
  expect_error(both, "clip.use_gelu and clip.use_silu are both true");
  const std::string mean = test::edited_model("mmproj-mean.gguf", llava.path, [](GgufWriter& g) {
    g.set_f32_array("clip.vision.image_mean", {0.5f, 0.5f});
  });
  expect_error(mean, "clip.vision.image_mean has 2 values, expected 3");
}

TEST(ProjectorFile, UnsupportedTensorTypesAreRefusedNamingTheTensor) {
  const Written w = write_tiny(P::LlavaMlp, ProjectorLayout::Current);
  const std::vector<float> q = file_tensor(w.path, "v.blk.0.attn_q.weight");
  const std::string path = test::edited_model(
      "mmproj-q4.gguf", w.path,
      [&](GgufWriter& g) {
        g.add_tensor("v.blk.0.attn_q.weight", {64, 64}, GgmlType::Q4_0, encode_tensor(GgmlType::Q4_0, q));
      },
      [](const std::string& name) { return name != "v.blk.0.attn_q.weight"; });
  expect_error(path, "tensor 'v.blk.0.attn_q.weight' has type Q4_0");
  const std::string q8 = test::edited_model(
      "mmproj-q8.gguf", w.path,
      [&](GgufWriter& g) {
        g.add_tensor("v.blk.0.attn_q.weight", {64, 64}, GgmlType::Q8_0, encode_tensor(GgmlType::Q8_0, q));
      },
      [](const std::string& name) { return name != "v.blk.0.attn_q.weight"; });
  EXPECT_EQ(load_projector(q8).weights.layers[0].q.type, GgmlType::Q8_0);
}

TEST(ProjectorFile, ATruncatedFileIsAnError) {
  const Written w = write_tiny(P::Qwen2VL, ProjectorLayout::Current);
  const std::string bytes = test::read_file(w.path);
  const std::string path = test::scratch_path("mmproj-truncated.gguf");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 1000);
  EXPECT_THROW(load_projector(path), Error);
}

// Truncations and byte flips all over a small file: load_projector either succeeds or throws
// pagoda::Error; anything else (another exception, a crash, an ASan report) fails.
TEST(ProjectorFile, DamagedFilesLoadOrFailCleanly) {
  VisionSynthSpec spec;
  spec.config = find_vision_synth_preset(P::Qwen25VL, "tiny").config;
  spec.config.image_size = 28, spec.config.dim = 32, spec.config.ffn_dim = 48, spec.config.n_heads = 2;
  spec.config.n_layers = 2, spec.config.projection_dim = 32, spec.config.full_attention_layers = {1};
  const std::string source = test::scratch_path("mmproj-fuzz-source.gguf");
  write_synth_projector(source, spec);
  const std::string bytes = test::read_file(source);
  const size_t header = GgufFile::open(source).data_offset();
  const std::string path = test::scratch_path("mmproj-fuzz.gguf");
  int loaded = 0, refused = 0;
  auto attempt = [&](const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
    try {
      load_projector(path);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  };
  for (size_t n = 0; n < bytes.size(); n += (n < header ? 7 : bytes.size() / 50)) attempt(bytes.substr(0, n));
  uint64_t state = 12345;
  for (size_t i = 0; i < header; i += 3) {
    std::string damaged = bytes;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    damaged[i] = char(i % 2 ? damaged[i] ^ char(1u << (state >> 61)) : char(state >> 56));
    attempt(damaged);
  }
  for (int i = 0; i < 20; ++i) {
    std::string damaged = bytes;
    damaged[header + size_t(i) * (bytes.size() - header) / 20] ^= 0x55;
    attempt(damaged);
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

// ---- pagoda-synth --------------------------------------------------------------------------

TEST(ProjectorFile, PagodaSynthWritesEveryFamilyInBothLayouts) {
  const char* families[] = {"llava", "gemma3", "qwen2vl", "qwen2.5vl"};
  for (const char* family : families) {
    for (const char* layout : {"current", "legacy"}) {
      const bool legacy = layout == std::string("legacy");
      if (legacy && (family == std::string("gemma3") || family == std::string("qwen2.5vl"))) continue;
      const std::string out = test::scratch_path(std::string("synth-") + family + "-" + layout + ".gguf");
      const test::ProgramRun run = test::run_program(
          "pagoda-synth", std::string("--mmproj ") + family + " --layout " + layout + " --type f16 --seed 9 -o " + out);
      ASSERT_EQ(run.status, 0) << run.output;
      const VisionModel m = load_projector(out);
      EXPECT_EQ(m.config.dim, 64);
      EXPECT_EQ(m.weights.layers[0].q.type, GgmlType::F16);
    }
  }
  const test::ProgramRun shaped =
      test::run_program("pagoda-synth", "--mmproj qwen2.5vl:tiny --layers 6 --projection-dim 128 -o " +
                                            test::scratch_path("synth-q.gguf"));
  ASSERT_EQ(shaped.status, 0) << shaped.output;
  const VisionConfig q = load_projector(test::scratch_path("synth-q.gguf")).config;
  EXPECT_EQ(q.projection_dim, 128);
  EXPECT_EQ(q.full_attention_layers, (std::vector<int32_t>{1, 3, 5}));
  const test::ProgramRun bad = test::run_program("pagoda-synth", "--mmproj gemma3 --layout legacy -o /dev/null");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("examples/llava's layout has no gemma3"), std::string::npos) << bad.output;
  const test::ProgramRun help = test::run_program("pagoda-synth", "--help");
  EXPECT_NE(help.output.find("--mmproj FAMILY[:PRESET]"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
