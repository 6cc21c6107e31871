// The architectures pagoda runs — llama (with Llama 3.1's frequency factors, linear RoPE
// scaling, tied embeddings, GQA, partial rotary, Mixtral's experts), qwen2 (Q/K/V biases, NEOX
// RoPE), qwen3 (per-head Q/K norms, a head dimension apart from dim / heads), gemma2 (post-norms,
// GeGLU, soft-capping, sliding window), gemma3 (local/global layers with their own RoPE bases),
// phi3 (fused QKV and gate|up, LongRoPE), qwen2moe (shared expert) and qwen3moe: random
// models from pagoda-synth against the oracle, golden greedy ids alone and in a crowd, batch
// invariance, LoRA; llama.cpp's own outputs on the models in ../shared/models/llamacpp-quant;
// and the errors for files pagoda cannot run.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/forward/model_runner.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/lora/lora_adapter.h"
#include "engine/lora/lora_weights.h"
#include "testing/reference_model.h"
#include "engine/sampling/sampler.h"
#include "testing/lora_synth.h"
#include "testing/synth.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/lora_support.h"
#include "support/oracle.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::DrivenSequence;

// One small model of each kind the loader must tell apart.
struct Variant {
  const char* name;
  Architecture arch;
  int32_t key_length = 0;
  bool rope_freqs = false;
  bool tied = false;
  float rope_freq_scale = 1.0f;
  void (*more)(SynthSpec&) = nullptr;  // the family's own keys and tensors
};

const Variant kVariants[] = {
    {"llama", Architecture::Llama},
    {"llama31", Architecture::Llama, 0, true, true, 0.5f},  // frequency factors, tied, linear scaling ×2
    {"qwen2", Architecture::Qwen2, 0, false, true},
    // M-RoPE of sections 2, 3, 3 over the 8 pairs: text turns every section by one position.
    {"qwen2vl", Architecture::Qwen2VL, 0, false, true},
    {"qwen3", Architecture::Qwen3, 32, false, true},  // head_dim 32 with dim 64 and 4 heads
    // Half of each head rotated (adjacent pairs), with frequency factors for those pairs.
    {"llama_partial_rope", Architecture::Llama, 0, true, false, 1.0f, [](SynthSpec& s) { s.config.rope_dim = 8; }},
    // Soft-capping strong enough to bite on random weights; a window of 8 on layers 0 and 2.
    {"gemma2", Architecture::Gemma2, 32, false, true, 1.0f,
     [](SynthSpec& s) {
       s.config.n_layers = 3, s.config.sliding_window = 8, s.config.attn_softcap = 1.5f, s.config.final_softcap = 3.0f;
     }},
    // Layers 0–4 sliding (window 8, base 10000), layer 5 global (base 1e6, linear scaling ×2).
    {"gemma3", Architecture::Gemma3, 32, false, true, 0.5f,
     [](SynthSpec& s) { s.config.n_layers = 6, s.config.sliding_window = 8, s.config.rope_theta = 1e6f; }},
    // LongRoPE's long factors (context 256 past the original 128) on a partial rotary of 12 of 16.
    {"phi3", Architecture::Phi3, 0, false, false, 1.0f,
     [](SynthSpec& s) {
       s.longrope = true, s.config.rope_original_context = 128, s.config.rope_attn_factor = 1.19f,
       s.config.rope_dim = 12;
     }},
    {"mixtral", Architecture::Llama, 0, false, false, 1.0f,
     [](SynthSpec& s) { s.config.n_experts = 4, s.config.n_experts_used = 2, s.config.expert_ffn_dim = 32; }},
    {"qwen2moe", Architecture::Qwen2Moe, 0, false, false, 1.0f,
     [](SynthSpec& s) {
       s.config.n_experts = 6, s.config.n_experts_used = 2, s.config.expert_ffn_dim = 32, s.config.shared_ffn_dim = 48;
     }},
    {"qwen3moe", Architecture::Qwen3Moe, 32, false, true, 1.0f,
     [](SynthSpec& s) { s.config.n_experts = 8, s.config.n_experts_used = 3, s.config.expert_ffn_dim = 32; }},
};

const Variant& variant_named(const std::string& name) {
  for (const Variant& v : kVariants)
    if (v.name == name) return v;
  throw std::runtime_error("no variant " + name);
}

std::string synth_variant(const Variant& v, uint64_t seed = 11) {
  SynthSpec spec;
  ModelConfig& c = spec.config;
  c.arch = v.arch;
  c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 96, c.vocab_size = 600;
  c.context_length = 256, c.key_length = v.key_length, c.rope_theta = 10000.0f, c.rope_freq_scale = v.rope_freq_scale;
  spec.seed = seed;
  spec.tied_output = v.tied;
  spec.rope_freqs = v.rope_freqs;
  if (v.more) v.more(spec);
  const std::string path = test::scratch_path(std::string(v.name) + "-" + std::to_string(seed) + ".gguf");
  write_synth_model(path, spec);
  return path;
}

std::vector<int32_t> random_prompt(int32_t vocab, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = int32_t(rng() % uint32_t(vocab));
  return ids;
}

struct Runner {
  Model model;
  ModelRunner runner;
  PagePool pool;
  Runner(Model m, int threads)
      : model(std::move(m)), runner(model, threads), pool(KvLayout::for_model(model.config, 16), 1024) {}

  // Runs the prompts together in chunks of `chunk` tokens, `n_new` greedy tokens each.
  std::vector<DrivenSequence> run(const std::vector<std::vector<int32_t>>& prompts, int32_t n_new, int32_t chunk,
                                  bool logits_everywhere = false, const LoraWeights* lora = nullptr) {
    std::vector<DrivenSequence> seqs;
    for (const auto& p : prompts) {
      seqs.emplace_back(p, int32_t(p.size()) + n_new - 1, -1, 16);
      seqs.back().lora = lora;
    }
    test::run_together(runner, pool, seqs, chunk, logits_everywhere);
    EXPECT_EQ(pool.free_pages(), pool.capacity());
    return seqs;
  }
};

class Architectures : public ::testing::TestWithParam<Variant> {};

TEST_P(Architectures, LoadsWithItsHyperparameters) {
  const Variant& v = GetParam();
  const Model m = load_model(synth_variant(v));
  EXPECT_EQ(m.config.arch, v.arch);
  EXPECT_EQ(m.config.head_dim(), v.key_length ? v.key_length : 16);
  EXPECT_EQ(m.config.rope_freq_scale, v.rope_freq_scale);
  SynthSpec want;
  if (v.more) v.more(want);
  const ModelConfig& c = m.config;
  EXPECT_EQ(m.weights.rope_freqs.size(), v.rope_freqs || want.longrope ? size_t(c.rotated_dims() / 2) : 0u);
  EXPECT_EQ(m.weights.output.data == m.weights.token_embd.data, v.tied);
  EXPECT_EQ(c.rope_dim, want.config.rope_dim);
  EXPECT_EQ(c.sliding_window, want.config.sliding_window);
  EXPECT_EQ(c.attn_softcap, want.config.attn_softcap);
  EXPECT_EQ(c.final_softcap, want.config.final_softcap);
  EXPECT_EQ(c.n_experts, want.config.n_experts);
  EXPECT_EQ(c.n_experts_used, want.config.n_experts_used);
  EXPECT_EQ(c.rope_attn_factor, want.longrope ? want.config.rope_attn_factor : 1.0f);
  const std::array<int32_t, 4> sections =
      v.arch == Architecture::Qwen2VL ? std::array{2, 3, 3, 0} : std::array{0, 0, 0, 0};
  EXPECT_EQ(c.rope_sections, sections);
  const LayerWeights& l = m.weights.layers[1];
  EXPECT_EQ(l.attn_q_bias.size(), c.has_qkv_bias() ? size_t(c.q_dim()) : 0u);
  EXPECT_EQ(l.attn_v_bias.size(), c.has_qkv_bias() ? size_t(c.kv_dim()) : 0u);
  EXPECT_EQ(l.attn_k_norm.size(), c.has_qk_norm() ? size_t(c.head_dim()) : 0u);
  EXPECT_EQ(l.ffn_post_norm.size(), c.is_gemma() ? size_t(c.dim) : 0u);
  EXPECT_EQ(l.experts.size(), size_t(c.n_experts));
  EXPECT_EQ(l.shared_expert_gate.size(), v.arch == Architecture::Qwen2Moe ? size_t(c.dim) : 0u);
  EXPECT_EQ(l.ffn_gate.empty(), c.has_experts());
  EXPECT_EQ(l.attn_q.rows, c.q_dim());
  EXPECT_EQ(l.attn_output.cols, c.q_dim());
  if (v.arch == Architecture::Phi3) {  // views of the fused tensors, rows in order
    EXPECT_EQ(l.attn_k.data, l.attn_q.data + l.attn_q.n_bytes());
    EXPECT_EQ(l.ffn_up.data, l.ffn_gate.data + l.ffn_gate.n_bytes());
  }
  if (c.has_experts()) {  // experts are views one after another in the mapped 3-D tensor
    EXPECT_EQ(l.experts[1].down.data, l.experts[0].down.data + l.experts[0].down.n_bytes());
    EXPECT_TRUE(l.experts[1].gate.mapped);
  }
}

// A long prompt against the oracle at every position: sliding windows (8 positions) far past
// the first attention block of 64, chunked so that chunks start inside and across windows.
TEST_P(Architectures, LongContextMatchesTheOracle) {
  Runner r(load_model(synth_variant(GetParam())), 2);
  const std::vector<int32_t> prompt = random_prompt(r.model.config.vocab_size, 150, 77);
  const auto seqs = r.run({prompt}, 4, 37, true);
  // Logits come at each chunk's end, then at each decode step.
  std::vector<size_t> rows;
  for (size_t end = 37; end < prompt.size(); end += 37) rows.push_back(end - 1);
  for (size_t pos = prompt.size() - 1; pos + 1 < seqs[0].tokens.size(); ++pos) rows.push_back(pos);
  ASSERT_EQ(seqs[0].logits.size(), rows.size());
  ReferenceModel oracle(r.model);
  for (size_t pos = 0, i = 0; i < rows.size(); ++pos) {
    const auto& want = oracle.forward(seqs[0].tokens[pos], int32_t(pos));
    if (pos != rows[i]) continue;
    EXPECT_LT(test::relative_error(seqs[0].logits[i], want), 1e-4) << "position " << pos;
    ++i;
  }
}

// Logits at every position, batched with chunk size 1, within 1e-4 (relative to the largest
// logit) of the oracle's; the greedy ids equal the oracle's, alone and in a crowd.
TEST_P(Architectures, MatchesTheOracle) {
  Runner r(load_model(synth_variant(GetParam())), 2);
  const int32_t vocab = r.model.config.vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 4; ++i) prompts.push_back(random_prompt(vocab, 3 + 7 * i, 100 + i));
  const auto seqs = r.run(prompts, 12, 1, true);
  for (size_t i = 0; i < seqs.size(); ++i) {
    ReferenceModel oracle(r.model);
    ASSERT_EQ(seqs[i].logits.size(), seqs[i].tokens.size() - 1);
    for (size_t pos = 0; pos + 1 < seqs[i].tokens.size(); ++pos) {
      const auto& want = oracle.forward(seqs[i].tokens[pos], int32_t(pos));
      EXPECT_LT(test::relative_error(seqs[i].logits[pos], want), 1e-4) << "prompt " << i << ", position " << pos;
    }
  }
  // The golden ids, from the oracle alone, against the engine alone and in a crowd.
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> golden = test::oracle_greedy(r.model, prompts[i], 12);
    EXPECT_EQ(seqs[i].generated(), golden) << "in a crowd, prompt " << i;
    EXPECT_EQ(r.run({prompts[i]}, 12, 64)[0].generated(), golden) << "alone, prompt " << i;
  }
}

// Bit for bit: alone or in a crowd, chunked 1, 5 or 64 tokens at a time, on 1 or 2 threads.
TEST_P(Architectures, BatchInvariance) {
  const std::string path = synth_variant(GetParam());
  Runner one(load_model(path), 1), two(load_model(path), 2);
  const int32_t vocab = one.model.config.vocab_size;
  std::vector<std::vector<int32_t>> crowd;
  for (uint32_t i = 0; i < 6; ++i) crowd.push_back(random_prompt(vocab, 2 + 9 * i, 200 + i));
  const auto alone = one.run({crowd[3]}, 10, 64, true);
  ASSERT_EQ(alone[0].logits.size(), 10u);
  for (int32_t chunk : {1, 5, 64}) {
    for (Runner* r : {&one, &two}) {
      const auto together = r->run(crowd, 10, chunk, true);
      EXPECT_EQ(together[3].tokens, alone[0].tokens) << "chunk " << chunk;
      // The rows every run has: the prompt's last position and each decode step (the prompt's
      // other rows exist only for the chunk ends).
      const auto& a = alone[0].logits;
      const auto& t = together[3].logits;
      ASSERT_GE(t.size(), 10u);
      for (size_t k = 1; k <= 10; ++k) {
        EXPECT_EQ(0, std::memcmp(t[t.size() - k].data(), a[a.size() - k].data(), vocab * sizeof(float)))
            << "chunk " << chunk << ", threads " << r->runner.threads() << ", row " << k << " from the end";
      }
    }
  }
}

// A LoRA adapter changes each architecture as the oracle on merged weights W + scale·B·A says
// (biases and norms untouched).
TEST_P(Architectures, LoraMatchesMergedWeights) {
  Runner r(load_model(synth_variant(GetParam())), 2);
  const LoraAdapter adapter = test::random_adapter(r.model.config, 4, 0.75f, 7);
  const LoraWeights weights("a", adapter);
  const std::vector<int32_t> prompt = random_prompt(r.model.config.vocab_size, 9, 300);
  if (r.model.config.has_experts()) {  // the experts have no single FFN matrix to adapt
    std::vector<DrivenSequence> seqs;
    seqs.emplace_back(prompt, 9, -1, 16);
    seqs.back().lora = &weights;
    EXPECT_THROW(test::run_together(r.runner, r.pool, seqs, 4, false), Error);
    return;
  }
  const auto seqs = r.run({prompt}, 8, 1, true, &weights);
  const Model m = test::merged(r.model, adapter);
  ReferenceModel oracle(m), plain(r.model);
  double base_difference = 0.0;
  for (size_t pos = 0; pos + 1 < seqs[0].tokens.size(); ++pos) {
    EXPECT_LT(test::relative_error(seqs[0].logits[pos], oracle.forward(seqs[0].tokens[pos], int32_t(pos))), 1e-4)
        << pos;
    base_difference = std::max(
        base_difference, test::relative_error(seqs[0].logits[pos], plain.forward(seqs[0].tokens[pos], int32_t(pos))));
  }
  EXPECT_GT(base_difference, 1e-2) << "the adapter should change the output";
}

INSTANTIATE_TEST_SUITE_P(Synth, Architectures, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

// Prefix caching with sliding-window layers: the sliding layers' KV groups give back the pages
// that fall out of their window, which stay cached; a hit takes every page of the global
// layers and the window's pages of the sliding ones, and a cached position's keys and values
// are those a fresh run writes, so requests that hit the cache give the oracle's greedy ids.
// Prompts span many windows of 8 (tests/test_kv_groups.cpp tests the groups in detail).
TEST(SlidingWindowPrefixCache, CachedPrefixesGiveTheOraclesIds) {
  for (const char* name : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(name);
    const std::string path = synth_variant(variant_named(name));
    const Model m = load_model(path);
    const std::vector<int32_t> a = random_prompt(m.config.vocab_size, 90, 501);
    std::vector<int32_t> b(a.begin(), a.begin() + 70);  // shares a's first 70 positions
    const std::vector<int32_t> tail = random_prompt(m.config.vocab_size, 20, 502);
    b.insert(b.end(), tail.begin(), tail.end());
    Engine engine({.model_path = path, .threads = 2, .kv_cache_type = KvCacheType::F32});
    auto generate = [&](const std::vector<int32_t>& prompt) {
      Request r;
      r.prompt_ids = prompt;
      r.max_new_tokens = 12;
      r.ignore_eos = true;
      r.sampling.temperature = 0.0f;
      RequestHandle handle = engine.submit(std::move(r));
      return test::await(handle).token_ids;
    };
    for (const auto& prompt : {a, a, b}) EXPECT_EQ(generate(prompt), test::oracle_greedy(m, prompt, 12));
    EXPECT_GT(engine.metrics().prefix_hit_tokens, 64);  // a again, then b's shared pages
  }
}

// ---- pagoda-synth with a real vocabulary ----

TEST(ArchitecturesSynth, CopiesEveryTokenizerKeyOfTheVocabulary) {
  PAGODA_SHARED_OR_SKIP(vocab_path, "vocab/ggml-vocab-llama-spm.gguf");
  SynthSpec spec;
  spec.config.arch = Architecture::Qwen3;
  spec.config.dim = 32, spec.config.n_layers = 1, spec.config.n_heads = 2, spec.config.n_kv_heads = 1;
  spec.config.ffn_dim = 64, spec.config.context_length = 64;
  spec.vocab_path = vocab_path;
  const std::string path = test::scratch_path("qwen3-spm.gguf");
  const ModelConfig written = write_synth_model(path, spec);
  const GgufFile vocab = GgufFile::open(vocab_path), out = GgufFile::open(path);
  int copied = 0;
  for (const std::string& key : vocab.keys()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ASSERT_TRUE(out.find(key)) << key;
    EXPECT_TRUE(*out.find(key) == *vocab.find(key)) << key;
    ++copied;
  }
  EXPECT_GE(copied, 3);
  const Model m = load_model(path);
  EXPECT_EQ(m.config.vocab_size, written.vocab_size);
  EXPECT_EQ(m.config.vocab_size, int32_t(vocab.get_string_array("tokenizer.ggml.tokens").size()));
  const std::string text = "Hello world, once upon a time.";
  EXPECT_EQ(m.tokenizer.decode(m.tokenizer.encode(text, false)), text);
}

// ---- llama.cpp's outputs on ../shared/models/llamacpp-quant ----

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Teacher forcing: each row of `ids_path` (<model>.teacher_ids.json) fed whole through the model
// at `path`, one token a step for logits at every position (n_new = 1), and its argmax at every
// position (`got`) beside llama.cpp's (`want`, the "argmax" of `teacher_path`).
struct TeacherForced {
  std::vector<std::vector<int32_t>> got, want;
};
TeacherForced teacher_forced(const std::string& path, const std::string& ids_path, const std::string& teacher_path) {
  Runner r(load_model(path), 2);
  TeacherForced t{.got = {}, .want = read_json(teacher_path)["argmax"].get<std::vector<std::vector<int32_t>>>()};
  for (const auto& seq : r.run(read_json(ids_path).get<std::vector<std::vector<int32_t>>>(), 1, 1, true)) {
    std::vector<int32_t>& argmaxes = t.got.emplace_back();
    for (const auto& logits : seq.logits) argmaxes.push_back(argmax(logits));
  }
  return t;
}

class LlamaCppReference : public ::testing::TestWithParam<const char*> {};

// Greedy: 48 tokens from each prompt, equal to llama.cpp's (ties to the lowest id), all
// prompts in one batch.
TEST_P(LlamaCppReference, GreedyIdsOfTheF32Model) {
  const std::string model = GetParam();
  PAGODA_SHARED_OR_SKIP(path, "models/llamacpp-quant/" + model + "-F32.gguf");
  PAGODA_SHARED_OR_SKIP(greedy_path, "models/llamacpp-quant/" + model + "-F32.greedy.jsonl");
  Runner r(load_model(path), 2);
  std::vector<std::vector<int32_t>> prompts, want;
  std::ifstream in(greedy_path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    prompts.push_back(j["prompt_ids"].get<std::vector<int32_t>>());
    want.push_back(j["greedy_ids"].get<std::vector<int32_t>>());
  }
  ASSERT_FALSE(prompts.empty());
  const auto seqs = r.run(prompts, 48, 16);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(seqs[i].generated(), want[i]) << "prompt " << i;
}

// Teacher forcing: every row of <model>.teacher_ids.json fed as given; the argmax at every
// position equals llama.cpp's.
TEST_P(LlamaCppReference, TeacherForcedArgmaxOfTheF32Model) {
  const std::string model = GetParam();
  PAGODA_SHARED_OR_SKIP(path, "models/llamacpp-quant/" + model + "-F32.gguf");
  PAGODA_SHARED_OR_SKIP(ids_path, "models/llamacpp-quant/" + model + ".teacher_ids.json");
  PAGODA_SHARED_OR_SKIP(teacher_path, "models/llamacpp-quant/" + model + "-F32.teacher.json");
  const TeacherForced t = teacher_forced(path, ids_path, teacher_path);
  ASSERT_EQ(t.got.size(), t.want.size());
  for (size_t s = 0; s < t.got.size(); ++s) EXPECT_EQ(t.got[s], t.want[s]) << "sequence " << s;
}

// The prompts, tokenized by pagoda as llama.cpp did (add_special, no parse_special), give
// llama.cpp's prompt ids, and then its greedy ids through the Engine.
TEST_P(LlamaCppReference, GreedyTextThroughTheEngine) {
  const std::string model = GetParam();
  PAGODA_SHARED_OR_SKIP(path, "models/llamacpp-quant/" + model + "-F32.gguf");
  PAGODA_SHARED_OR_SKIP(greedy_path, "models/llamacpp-quant/" + model + "-F32.greedy.jsonl");
  // llama.cpp made its references with an f32 KV cache; f16 would part from them at near-ties.
  Engine engine({.model_path = path, .threads = 2, .kv_cache_type = KvCacheType::F32});
  std::vector<RequestHandle> handles;
  std::vector<std::vector<int32_t>> want;
  std::ifstream in(greedy_path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    Request r;
    r.prompt_ids = engine.tokenize(j["prompt"].get<std::string>(), engine.add_bos());
    EXPECT_EQ(r.prompt_ids, j["prompt_ids"].get<std::vector<int32_t>>()) << j["prompt"];
    r.max_new_tokens = 48;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    want.push_back(j["greedy_ids"].get<std::vector<int32_t>>());
    handles.push_back(engine.submit(std::move(r)));
  }
  for (size_t i = 0; i < handles.size(); ++i) EXPECT_EQ(test::await(handles[i]).token_ids, want[i]) << "prompt " << i;
}

INSTANTIATE_TEST_SUITE_P(F32, LlamaCppReference, ::testing::Values("l3v", "q2v"));

// The quantized files llama-quantize wrote: each loads, and its teacher-forced argmax agrees
// with llama.cpp's run of the same file (`.teacher.json`) on at least 92% of positions. The
// reference is the quantized run, not the dequantized-F32 twin, because the kernels round the
// activations as ggml's do (Q8_K for the K-quants, 32-element blocks for the others), which
// alone moves llama.cpp's own argmax on 3–8% of these flat-logit positions (the README's
// table); what is left is float summation order on near-ties.
class LlamaCppQuantized : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppQuantized, TeacherForcedArgmaxAgreesWithLlamaCppOnTheSameFile) {
  const std::string file = GetParam();
  const std::string model = file.substr(0, 3);
  PAGODA_SHARED_OR_SKIP(path, "models/llamacpp-quant/" + file + ".gguf");
  PAGODA_SHARED_OR_SKIP(ids_path, "models/llamacpp-quant/" + model + ".teacher_ids.json");
  PAGODA_SHARED_OR_SKIP(teacher_path, "models/llamacpp-quant/" + file + ".teacher.json");
  const TeacherForced t = teacher_forced(path, ids_path, teacher_path);
  ASSERT_EQ(t.got.size(), t.want.size());
  size_t same = 0, total = 0;
  for (size_t s = 0; s < t.got.size(); ++s) {
    ASSERT_EQ(t.got[s].size(), t.want[s].size());
    for (size_t i = 0; i < t.got[s].size(); ++i) same += t.got[s][i] == t.want[s][i];
    total += t.got[s].size();
  }
  const double agreement = double(same) / double(total);
  std::printf("%s: teacher-forced argmax agrees with llama.cpp's on %zu of %zu positions (%.1f%%)\n", file.c_str(),
              same, total, 100.0 * agreement);
  EXPECT_GE(agreement, 0.92);
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaCppQuantized,
                         ::testing::Values("l3v-Q8_0", "l3v-Q6_K", "l3v-Q5_K_M", "l3v-Q5_1", "l3v-Q5_0", "l3v-Q4_K_M",
                                           "l3v-Q4_1", "l3v-Q4_0", "q2v-Q8_0", "q2v-Q4_K_M", "l3v-Q2_K", "l3v-Q3_K_S",
                                           "l3v-Q3_K_M", "l3v-Q3_K_L", "l3v-IQ4_NL", "l3v-IQ4_XS"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

// ---- files pagoda cannot run ----

// `source` rewritten with `edit` applied to its metadata and tensors.
struct Edit {
  std::vector<std::pair<std::string, GgufValue>> set;
  std::string drop_tensor;
  std::string resize_tensor;  // to one element fewer
};

std::string rewrite(const std::string& source, const std::string& name, const Edit& edit) {
  const GgufFile in = GgufFile::open(source);
  GgufWriter out;
  for (const std::string& key : in.keys()) out.set(key, *in.find(key));
  for (const auto& [key, value] : edit.set) out.set(key, value);
  for (const GgufTensorInfo& t : in.tensors()) {
    if (t.name == edit.drop_tensor) continue;
    std::vector<float> data = in.read_f32(t);
    std::vector<uint64_t> shape = t.shape;
    if (t.name == edit.resize_tensor) {
      data.pop_back();
      shape = {shape[0] - 1};
    }
    out.add_tensor(t.name, shape, data);
  }
  const std::string path = test::scratch_path(name);
  out.write(path);
  return path;
}

void expect_load_error(const std::string& path, const std::string& needle) {
  try {
    load_model(path);
    FAIL() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ArchitectureErrors, UnknownArchitecture) {
  const std::string path = synth_variant(kVariants[0]);
  expect_load_error(rewrite(path, "gemma.gguf", {{{"general.architecture", GgufValue(std::string("gemma"))}}}),
                    "general.architecture 'gemma' is not supported");
}

TEST(ArchitectureErrors, Qwen2MissingABias) {
  expect_load_error(rewrite(synth_variant(variant_named("qwen2")), "no-bias.gguf", {{}, "blk.1.attn_k.bias"}),
                    "tensor 'blk.1.attn_k.bias' is missing");
}

TEST(ArchitectureErrors, Qwen3MissingAQkNorm) {
  expect_load_error(rewrite(synth_variant(variant_named("qwen3")), "no-q-norm.gguf", {{}, "blk.0.attn_q_norm.weight"}),
                    "tensor 'blk.0.attn_q_norm.weight' is missing");
}

TEST(ArchitectureErrors, Qwen2VLWithoutSectionsThatFitItsHeads) {
  auto sections = [](std::vector<int32_t> v) {
    GgufArray a{GgufType::INT32, {}};
    for (int32_t x : v) a.items.emplace_back(x);
    return GgufValue(std::move(a));
  };
  const std::string qwen2vl = synth_variant(variant_named("qwen2vl"));  // 8 rotated pairs
  expect_load_error(
      rewrite(qwen2vl, "wide-sections.gguf", {{{"qwen2vl.rope.dimension_sections", sections({4, 4, 4})}}}),
      "the M-RoPE sections (12 pairs) exceed the 8 rotated pairs of a head");
  expect_load_error(
      rewrite(qwen2vl, "five-sections.gguf", {{{"qwen2vl.rope.dimension_sections", sections({1, 1, 1, 1, 1})}}}),
      "holds 5 values, not 1 to 4");
  expect_load_error(rewrite(qwen2vl, "text-sections.gguf",
                            {{{"qwen2vl.rope.dimension_sections", GgufValue(std::string("16,24,24"))}}}),
                    "qwen2vl.rope.dimension_sections");
  expect_load_error(rewrite(qwen2vl, "zero-sections.gguf", {{{"qwen2vl.rope.dimension_sections", sections({0, 0})}}}),
                    "M-RoPE needs rope.dimension_sections with some pairs");
}

TEST(ArchitectureErrors, BadExpertMetadata) {
  const std::string path = synth_variant(variant_named("qwen3moe"));  // 8 experts, 3 used
  auto with = [&](const std::string& name, const char* key, uint32_t value) {
    return rewrite(path, name, {{{key, GgufValue(value)}}});
  };
  expect_load_error(with("experts0.gguf", "qwen3moe.expert_count", 0), "qwen3moe needs an expert count above 0");
  expect_load_error(with("used9.gguf", "qwen3moe.expert_used_count", 9),
                    "experts used per token 9 must be between 1 and the expert count 8");
  expect_load_error(with("used0.gguf", "qwen3moe.expert_used_count", 0),
                    "experts used per token 0 must be between 1 and the expert count 8");
  expect_load_error(with("experts7.gguf", "qwen3moe.expert_count", 7),
                    "tensor 'blk.0.ffn_gate_inp.weight' has shape [64, 8], expected [64, 7]");
  expect_load_error(rewrite(path, "no-router.gguf", {{}, "blk.1.ffn_gate_inp.weight"}),
                    "tensor 'blk.1.ffn_gate_inp.weight' (the expert router) is missing; 8 experts need it");
  expect_load_error(rewrite(path, "no-experts.gguf", {{}, "blk.0.ffn_down_exps.weight"}),
                    "tensor 'blk.0.ffn_down_exps.weight' is missing");
  const std::string llama = synth_variant(variant_named("llama"));
  expect_load_error(rewrite(llama, "used-without.gguf", {{{"llama.expert_used_count", GgufValue(uint32_t(2))}}}),
                    "experts used per token 2 without experts");
  // A dense llama told it has experts looks for them.
  expect_load_error(
      rewrite(llama, "dense-as-moe.gguf",
              {{{"llama.expert_count", GgufValue(uint32_t(4))}, {"llama.expert_used_count", GgufValue(uint32_t(2))}}}),
      "tensor 'blk.0.ffn_gate_inp.weight' (the expert router) is missing");
}

TEST(ArchitectureErrors, Qwen2MoeMissingTheSharedExpertGate) {
  expect_load_error(
      rewrite(synth_variant(variant_named("qwen2moe")), "no-shexp.gguf", {{}, "blk.0.ffn_gate_inp_shexp.weight"}),
      "tensor 'blk.0.ffn_gate_inp_shexp.weight' is missing");
}

TEST(ArchitectureErrors, GemmaMissingAPostNorm) {
  expect_load_error(rewrite(synth_variant(variant_named("gemma2")), "no-post.gguf", {{}, "blk.2.post_ffw_norm.weight"}),
                    "tensor 'blk.2.post_ffw_norm.weight' is missing");
}

TEST(ArchitectureErrors, PartialRotaryOutOfRange) {
  const std::string path = synth_variant(kVariants[0]);  // head dimension 16
  expect_load_error(rewrite(path, "rope-odd.gguf", {{{"llama.rope.dimension_count", GgufValue(uint32_t(7))}}}),
                    "llama.rope.dimension_count = 7 is not an even number of dimensions up to the head dimension 16");
  expect_load_error(rewrite(path, "rope-wide.gguf", {{{"llama.rope.dimension_count", GgufValue(uint32_t(32))}}}),
                    "llama.rope.dimension_count = 32 is not an even number");
  EXPECT_EQ(load_model(rewrite(path, "rope-8.gguf", {{{"llama.rope.dimension_count", GgufValue(uint32_t(8))}}}))
                .config.rotated_dims(),
            8);
}

TEST(ArchitectureErrors, Phi3LongRopeWithoutItsFactors) {
  expect_load_error(rewrite(synth_variant(variant_named("phi3")), "no-long.gguf", {{}, "rope_factors_long.weight"}),
                    "tensor 'rope_factors_long.weight' is missing");
}

TEST(ArchitectureErrors, RopeFreqsOfTheWrongLength) {
  expect_load_error(rewrite(synth_variant(kVariants[1]), "short-freqs.gguf", {{}, "", "rope_freqs.weight"}),
                    "tensor 'rope_freqs.weight' has shape [7], expected [8]");
}

TEST(ArchitectureErrors, RopeScalingTypes) {
  const std::string path = synth_variant(kVariants[0]);
  auto with_type = [&](const std::string& type) {
    return rewrite(path, "scaling-" + type + ".gguf", {{{"llama.rope.scaling.type", GgufValue(type)}}});
  };
  expect_load_error(with_type("dynamic"), "llama.rope.scaling.type = 'dynamic' is not a known RoPE scaling type");
  expect_load_error(with_type("yarn"), "llama.rope.scaling.type = 'yarn' is not supported");
  EXPECT_EQ(load_model(with_type("longrope")).config.rope_freq_scale, 1.0f);
  EXPECT_EQ(load_model(with_type("none")).config.rope_freq_scale, 1.0f);
  const std::string linear = rewrite(path, "scaling-linear4.gguf",
                                     {{{"llama.rope.scaling.type", GgufValue(std::string("linear"))},
                                       {"llama.rope.scaling.factor", GgufValue(4.0f)}}});
  EXPECT_EQ(load_model(linear).config.rope_freq_scale, 0.25f);
}

TEST(ArchitectureErrors, AdapterForAnotherArchitecture) {
  const Model qwen2 = load_model(synth_variant(variant_named("qwen2")));
  const Model llama = load_model(synth_variant(kVariants[0]));
  LoraSynthSpec spec;
  const std::string path = test::scratch_path("llama-adapter.gguf");
  write_synth_lora(path, llama.config, spec);
  try {
    load_lora_adapter(path, qwen2.config, 1.0f);
    FAIL() << "a llama adapter must not load on a qwen2 model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("general.architecture is 'llama' but the base model is 'qwen2'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pagoda
