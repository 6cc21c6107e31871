// Model loading (GGUF and llama2.c), the synthetic model writer, and the reference forward
// pass against the golden greedy outputs.

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quantize_gguf.h"
#include "engine/model/model.h"
#include "testing/reference_model.h"
#include "engine/sampling/sampler.h"
#include "testing/synth.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::GoldenCase;

// Greedy generation with llama2.c's rules: positions 0..max_positions-1 are fed, and the run
// stops at the first generated `stop_id` (which the golden ids include).
std::vector<int32_t> reference_greedy(const Model& model, std::vector<int32_t> tokens, int32_t max_positions,
                                      int32_t stop_id) {
  ReferenceModel runner(model);
  const size_t prompt_len = tokens.size();
  std::vector<int32_t> generated;
  for (int32_t pos = 0; pos < max_positions; ++pos) {
    const auto& logits = runner.forward(tokens[pos], pos);
    if (size_t(pos) + 1 < prompt_len) continue;
    const int32_t next = argmax(logits);
    tokens.push_back(next);
    generated.push_back(next);
    if (next == stop_id) break;
  }
  return generated;
}

void expect_golden(const Model& model, const std::vector<GoldenCase>& cases) {
  ASSERT_FALSE(cases.empty());
  for (const GoldenCase& g : cases) {
    EXPECT_EQ(model.tokenizer.encode(g.prompt, true), g.prompt_ids) << "prompt: " << g.prompt;
    EXPECT_EQ(reference_greedy(model, g.prompt_ids, g.max_positions, 1), g.greedy_ids) << "prompt: " << g.prompt;
  }
}

TEST(Model, GoldenGreedyFromGguf) {
  PAGODA_SHARED_OR_SKIP(model_path, test::kStoriesGguf);
  PAGODA_SHARED_OR_SKIP(golden_path, test::kGolden);
  const Model model = load_model(model_path);
  const ModelConfig& c = model.config;
  EXPECT_EQ((std::array{c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.ffn_dim, c.vocab_size}),
            (std::array{64, 5, 8, 4, 172, 512}))
      << "dim, layers, heads, KV heads, FFN, vocabulary";
  expect_golden(model, test::load_golden(golden_path));
}

TEST(Model, GoldenGreedyFromLlama2c) {
  PAGODA_SHARED_OR_SKIP(model_path, test::kStoriesBin);
  PAGODA_SHARED_OR_SKIP(tokenizer_path, test::kStoriesTokenizer);
  PAGODA_SHARED_OR_SKIP(golden_path, test::kGolden);
  const Model model = load_model(model_path, tokenizer_path);
  EXPECT_EQ(model.config.context_length, 512);
  expect_golden(model, test::load_golden(golden_path));
}

TEST(Model, GgufAndLlama2cGiveTheSameLogits) {
  PAGODA_SHARED_OR_SKIP(gguf_path, test::kStoriesGguf);
  PAGODA_SHARED_OR_SKIP(bin_path, test::kStoriesBin);
  PAGODA_SHARED_OR_SKIP(tokenizer_path, test::kStoriesTokenizer);
  const Model a = load_model(gguf_path), b = load_model(bin_path, tokenizer_path);
  ReferenceModel ra(a), rb(b);
  for (int32_t pos = 0; pos < 8; ++pos) {
    const int32_t token = 1 + 37 * pos;
    EXPECT_EQ(ra.forward(token, pos), rb.forward(token, pos)) << "position " << pos;
  }
}

TEST(Model, SynthIsDeterministicFromItsSeed) {
  SynthSpec spec{test::tiny_gqa_config(), 42};
  const std::string a = test::scratch_path("seed42a.gguf"), b = test::scratch_path("seed42b.gguf");
  const std::string c = test::scratch_path("seed43.gguf");
  write_synth_model(a, spec);
  write_synth_model(b, spec);
  spec.seed = 43;
  write_synth_model(c, spec);
  auto read = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(a), read(b));
  EXPECT_NE(read(a), read(c));
}

TEST(Model, SynthModelLoadsAndRuns) {
  const Model model = load_model(test::tiny_gqa_model());
  const ModelConfig want = test::tiny_gqa_config();
  EXPECT_EQ(model.config.dim, want.dim);
  EXPECT_EQ(model.config.n_kv_heads, want.n_kv_heads);
  EXPECT_EQ(model.config.vocab_size, want.vocab_size);
  const auto ids = model.tokenizer.encode("Once upon a time there was a cat.", true);
  ASSERT_GT(ids.size(), 2u);
  EXPECT_EQ(model.tokenizer.decode(ids), "Once upon a time there was a cat.");
  ReferenceModel runner(model);
  for (size_t pos = 0; pos < ids.size(); ++pos) {
    const auto& logits = runner.forward(ids[pos], int32_t(pos));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(Model, SynthStorageTypesLoadCloseToF32) {
  SynthSpec spec{test::tiny_gqa_config(), 5};
  const std::string f32 = test::scratch_path("types-f32.gguf");
  write_synth_model(f32, spec);
  const Model base = load_model(f32);
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    spec.type = type;
    const std::string path = test::scratch_path("types-" + std::to_string(int(type)) + ".gguf");
    write_synth_model(path, spec);
    const Model m = load_model(path);
    EXPECT_EQ(m.weights.layers[1].ffn_down.type, type);
    const auto a = base.weights.layers[1].ffn_down.to_f32();
    const auto b = m.weights.layers[1].ffn_down.to_f32();
    ASSERT_EQ(a.size(), b.size());
    double max_err = 0.0;
    for (size_t i = 0; i < a.size(); ++i) max_err = std::max(max_err, double(std::abs(a[i] - b[i])));
    EXPECT_GT(max_err, 0.0) << "type " << int(type) << " should be lossy";
    EXPECT_LT(max_err, 0.01) << "type " << int(type);
  }
}

TEST(Model, SynthPresetsHaveTheBriefsShapes) {
  const ModelConfig s15 = synth_preset("s15m"), s110 = synth_preset("s110m");
  EXPECT_EQ(std::vector<int>({s15.dim, s15.n_layers, s15.n_heads, s15.ffn_dim, s15.vocab_size}),
            std::vector<int>({288, 6, 6, 768, 32000}));
  EXPECT_EQ(std::vector<int>({s110.dim, s110.n_layers, s110.n_heads, s110.ffn_dim, s110.vocab_size}),
            std::vector<int>({768, 12, 12, 2048, 32000}));
  EXPECT_THROW(synth_preset("s7b"), Error);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The real-size presets are the published models' shapes: spot checks of the ones the
// benchmarks compare with llama.cpp, and every preset a valid model whose vocabulary is there.
TEST(Model, SynthPresetsOfRealModels) {
  const SynthPreset& l1 = find_synth_preset("llama-3.2-1b");
  const ModelConfig& c1 = l1.config;
  EXPECT_EQ(std::vector<int>({c1.dim, c1.n_layers, c1.n_heads, c1.n_kv_heads, c1.ffn_dim, c1.head_dim()}),
            std::vector<int>({2048, 16, 32, 8, 8192, 64}));
  EXPECT_TRUE(l1.tied_output && l1.rope_freqs);
  EXPECT_EQ(l1.vocab_file, "ggml-vocab-llama-bpe.gguf");
  const SynthPreset& l8 = find_synth_preset("llama-3.1-8b");
  EXPECT_EQ(std::vector<int>({l8.config.dim, l8.config.n_layers, l8.config.n_kv_heads, l8.config.ffn_dim}),
            std::vector<int>({4096, 32, 8, 14336}));
  EXPECT_FALSE(l8.tied_output);
  const SynthPreset& q3 = find_synth_preset("qwen3-8b");
  EXPECT_EQ(q3.config.arch, Architecture::Qwen3);
  EXPECT_EQ(q3.config.head_dim(), 128);
  EXPECT_EQ(find_synth_preset("qwen2.5-0.5b").config.arch, Architecture::Qwen2);
  const bool have_vocabs = !test::shared_file("vocab/README.md").empty();
  for (const SynthPreset& p : synth_presets()) {
    EXPECT_NO_THROW(p.config.validate(p.name)) << p.name;
    if (!p.vocab_file.empty() && have_vocabs) {
      EXPECT_FALSE(test::shared_file("vocab/" + p.vocab_file).empty()) << p.name << ": " << p.vocab_file;
    }
  }
}

// Writing a quantized model in one pass gives the bytes of writing it in F32 and quantizing
// that with pagoda-quantize (which matches llama-quantize): types, order, metadata and blocks.
TEST(Model, SynthQuantizedInOnePassEqualsQuantizingTheF32Model) {
  for (const QuantPreset preset : {QuantPreset::Q4_K_M, QuantPreset::Q8_0, QuantPreset::Q6_K}) {
    for (const bool tied : {false, true}) {
      SynthSpec spec{test::tiny_gqa_config(), 9};
      spec.config.dim = 256, spec.config.ffn_dim = 512;  // rows of whole K-quant blocks
      spec.tied_output = tied;
      spec.rope_freqs = true;
      const std::string name = std::string(quant_preset_name(preset)) + (tied ? "-tied" : "");
      const std::string f32 = test::scratch_path("onepass-f32-" + name + ".gguf");
      const std::string two_pass = test::scratch_path("onepass-quantized-" + name + ".gguf");
      const std::string one_pass = test::scratch_path("onepass-" + name + ".gguf");
      write_synth_model(f32, spec);
      quantize_gguf(f32, two_pass, preset);
      spec.quant = preset;
      write_synth_model(one_pass, spec);
      EXPECT_TRUE(read_bytes(one_pass) == read_bytes(two_pass)) << name;
    }
  }
}

// Rewrites a GGUF file with `edit` applied to its keys and tensors.
struct GgufEdit {
  std::function<bool(const std::string& key)> keep_key = [](const std::string&) { return true; };
  std::function<bool(const std::string& name)> keep_tensor = [](const std::string&) { return true; };
  std::function<std::vector<uint64_t>(const GgufTensorInfo&)> shape = [](const GgufTensorInfo& t) { return t.shape; };
  std::vector<std::pair<std::string, GgufValue>> set;
};

std::string rewrite(const std::string& source, const std::string& name, const GgufEdit& edit) {
  const GgufFile in = GgufFile::open(source);
  GgufWriter out;
  for (const std::string& key : in.keys()) {
    if (edit.keep_key(key)) out.set(key, *in.find(key));
  }
  for (const auto& [key, value] : edit.set) out.set(key, value);
  for (const GgufTensorInfo& t : in.tensors()) {
    if (!edit.keep_tensor(t.name)) continue;
    const std::vector<float> data = in.read_f32(t);
    std::vector<uint64_t> shape = edit.shape(t);
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    std::vector<float> resized(n);
    std::copy_n(data.begin(), std::min<uint64_t>(n, data.size()), resized.begin());
    out.add_tensor(t.name, shape, resized);
  }
  const std::string path = test::scratch_path(name);
  out.write(path);
  return path;
}

void expect_load_error(const std::string& path, const std::string& phrase) {
  try {
    load_model(path);
    ADD_FAILURE() << "loading " << path << " should fail with '" << phrase << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(phrase), std::string::npos) << what;
  }
}

// The tiny model rewritten by `edit` (as `name`) is refused, naming the file and `phrase`.
void expect_edit_refused(const GgufEdit& edit, const std::string& name, const std::string& phrase) {
  expect_load_error(rewrite(test::tiny_gqa_model(), name, edit), phrase);
}

// Keeps every key but `key`.
std::function<bool(const std::string&)> without_key(const std::string& key) {
  return [key](const std::string& k) { return k != key; };
}

TEST(ModelErrors, MissingRequiredKey) {
  expect_edit_refused({.keep_key = without_key("llama.block_count")}, "no-block-count.gguf", "llama.block_count");
}

TEST(ModelErrors, WrongArchitecture) {
  expect_edit_refused({.keep_key = without_key("general.architecture"),
                       .set = {{"general.architecture", GgufValue(std::string("mamba"))}}},
                      "mamba.gguf", "'mamba' is not supported");
}

TEST(ModelErrors, MissingTensor) {
  expect_edit_refused({.keep_tensor = [](const std::string& n) { return n != "blk.1.ffn_up.weight"; }},
                      "no-ffn-up.gguf", "'blk.1.ffn_up.weight' is missing");
}

TEST(ModelErrors, TensorShapeMismatch) {
  GgufEdit edit;
  edit.shape = [](const GgufTensorInfo& t) {
    return t.name == "blk.0.attn_k.weight" ? std::vector<uint64_t>{t.shape[0], t.shape[1] + 1} : t.shape;
  };
  expect_edit_refused(edit, "bad-k-shape.gguf", "'blk.0.attn_k.weight' has shape");
}

TEST(ModelErrors, HeadCountThatDoesNotDivide) {
  expect_edit_refused({.keep_key = without_key("llama.attention.head_count_kv"),
                       .set = {{"llama.attention.head_count_kv", GgufValue(uint32_t(3))}}},
                      "kv3.gguf", "does not divide");
}

TEST(ModelErrors, TiedOutputIsAccepted) {
  GgufEdit edit;
  edit.keep_tensor = [](const std::string& n) { return n != "output.weight"; };
  const Model m = load_model(rewrite(test::tiny_gqa_model(), "tied.gguf", edit));
  // The classifier is token_embd itself, not a copy.
  EXPECT_EQ(m.weights.output.data, m.weights.token_embd.data);
  EXPECT_EQ(m.weights.output.rows, m.weights.token_embd.rows);
}

TEST(ModelErrors, MissingFile) { expect_load_error(test::scratch_path("does-not-exist.gguf"), "does-not-exist"); }

// llama2.c checkpoints: every truncation and a header that disagrees with the size.
TEST(ModelErrors, Llama2cTruncatedAndInconsistent) {
  PAGODA_SHARED_OR_SKIP(bin_path, test::kStoriesBin);
  PAGODA_SHARED_OR_SKIP(tokenizer_path, test::kStoriesTokenizer);
  std::ifstream in(bin_path, std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  const std::string path = test::scratch_path("broken.bin");
  auto write = [&](const std::string& content) { std::ofstream(path, std::ios::binary | std::ios::trunc) << content; };
  for (size_t cut : {size_t(0), size_t(3), size_t(27), size_t(28), size_t(1000), bytes.size() / 2, bytes.size() - 4}) {
    write(bytes.substr(0, cut));
    try {
      load_model(path, tokenizer_path);
      ADD_FAILURE() << "a checkpoint cut at " << cut << " bytes loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  write(bytes + std::string(8, '\0'));
  EXPECT_THROW(load_model(path, tokenizer_path), Error);
  std::string absurd = bytes;
  const int32_t huge = 1 << 30;
  std::memcpy(absurd.data(), &huge, sizeof huge);  // dim
  write(absurd);
  EXPECT_THROW(load_model(path, tokenizer_path), Error);
  std::string zero_heads = bytes;
  std::memset(zero_heads.data() + 12, 0, 4);
  write(zero_heads);
  EXPECT_THROW(load_model(path, tokenizer_path), Error);
}

}  // namespace
}  // namespace pagoda
