// Quantizing whole models (quantize_gguf, pagoda-quantize): the same tensor types, bytes,
// order and general.file_type as llama.cpp's llama-quantize on the same F32 files; the
// mixtures' per-layer choices and row-size fallbacks; and the tool's errors.

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quantize_gguf.h"
#include "engine/forward/model_runner.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

// ---- against llama-quantize's own files ----------------------------------------------------

struct LlamaFile {
  const char* model;   // "l3v-Q4_K_M"
  const char* preset;  // "q4_k_m"
};

class AgainstLlamaQuantize : public ::testing::TestWithParam<LlamaFile> {};

TEST_P(AgainstLlamaQuantize, SameTypesBytesOrderAndFileType) {
  const std::string model = GetParam().model;
  PAGODA_SHARED_OR_SKIP(original, "models/llamacpp-quant/" + model.substr(0, 3) + "-F32.gguf");
  PAGODA_SHARED_OR_SKIP(reference, "models/llamacpp-quant/" + model + ".gguf");
  const std::string out = test::scratch_path(model + ".gguf");
  const QuantizeReport report = quantize_gguf(original, out, parse_quant_preset(GetParam().preset));

  const GgufFile mine = GgufFile::open(out), theirs = GgufFile::open(reference);
  EXPECT_EQ(mine.get_uint("general.file_type"), theirs.get_uint("general.file_type"));
  EXPECT_EQ(mine.get_uint("general.quantization_version"), theirs.get_uint("general.quantization_version"));
  // Every other key is copied from the input.
  const GgufFile input = GgufFile::open(original);
  for (const std::string& key : input.keys()) {
    if (key == "general.file_type") continue;
    ASSERT_NE(mine.find(key), nullptr) << key;
    EXPECT_TRUE(*mine.find(key) == *input.find(key)) << key;
  }
  ASSERT_EQ(mine.tensors().size(), theirs.tensors().size());
  ASSERT_EQ(report.tensors.size(), theirs.tensors().size());
  for (size_t i = 0; i < theirs.tensors().size(); ++i) {
    const GgufTensorInfo& a = mine.tensors()[i];
    const GgufTensorInfo& b = theirs.tensors()[i];
    EXPECT_EQ(a.name, b.name) << "tensor " << i;
    EXPECT_EQ(a.shape, b.shape) << a.name;
    EXPECT_EQ(ggml_type_name(a.type), std::string(ggml_type_name(b.type))) << a.name;
    EXPECT_FALSE(report.tensors[i].to.fell_back()) << a.name << ": every row here fits every type";
    if (a.type != b.type || a.n_bytes != b.n_bytes) continue;
    const auto x = mine.tensor_bytes(a), y = theirs.tensor_bytes(b);
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin())) << a.name << " (" << ggml_type_name(a.type) << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, AgainstLlamaQuantize,
                         ::testing::Values(LlamaFile{"l3v-Q8_0", "q8_0"}, LlamaFile{"l3v-Q4_0", "q4_0"},
                                           LlamaFile{"l3v-Q4_1", "q4_1"}, LlamaFile{"l3v-Q5_0", "q5_0"},
                                           LlamaFile{"l3v-Q5_1", "q5_1"}, LlamaFile{"l3v-Q4_K_M", "Q4_K_M"},
                                           LlamaFile{"l3v-Q5_K_M", "q5_k_m"}, LlamaFile{"l3v-Q6_K", "q6_k"},
                                           LlamaFile{"q2v-Q8_0", "q8_0"}, LlamaFile{"q2v-Q4_K_M", "q4_k_m"},
                                           LlamaFile{"l3v-Q2_K", "q2_k"}, LlamaFile{"l3v-Q3_K_S", "q3_k_s"},
                                           LlamaFile{"l3v-Q3_K_M", "q3_k_m"}, LlamaFile{"l3v-Q3_K_L", "q3_k_l"},
                                           LlamaFile{"l3v-IQ4_NL", "iq4_nl"}, LlamaFile{"l3v-IQ4_XS", "iq4_xs"}),
                         [](const auto& info) {
                           std::string name = info.param.model;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// ---- type choice -----------------------------------------------------------------------------

// A dense model's tensors with stories260K's awkward shapes (dim 64, FFN 172) or l3v's, in
// file order (not llama.cpp's order, which choose_quant_types must find itself).
std::vector<QuantTensor> dense_model(int n_layers, uint64_t dim, uint64_t ffn, bool tied) {
  std::vector<QuantTensor> t;
  t.push_back({"token_embd.weight", {dim, 512}, GgmlType::F32});
  t.push_back({"output_norm.weight", {dim}, GgmlType::F32});
  if (!tied) t.push_back({"output.weight", {dim, 512}, GgmlType::F32});
  for (int l = 0; l < n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", {dim}, GgmlType::F32});
    t.push_back({p + "attn_q.weight", {dim, dim}, GgmlType::F32});
    t.push_back({p + "attn_k.weight", {dim, dim / 2}, GgmlType::F32});
    t.push_back({p + "attn_v.weight", {dim, dim / 2}, GgmlType::F32});
    t.push_back({p + "attn_output.weight", {dim, dim}, GgmlType::F32});
    t.push_back({p + "ffn_norm.weight", {dim}, GgmlType::F32});
    t.push_back({p + "ffn_gate.weight", {dim, ffn}, GgmlType::F32});
    t.push_back({p + "ffn_down.weight", {ffn, dim}, GgmlType::F32});
    t.push_back({p + "ffn_up.weight", {dim, ffn}, GgmlType::F32});
  }
  return t;
}

std::string type_of(const std::vector<QuantTensor>& tensors, const std::vector<QuantChoice>& choices,
                    const std::string& name) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return ggml_type_name(choices[i].type);
  }
  return "absent";
}

TEST(QuantTypeChoice, MixturesGiveMoreBitsToTheLayersLlamaCppPicks) {
  // 16 layers: use_more_bits picks layers 0, 1 (first eighth), 14, 15 (last eighth) and
  // every third from 2 on: 4, 7, 10, 13.
  const auto tensors = dense_model(16, 256, 768, true);
  const auto choices = choose_quant_types(QuantPreset::Q4_K_M, tensors, 16);
  for (int l = 0; l < 16; ++l) {
    const bool more = l < 2 || l >= 14 || (l - 2) % 3 == 2;
    const std::string p = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(type_of(tensors, choices, p + "attn_v.weight"), more ? "Q6_K" : "Q4_K") << l;
    EXPECT_EQ(type_of(tensors, choices, p + "ffn_down.weight"), more ? "Q6_K" : "Q4_K") << l;
    EXPECT_EQ(type_of(tensors, choices, p + "attn_q.weight"), "Q4_K") << l;
    EXPECT_EQ(type_of(tensors, choices, p + "attn_norm.weight"), "F32") << l;
  }
  EXPECT_EQ(type_of(tensors, choices, "token_embd.weight"), "Q6_K");  // tied: it is the output
  // Q6_K, Q8_0 and the legacy presets have no per-layer exceptions.
  for (QuantPreset p : {QuantPreset::Q6_K, QuantPreset::Q8_0, QuantPreset::Q4_0}) {
    const auto flat = choose_quant_types(p, tensors, 16);
    const std::string want = ggml_type_name(quant_preset_default_type(p));
    EXPECT_EQ(type_of(tensors, flat, "blk.1.attn_v.weight"), want);
    EXPECT_EQ(type_of(tensors, flat, "blk.15.ffn_down.weight"), want);
    EXPECT_EQ(type_of(tensors, flat, "token_embd.weight"), p == QuantPreset::Q8_0 ? "Q8_0" : "Q6_K");
  }
}

// The 2-, 3- and non-linear 4-bit presets, as llama-quantize chose on l3v (2 layers, 8 query
// heads over 2 KV heads): attn_v by the grouped-query ratio, attn_output and ffn_down by preset.
TEST(QuantTypeChoice, LowBitPresetsOnAGroupedQueryModel) {
  const auto tensors = dense_model(2, 256, 768, true);
  const struct {
    QuantPreset preset;
    const char *base, *attn_v, *attn_output, *ffn_down;
  } cases[] = {{QuantPreset::Q2_K, "Q2_K", "Q4_K", "Q3_K", "Q3_K"},
               {QuantPreset::Q3_K_S, "Q3_K", "Q3_K", "Q3_K", "Q3_K"},
               {QuantPreset::Q3_K_M, "Q3_K", "Q5_K", "Q4_K", "Q4_K"},
               {QuantPreset::Q3_K_L, "Q3_K", "Q5_K", "Q5_K", "Q5_K"},
               {QuantPreset::IQ4_NL, "IQ4_NL", "Q5_K", "IQ4_NL", "IQ4_NL"},
               {QuantPreset::IQ4_XS, "IQ4_XS", "Q5_K", "IQ4_XS", "IQ4_XS"}};
  for (const auto& c : cases) {
    const auto choices = choose_quant_types(c.preset, tensors, 2, 4);
    const std::string preset = quant_preset_name(c.preset);
    for (const std::string p : {"blk.0.", "blk.1."}) {
      for (const char* base : {"attn_q.weight", "attn_k.weight", "ffn_gate.weight", "ffn_up.weight"})
        EXPECT_EQ(type_of(tensors, choices, p + base), c.base) << preset << " " << p << base;
      EXPECT_EQ(type_of(tensors, choices, p + "attn_v.weight"), c.attn_v) << preset << " " << p;
      EXPECT_EQ(type_of(tensors, choices, p + "attn_output.weight"), c.attn_output) << preset << " " << p;
      EXPECT_EQ(type_of(tensors, choices, p + "ffn_down.weight"), c.ffn_down) << preset << " " << p;
    }
    EXPECT_EQ(type_of(tensors, choices, "token_embd.weight"), "Q6_K") << preset;
  }
}

// Without grouped queries, over 16 layers: Q3_K_M gives attn_v Q5_K on its first two layers and
// ffn_down Q5_K on the first sixteenth; IQ4_XS gives ffn_down Q5_K on the first eighth.
TEST(QuantTypeChoice, LowBitPresetsByLayer) {
  const auto tensors = dense_model(16, 256, 768, true);
  const auto q3 = choose_quant_types(QuantPreset::Q3_K_M, tensors, 16, 1);
  const auto q2 = choose_quant_types(QuantPreset::Q2_K, tensors, 16, 1);
  const auto xs = choose_quant_types(QuantPreset::IQ4_XS, tensors, 16, 1);
  for (int l = 0; l < 16; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(type_of(tensors, q3, p + "attn_v.weight"), l < 2 ? "Q5_K" : "Q4_K") << l;
    EXPECT_EQ(type_of(tensors, q3, p + "ffn_down.weight"), l < 1 ? "Q5_K" : "Q4_K") << l;
    EXPECT_EQ(type_of(tensors, q2, p + "attn_v.weight"), "Q3_K") << l;
    EXPECT_EQ(type_of(tensors, xs, p + "attn_v.weight"), "IQ4_XS") << l;
    EXPECT_EQ(type_of(tensors, xs, p + "ffn_down.weight"), l < 2 ? "Q5_K" : "IQ4_XS") << l;
  }
}

TEST(QuantTypeChoice, AnUntiedEmbeddingKeepsThePresetType) {
  const auto tensors = dense_model(2, 256, 768, false);
  const auto choices = choose_quant_types(QuantPreset::Q4_0, tensors, 2);
  EXPECT_EQ(type_of(tensors, choices, "token_embd.weight"), "Q4_0");
  EXPECT_EQ(type_of(tensors, choices, "output.weight"), "Q6_K");
}

TEST(QuantTypeChoice, F16AndBf16ConvertEveryMatrixAlike) {
  const auto tensors = dense_model(5, 64, 172, false);
  for (QuantPreset p : {QuantPreset::F16, QuantPreset::BF16}) {
    const auto choices = choose_quant_types(p, tensors, 5);
    const std::string want = p == QuantPreset::F16 ? "F16" : "BF16";
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(ggml_type_name(choices[i].type), tensors[i].shape.size() == 2 ? want : "F32") << tensors[i].name;
      EXPECT_FALSE(choices[i].fell_back());
    }
  }
}

TEST(QuantTypeChoice, RowsThatDoNotFitFallBackAsLlamaCppDoes) {
  // stories260K: rows of 64 (most matrices) and 172 (ffn_down), 5 layers.
  const auto tensors = dense_model(5, 64, 172, false);
  auto check = [&](QuantPreset preset, const std::string& name, const std::string& want, bool fell_back) {
    const auto choices = choose_quant_types(preset, tensors, 5);
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].name != name) continue;
      EXPECT_EQ(ggml_type_name(choices[i].type), want) << quant_preset_name(preset) << " " << name;
      EXPECT_EQ(choices[i].fell_back(), fell_back) << quant_preset_name(preset) << " " << name;
    }
  };
  // 32-element types: 172 is no multiple of 32, so F16.
  check(QuantPreset::Q4_0, "blk.0.ffn_down.weight", "F16", true);
  check(QuantPreset::Q8_0, "blk.0.ffn_down.weight", "F16", true);
  check(QuantPreset::Q4_0, "blk.0.ffn_gate.weight", "Q4_0", false);
  // The output matrix wants Q6_K, whose 256 do not divide 64: Q8_0.
  check(QuantPreset::Q4_0, "output.weight", "Q8_0", true);
  // K-quants: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; then F16 for 172.
  check(QuantPreset::Q4_K_M, "blk.0.attn_q.weight", "Q5_0", true);
  check(QuantPreset::Q5_K_M, "blk.0.attn_q.weight", "Q5_1", true);
  check(QuantPreset::Q6_K, "blk.0.attn_q.weight", "Q8_0", true);
  check(QuantPreset::Q4_K_M, "blk.0.ffn_down.weight", "F16", true);
  // Layers 2 and 4 of 5 get more bits: Q6_K, which falls back to Q8_0.
  check(QuantPreset::Q4_K_M, "blk.2.attn_v.weight", "Q8_0", true);
  check(QuantPreset::Q4_K_M, "blk.3.attn_v.weight", "Q5_0", true);
  check(QuantPreset::Q4_K_M, "blk.4.attn_v.weight", "Q8_0", true);
  // Q2_K and Q3_K fall back to Q4_0, IQ4_XS to IQ4_NL (both 32-element), then F16 for 172.
  check(QuantPreset::Q2_K, "blk.0.attn_q.weight", "Q4_0", true);
  check(QuantPreset::Q3_K_S, "blk.0.attn_q.weight", "Q4_0", true);
  check(QuantPreset::IQ4_XS, "blk.0.attn_q.weight", "IQ4_NL", true);
  check(QuantPreset::IQ4_XS, "blk.0.ffn_down.weight", "F16", true);
  check(QuantPreset::IQ4_NL, "blk.0.attn_q.weight", "IQ4_NL", false);
  // A K-quant preset's output with rows that cannot hold its blocks goes to Q8_0 directly.
  check(QuantPreset::Q4_K_M, "output.weight", "Q8_0", false);
}

TEST(QuantTypeChoice, PresetNamesAndFileTypes) {
  EXPECT_EQ(parse_quant_preset("q4_k_m"), QuantPreset::Q4_K_M);
  EXPECT_EQ(parse_quant_preset("Q5_K_M"), QuantPreset::Q5_K_M);
  EXPECT_EQ(quant_preset_file_type(QuantPreset::Q8_0), 7u);
  EXPECT_EQ(quant_preset_file_type(QuantPreset::BF16), 32u);
  EXPECT_EQ(parse_quant_preset("iq4_xs"), QuantPreset::IQ4_XS);
  EXPECT_EQ(quant_preset_file_type(QuantPreset::Q2_K), 10u);
  EXPECT_EQ(quant_preset_file_type(QuantPreset::Q3_K_M), 12u);
  EXPECT_EQ(quant_preset_file_type(QuantPreset::IQ4_NL), 25u);
  EXPECT_EQ(quant_preset_file_type(QuantPreset::IQ4_XS), 30u);
  try {
    parse_quant_preset("iq2_xxs");
    FAIL() << "iq2_xxs is not a preset pagoda writes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q4_k_m"), std::string::npos) << e.what();
  }
}

// ---- quantize_gguf on awkward inputs -------------------------------------------------------

std::string write_model(const std::string& name, GgmlType matrix_type, std::vector<float> values) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_u32("general.file_type", 0);
  w.add_tensor("blk.0.attn_q.weight", {64, values.size() / 64}, matrix_type, encode_tensor(matrix_type, values));
  w.add_tensor("blk.0.attn_norm.weight", {64}, std::vector<float>(64, 1.0f));
  const std::string path = test::scratch_path(name);
  w.write(path);
  return path;
}

TEST(QuantizeGguf, F16InputIsConvertedAndNormsStayAsTheyAre) {
  std::vector<float> values(64 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(int(i % 17) - 8) / 8.0f;
  const std::string in = write_model("f16_in.gguf", GgmlType::F16, values);
  const std::string out = test::scratch_path("f16_in.q8_0.gguf");
  quantize_gguf(in, out, QuantPreset::Q8_0);
  const GgufFile f = GgufFile::open(out);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(f.find_tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
  EXPECT_EQ(f.get_uint("general.file_type"), 7u);
  // Multiples of 1/8 up to 1 in magnitude: Q8_0 holds them to within half a step of 1/127.
  const std::vector<float> back = f.read_f32(*f.find_tensor("blk.0.attn_q.weight"));
  for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(back[i], values[i], 0.5 / 127 + 1e-3) << i;
}

void expect_error_with(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(QuantizeGguf, RefusesToRequantizeAndNamesTheTensor) {
  const std::string in = write_model("q8_in.gguf", GgmlType::Q8_0, std::vector<float>(64 * 2, 0.5f));
  expect_error_with([&] { quantize_gguf(in, test::scratch_path("requant.gguf"), QuantPreset::Q4_0); },
                    {"blk.0.attn_q.weight", "Q8_0", "requantizing"});
  // Already of the target type: copied as it is.
  quantize_gguf(in, test::scratch_path("same.gguf"), QuantPreset::Q8_0);
}

TEST(QuantizeGguf, NonFiniteWeightsAreRefusedNamingTheTensor) {
  std::vector<float> values(64 * 2, 0.25f);
  values[70] = std::numeric_limits<float>::infinity();
  const std::string in = write_model("inf_in.gguf", GgmlType::F32, values);
  expect_error_with([&] { quantize_gguf(in, test::scratch_path("inf.gguf"), QuantPreset::Q4_0); },
                    {"blk.0.attn_q.weight", "element 70", "not finite"});
}

// ---- quality: stories260K quantized by pagoda-quantize -----------------------------------------

// Teacher-forced argmax at every position of tests/data/tiny_stories.txt, in chunks of 256
// with BOS first (as pagoda-perplexity -c 256 feeds them).
std::vector<int32_t> teacher_argmax(const std::string& model_path) {
  const Model model = load_model(model_path);
  ModelRunner runner(model, 2);
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/tiny_stories.txt");
  std::ostringstream text;
  text << in.rdbuf();
  const std::vector<int32_t> ids = model.tokenizer.encode(text.str(), true);
  constexpr size_t kChunk = 256;
  PagePool pool(KvLayout::for_model(model.config, 16), int32_t(kChunk / 16));
  std::vector<int32_t> out;
  std::vector<float> logits;
  for (size_t c = 0; (c + 1) * kChunk <= ids.size(); ++c) {
    std::vector<int32_t> chunk(ids.begin() + ptrdiff_t(c * kChunk), ids.begin() + ptrdiff_t((c + 1) * kChunk));
    chunk[0] = model.tokenizer.bos_id();
    BlockTable table(16);
    EXPECT_TRUE(table.reserve(int32_t(kChunk), pool));
    BatchEntry e{chunk, 0, &table};
    e.all_logits = true;
    runner.forward(Batch{{e}}, pool.view(), logits);
    table.release(pool);
    const auto vocab = size_t(model.config.vocab_size);
    for (size_t pos = 0; pos < kChunk; ++pos) {
      out.push_back(argmax(std::span<const float>(logits.data() + pos * vocab, vocab)));
    }
  }
  return out;
}

// The acceptance figures: llama.cpp's own q8_0 / q4_0 of this model agree with the F32
// model's teacher-forced argmax on 98.0% / 76.4% of positions; pagoda's must reach 97% / 72%.
TEST(QuantizedStories, KeepTheF32ModelsTeacherForcedArgmax) {
  PAGODA_SHARED_OR_SKIP(stories, test::kStoriesGguf);
  const std::vector<int32_t> f32 = teacher_argmax(stories);
  ASSERT_GE(f32.size(), 512u);
  for (const auto& [preset, target] : {std::pair{QuantPreset::Q8_0, 0.97}, std::pair{QuantPreset::Q4_0, 0.72}}) {
    const std::string path = test::scratch_path(std::string("stories.") + quant_preset_name(preset) + ".gguf");
    quantize_gguf(stories, path, preset);
    const std::vector<int32_t> q = teacher_argmax(path);
    ASSERT_EQ(q.size(), f32.size());
    size_t same = 0;
    for (size_t i = 0; i < q.size(); ++i) same += q[i] == f32[i];
    const double agreement = double(same) / double(q.size());
    std::printf("stories260K %s: argmax agrees with F32 on %zu of %zu positions (%.1f%%)\n", quant_preset_name(preset),
                same, q.size(), 100.0 * agreement);
    EXPECT_GE(agreement, target) << quant_preset_name(preset);
    EXPECT_LT(agreement, 1.0) << quant_preset_name(preset) << ": no position moved; was it quantized at all?";
  }
}

// ---- the program -----------------------------------------------------------------------------

test::ProgramRun run_tool(const std::string& args) { return test::run_program("pagoda-quantize", args); }

TEST(PagodaQuantize, ReportsFallbacksAndFailsClearly) {
  const std::string tool = test::program_path("pagoda-quantize");
  if (!std::filesystem::exists(tool)) GTEST_SKIP() << tool << " is not built";
  PAGODA_SHARED_OR_SKIP(stories, test::kStoriesGguf);
  const std::string out = test::scratch_path("stories.q4_0.gguf");
  const test::ProgramRun ok = run_tool(stories + " " + out + " q4_0");
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("blk.0.ffn_down.weight"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("fallback: rows of 172 do not fit Q4_0's blocks of 32; using F16"), std::string::npos)
      << ok.output;
  EXPECT_EQ(GgufFile::open(out).find_tensor("blk.4.ffn_down.weight")->type, GgmlType::F16);

  const test::ProgramRun bad_type = run_tool(stories + " " + out + " iq2_xxs");
  EXPECT_NE(bad_type.status, 0);
  EXPECT_NE(bad_type.output.find("unknown quantization type 'iq2_xxs'"), std::string::npos) << bad_type.output;

  const test::ProgramRun missing = run_tool("/nonexistent/model.gguf " + out + " q8_0");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("/nonexistent/model.gguf"), std::string::npos) << missing.output;

  const test::ProgramRun usage = run_tool(stories);
  EXPECT_NE(usage.status, 0);
  EXPECT_NE(usage.output.find("usage: pagoda-quantize"), std::string::npos) << usage.output;
}

TEST(PagodaSynth, TypeTakesEveryPresetAndQuantizesAsPagodaQuantize) {
  const std::string synth = test::program_path("pagoda-synth");
  if (!std::filesystem::exists(synth)) GTEST_SKIP() << synth << " is not built";
  const std::string shape = "--dim 256 --layers 8 --heads 4 --kv-heads 2 --ffn 512 --vocab 600 --seed 5 ";
  const std::string f32 = test::scratch_path("synth.f32.gguf");
  ASSERT_EQ(test::run_program("pagoda-synth", shape + "-o " + f32).status, 0);
  for (const char* type : {"q4_k_m", "q5_0", "bf16", "q3_k_m"}) {
    const std::string direct = test::scratch_path(std::string("synth.") + type + ".gguf");
    const test::ProgramRun r = test::run_program("pagoda-synth", shape + "--type " + type + " -o " + direct);
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string via_tool = test::scratch_path(std::string("synth.") + type + ".quantized.gguf");
    quantize_gguf(f32, via_tool, parse_quant_preset(type));
    std::ifstream a(direct, std::ios::binary), b(via_tool, std::ios::binary);
    const std::string x(std::istreambuf_iterator<char>(a), {}), y(std::istreambuf_iterator<char>(b), {});
    EXPECT_TRUE(x == y) << type << ": pagoda-synth --type and pagoda-quantize wrote different files";
    EXPECT_FALSE(std::filesystem::exists(direct + ".f32.tmp"));
  }
  const GgufFile q = GgufFile::open(test::scratch_path("synth.q4_k_m.gguf"));
  EXPECT_EQ(q.find_tensor("blk.0.attn_v.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ(q.find_tensor("blk.1.attn_v.weight")->type, GgmlType::Q4_K);
  const test::ProgramRun bad =
      test::run_program("pagoda-synth", shape + "--type q3_k -o " + test::scratch_path("bad.gguf"));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("unknown quantization type 'q3_k'"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace pagoda
