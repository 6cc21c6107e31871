// GGUF models of llama.cpp's `llama`, `qwen2`, `qwen3`, `gemma2`, `gemma3`, `phi3`, `qwen2moe`
// and `qwen3moe` architectures, and of its `bert`, `nomic-bert` and `jina-bert-v2` encoders:
// hyperparameters from the `ARCH.*` metadata (ARCH = general.architecture); the tensors, by
// llama.cpp's names, in gguf_layers.cpp.

#include <algorithm>
#include <cmath>
#include <memory>

#include "engine/gguf/gguf.h"
#include "engine/model/gguf_layers.h"
#include "engine/model/model.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

int32_t to_i32(uint64_t v, const GgufFile& f, const std::string& key) {
  if (v > INT32_MAX) throw Error(f.path() + ": " + key + " = " + std::to_string(v) + " is out of range");
  return static_cast<int32_t>(v);
}

// `ARCH.rope.scaling.*`, as llama.cpp reads it: the factor (or the older `rope.scale_linear`)
// divides every rotary frequency; YaRN is refused. LongRoPE (phi3) is its factor tensors and
// rope.scaling.attn_factor, read elsewhere.
float read_rope_freq_scale(const GgufFile& f, const std::string& arch) {
  const std::string type_key = arch + ".rope.scaling.type";
  const std::string type = f.get_string_opt(type_key).value_or("linear");
  if (type == "yarn") {
    throw Error(f.path() + ": " + type_key + " = '" + type + "' is not supported (supported: none, linear, longrope)");
  }
  if (type == "longrope") return 1.0f;
  if (type != "none" && type != "linear") {
    throw Error(f.path() + ": " + type_key + " = '" + type +
                "' is not a known RoPE scaling type (known: none, linear, longrope)");
  }
  std::optional<float> factor = f.get_float_opt(arch + ".rope.scaling.factor");
  if (!factor) factor = f.get_float_opt(arch + ".rope.scale_linear");
  if (!factor || *factor == 0.0f) return 1.0f;
  if (!(*factor > 0.0f) || !std::isfinite(*factor)) {
    throw Error(f.path() + ": " + arch + ".rope.scaling.factor = " + std::to_string(*factor) +
                " is not a positive number");
  }
  return 1.0f / *factor;
}

// The keys of the newer families: soft-capping and sliding windows (gemma2, gemma3, phi3),
// LongRoPE's magnitude and original context (phi3), and the experts.
void read_family_keys(const GgufFile& f, const std::string& arch, ModelConfig& c) {
  auto key = [&](const char* name) { return arch + "." + name; };
  auto opt_int = [&](const char* name, int32_t fallback) {
    const auto v = f.get_uint_opt(key(name));
    return v ? to_i32(*v, f, key(name)) : fallback;
  };
  c.attn_softcap = f.get_float_opt(key("attn_logit_softcapping")).value_or(0.0f);
  c.final_softcap = f.get_float_opt(key("final_logit_softcapping")).value_or(0.0f);
  if (c.arch == Architecture::Gemma2) {
    // llama.cpp's defaults when the keys are absent (all Gemma 2 files have them).
    if (c.attn_softcap == 0.0f) c.attn_softcap = 50.0f;
    if (c.final_softcap == 0.0f) c.final_softcap = 30.0f;
    c.sliding_window = opt_int("attention.sliding_window", 4096);
  } else if (c.is_gemma() || c.arch == Architecture::Phi3) {
    c.sliding_window = opt_int("attention.sliding_window", 0);
  }
  if (c.arch == Architecture::Gemma3)
    c.rope_theta_local = f.get_float_opt(key("rope.freq_base_swa")).value_or(10000.0f);
  c.rope_attn_factor = f.get_float_opt(key("rope.scaling.attn_factor")).value_or(1.0f);
  c.rope_original_context = opt_int("rope.scaling.original_context_length", c.context_length);
  c.n_experts = opt_int("expert_count", 0);
  c.n_experts_used = opt_int("expert_used_count", 0);
  if (c.n_experts > 0) {
    // llama.cpp's defaults: qwen2moe's experts split the FFN length among the used ones.
    const int32_t fallback =
        c.arch == Architecture::Qwen2Moe && c.n_experts_used > 0 ? c.ffn_dim / c.n_experts_used : c.ffn_dim;
    c.expert_ffn_dim = opt_int("expert_feed_forward_length", fallback);
  }
  if (c.has_shared_expert()) c.shared_ffn_dim = opt_int("expert_shared_feed_forward_length", c.ffn_dim);
  c.pooling_type = opt_int("pooling_type", -1);
  if (c.has_mrope()) {
    // Up to four sections, the missing ones 0, as llama.cpp reads them.
    const std::string sections = key("rope.dimension_sections");
    if (!f.find(sections)) throw Error(f.path() + ": " + sections + " is missing; M-RoPE needs it");
    const std::vector<int32_t> v = f.get_int32_array(sections);
    if (v.empty() || v.size() > c.rope_sections.size())
      throw Error(f.path() + ": " + sections + " holds " + std::to_string(v.size()) + " values, not 1 to 4");
    std::copy(v.begin(), v.end(), c.rope_sections.begin());
  }
}

// Encoders: attention must be non-causal (ARCH.attention.causal, which llama.cpp requires), and
// the token types are the rows of token_types.weight, which tokenizer.ggml.token_type_count
// names when present.
void read_encoder_keys(const GgufFile& f, const std::string& arch, ModelConfig& c) {
  const std::string causal = arch + ".attention.causal";
  if (!f.find(causal)) throw Error(f.path() + ": " + causal + " is missing");
  if (f.get_bool_opt(causal).value_or(true)) {
    throw Error(f.path() + ": " + causal + " is not false; a causal " + arch + " is not supported");
  }
  // llama.cpp requires nomic-bert's pooling type; jina-bert-v2's ALiBi bias is fixed there.
  if (c.arch == Architecture::NomicBert && c.pooling_type < 0)
    throw Error(f.path() + ": " + arch + ".pooling_type is missing; nomic-bert requires it");
  if (c.arch == Architecture::JinaBertV2) c.alibi_max_bias = 8.0f;
  const GgufTensorInfo* types = f.find_tensor("token_types.weight");
  if (!types) throw Error(f.path() + ": tensor 'token_types.weight' is missing");
  // One token type is a vector once llama-quantize has written it as ggml holds it.
  if (types->shape.empty() || types->shape.size() > 2)
    throw Error(f.path() + ": tensor 'token_types.weight' is not a matrix");
  c.n_token_types = types->shape.size() == 1 ? 1 : to_i32(types->shape[1], f, "token_types.weight rows");
  const std::string count = "tokenizer.ggml.token_type_count";
  if (auto n = f.get_uint_opt(count); n && *n != uint64_t(c.n_token_types)) {
    throw Error(f.path() + ": " + count + " = " + std::to_string(*n) + " but token_types.weight has " +
                std::to_string(c.n_token_types) + " rows");
  }
}

ModelConfig read_config(const GgufFile& f) {
  ModelConfig c;
  const std::string arch = f.get_string("general.architecture");
  c.arch = parse_architecture(arch, f.path());
  auto key = [&](const char* name) { return arch + "." + name; };
  auto get = [&](const char* name) { return to_i32(f.get_uint(key(name)), f, key(name)); };
  c.dim = get("embedding_length");
  c.n_layers = get("block_count");
  c.n_heads = get("attention.head_count");
  c.n_kv_heads =
      to_i32(f.get_uint_opt(key("attention.head_count_kv")).value_or(c.n_heads), f, key("attention.head_count_kv"));
  c.ffn_dim = get("feed_forward_length");
  c.context_length = get("context_length");
  c.rope_theta = f.get_float_opt(key("rope.freq_base")).value_or(10000.0f);
  c.rope_freq_scale = read_rope_freq_scale(f, arch);
  // Encoders normalize with LayerNorm, whose epsilon has a key of its own.
  c.norm_eps =
      f.get_float_opt(key(c.is_encoder() ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"))
          .value_or(c.is_encoder() ? 1e-12f : 1e-5f);
  if (auto k = f.get_uint_opt(key("attention.key_length"))) c.key_length = to_i32(*k, f, key("attention.key_length"));
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw Error(f.path() + ": tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2) throw Error(f.path() + ": tensor 'token_embd.weight' is not a matrix");
  c.vocab_size = to_i32(embd->shape[1], f, "token_embd.weight rows");
  read_family_keys(f, arch, c);
  if (c.is_encoder()) read_encoder_keys(f, arch, c);
  c.validate(f.path());
  if (auto v = f.get_uint_opt(key("attention.value_length")); v && *v != uint64_t(c.head_dim())) {
    throw Error(f.path() + ": " + key("attention.value_length") + " = " + std::to_string(*v) +
                " differs from the key length " + std::to_string(c.head_dim()) + "; not supported");
  }
  if (auto rope_dims = f.get_uint_opt(key("rope.dimension_count")); rope_dims && *rope_dims != uint64_t(c.head_dim())) {
    if (*rope_dims == 0 || *rope_dims > uint64_t(c.head_dim()) || *rope_dims % 2 != 0) {
      throw Error(f.path() + ": " + key("rope.dimension_count") + " = " + std::to_string(*rope_dims) +
                  " is not an even number of dimensions up to the head dimension " + std::to_string(c.head_dim()));
    }
    c.rope_dim = int32_t(*rope_dims);
  }
  if (auto vocab = f.get_uint_opt(key("vocab_size")); vocab && *vocab != uint64_t(c.vocab_size)) {
    throw Error(f.path() + ": " + key("vocab_size") + " = " + std::to_string(*vocab) + " but token_embd.weight has " +
                std::to_string(c.vocab_size) + " rows");
  }
  return c;
}

// Llama 3.1's `rope_freqs.weight`, or Phi-3's LongRoPE pair (`rope_factors_long.weight` past
// the original context, `rope_factors_short.weight` within it; the long set applies when the
// model's whole context is longer, as llama.cpp chooses for a context of that length): one
// factor per rotary pair, each dividing its frequency.
std::vector<float> read_rope_freqs(const GgufFile& f, const ModelConfig& c) {
  const bool longrope = f.find_tensor("rope_factors_long.weight") || f.find_tensor("rope_factors_short.weight");
  const std::string name = !longrope                                    ? "rope_freqs.weight"
                           : c.context_length > c.rope_original_context ? "rope_factors_long.weight"
                                                                        : "rope_factors_short.weight";
  if (!f.find_tensor(name)) {
    if (longrope) throw Error(f.path() + ": tensor '" + name + "' is missing");
    return {};
  }
  std::vector<float> factors = read_vector(f, name, uint64_t(c.rotated_dims()) / 2);
  for (float x : factors) {
    if (!(x > 0.0f) || !std::isfinite(x)) {
      throw Error(f.path() + ": tensor '" + name + "' holds " + std::to_string(x) +
                  "; frequency factors must be positive");
    }
  }
  return factors;
}

// Qwen3-Reranker's head: cls.output.weight, one row per label of ARCH.classifier.output_labels
// (one when the key is absent), as llama.cpp reads it, which it does for qwen3 alone.
WeightTensor read_rank_output(const GgufFile& f, const ModelConfig& c) {
  if (!f.find_tensor("cls.output.weight")) return {};
  const std::string arch = architecture_name(c.arch);
  if (c.arch != Architecture::Qwen3) {
    throw Error(f.path() + ": tensor 'cls.output.weight' is a reranker's head, which pagoda (as llama.cpp) reads " +
                "for qwen3 decoders only, not " + arch);
  }
  return view_matrix(f, "cls.output.weight", rank_labels(f, c), uint64_t(c.dim));
}

}  // namespace

Model load_gguf_model(const std::string& path, MappedFile::Load load) {
  auto file = std::make_shared<GgufFile>(GgufFile::open(path, load));
  const GgufFile& f = *file;
  const ModelConfig c = read_config(f);
  const uint64_t dim = c.dim, vocab = c.vocab_size;

  ModelWeights w;
  w.token_embd = view_matrix(f, "token_embd.weight", vocab, dim);
  if (c.is_encoder()) {
    w.encoder = read_encoder_weights(f, c);
  } else {
    w.output_norm = read_vector(f, "output_norm.weight", dim);
    w.output = f.find_tensor("output.weight") ? view_matrix(f, "output.weight", vocab, dim) : w.token_embd;
    w.rope_freqs = read_rope_freqs(f, c);
    w.rank_output = read_rank_output(f, c);
  }
  w.layers.resize(c.n_layers);
  for (int32_t l = 0; l < c.n_layers; ++l) w.layers[l] = read_layer(f, c, l);
  Tokenizer tokenizer = Tokenizer::from_gguf(f);
  if (tokenizer.vocab_size() != c.vocab_size) {
    throw Error(path + ": the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                " tokens but token_embd.weight has " + std::to_string(c.vocab_size) + " rows");
  }
  f.check_intact();  // the norms and the vocabulary above were read from the file
  const MappedFile* mapping = &f.file();
  std::optional<std::string> chat_template = f.get_string_opt("tokenizer.chat_template");
  std::optional<std::string> rerank_template = f.get_string_opt("tokenizer.chat_template.rerank");
  return Model{path,
               c,
               std::move(w),
               std::move(tokenizer),
               std::move(file),
               mapping,
               std::move(chat_template),
               std::move(rerank_template)};
}

}  // namespace pagoda
