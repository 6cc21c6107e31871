// GGUF models of llama.cpp's `llama`, `qwen2` and `qwen3` architectures: hyperparameters from
// the `ARCH.*` metadata (ARCH = general.architecture), tensors by llama.cpp's names
// (`token_embd.weight`, `blk.N.attn_q.weight`, ...).

#include <cmath>
#include <memory>

#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

int32_t to_i32(uint64_t v, const GgufFile& f, const std::string& key) {
  if (v > INT32_MAX) throw Error(f.path() + ": " + key + " = " + std::to_string(v) + " is out of range");
  return static_cast<int32_t>(v);
}

// `ARCH.rope.scaling.*`, as llama.cpp reads it: the factor (or the older `rope.scale_linear`)
// divides every rotary frequency; YaRN and LongRoPE are refused.
float read_rope_freq_scale(const GgufFile& f, const std::string& arch) {
  const std::string type_key = arch + ".rope.scaling.type";
  const std::string type = f.get_string_opt(type_key).value_or("linear");
  if (type == "yarn" || type == "longrope") {
    throw Error(f.path() + ": " + type_key + " = '" + type + "' is not supported (supported: none, linear)");
  }
  if (type != "none" && type != "linear") {
    throw Error(f.path() + ": " + type_key + " = '" + type + "' is not a known RoPE scaling type (known: none, linear)");
  }
  std::optional<float> factor = f.get_float_opt(arch + ".rope.scaling.factor");
  if (!factor) factor = f.get_float_opt(arch + ".rope.scale_linear");
  if (!factor || *factor == 0.0f) return 1.0f;
  if (!(*factor > 0.0f) || !std::isfinite(*factor)) {
    throw Error(f.path() + ": " + arch + ".rope.scaling.factor = " + std::to_string(*factor) + " is not a positive number");
  }
  return 1.0f / *factor;
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
  c.n_kv_heads = to_i32(f.get_uint_opt(key("attention.head_count_kv")).value_or(c.n_heads), f, key("attention.head_count_kv"));
  c.ffn_dim = get("feed_forward_length");
  c.context_length = get("context_length");
  c.rope_theta = f.get_float_opt(key("rope.freq_base")).value_or(10000.0f);
  c.rope_freq_scale = read_rope_freq_scale(f, arch);
  c.norm_eps = f.get_float_opt(key("attention.layer_norm_rms_epsilon")).value_or(1e-5f);
  if (auto k = f.get_uint_opt(key("attention.key_length"))) c.key_length = to_i32(*k, f, key("attention.key_length"));
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw Error(f.path() + ": tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2) throw Error(f.path() + ": tensor 'token_embd.weight' is not a matrix");
  c.vocab_size = to_i32(embd->shape[1], f, "token_embd.weight rows");
  c.validate(f.path());
  if (auto v = f.get_uint_opt(key("attention.value_length")); v && *v != uint64_t(c.head_dim())) {
    throw Error(f.path() + ": " + key("attention.value_length") + " = " + std::to_string(*v) + " differs from the key length " +
                std::to_string(c.head_dim()) + "; not supported");
  }
  if (auto rope_dims = f.get_uint_opt(key("rope.dimension_count")); rope_dims && *rope_dims != uint64_t(c.head_dim())) {
    throw Error(f.path() + ": " + key("rope.dimension_count") + " = " + std::to_string(*rope_dims) +
                " but the head dimension is " + std::to_string(c.head_dim()) + "; partial RoPE is not supported");
  }
  if (auto vocab = f.get_uint_opt(key("vocab_size")); vocab && *vocab != uint64_t(c.vocab_size)) {
    throw Error(f.path() + ": " + key("vocab_size") + " = " + std::to_string(*vocab) + " but token_embd.weight has " +
                std::to_string(c.vocab_size) + " rows");
  }
  return c;
}

// The tensor named `name` after checking its shape, given GGUF-style (innermost first).
const GgufTensorInfo& find_checked(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& shape) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) throw Error(f.path() + ": tensor '" + name + "' is missing");
  if (t->shape != shape) {
    auto str = [](const std::vector<uint64_t>& s) {
      std::string out = "[";
      for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
      return out + "]";
    };
    throw Error(f.path() + ": tensor '" + name + "' has shape " + str(t->shape) + ", expected " + str(shape));
  }
  return *t;
}

// A small tensor (a norm, a bias), decoded to f32.
std::vector<float> read_vector(const GgufFile& f, const std::string& name, uint64_t n) {
  return f.read_f32(find_checked(f, name, {n}));
}

// A [rows][cols] matrix as a view into the mapping; GgufFile::open has checked that its bytes
// lie inside the file.
WeightTensor view_matrix(const GgufFile& f, const std::string& name, uint64_t rows, uint64_t cols) {
  const GgufTensorInfo& t = find_checked(f, name, {cols, rows});
  return WeightTensor{t.type, f.tensor_bytes(t).data(), int64_t(rows), int64_t(cols), f.file().maps_file()};
}

// Llama 3.1's `rope_freqs.weight`: one factor per rotary pair, each dividing its frequency.
std::vector<float> read_rope_freqs(const GgufFile& f, const ModelConfig& c) {
  const char* name = "rope_freqs.weight";
  if (!f.find_tensor(name)) return {};
  std::vector<float> factors = read_vector(f, name, uint64_t(c.head_dim()) / 2);
  for (float x : factors) {
    if (!(x > 0.0f) || !std::isfinite(x)) {
      throw Error(f.path() + ": tensor '" + name + "' holds " + std::to_string(x) + "; frequency factors must be positive");
    }
  }
  return factors;
}

}  // namespace

Model load_gguf_model(const std::string& path, MappedFile::Load load) {
  auto file = std::make_shared<GgufFile>(GgufFile::open(path, load));
  const GgufFile& f = *file;
  const ModelConfig c = read_config(f);
  const uint64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), head_dim = c.head_dim();
  const uint64_t ffn = c.ffn_dim, vocab = c.vocab_size;

  ModelWeights w;
  w.token_embd = view_matrix(f, "token_embd.weight", vocab, dim);
  w.output_norm = read_vector(f, "output_norm.weight", dim);
  w.output = f.find_tensor("output.weight") ? view_matrix(f, "output.weight", vocab, dim) : w.token_embd;
  w.rope_freqs = read_rope_freqs(f, c);
  w.layers.resize(c.n_layers);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& lw = w.layers[l];
    lw.attn_norm = read_vector(f, p + "attn_norm.weight", dim);
    lw.attn_q = view_matrix(f, p + "attn_q.weight", q_dim, dim);
    lw.attn_k = view_matrix(f, p + "attn_k.weight", kv_dim, dim);
    lw.attn_v = view_matrix(f, p + "attn_v.weight", kv_dim, dim);
    if (c.has_qkv_bias()) {
      lw.attn_q_bias = read_vector(f, p + "attn_q.bias", q_dim);
      lw.attn_k_bias = read_vector(f, p + "attn_k.bias", kv_dim);
      lw.attn_v_bias = read_vector(f, p + "attn_v.bias", kv_dim);
    }
    if (c.has_qk_norm()) {
      lw.attn_q_norm = read_vector(f, p + "attn_q_norm.weight", head_dim);
      lw.attn_k_norm = read_vector(f, p + "attn_k_norm.weight", head_dim);
    }
    lw.attn_output = view_matrix(f, p + "attn_output.weight", dim, q_dim);
    lw.ffn_norm = read_vector(f, p + "ffn_norm.weight", dim);
    lw.ffn_gate = view_matrix(f, p + "ffn_gate.weight", ffn, dim);
    lw.ffn_up = view_matrix(f, p + "ffn_up.weight", ffn, dim);
    lw.ffn_down = view_matrix(f, p + "ffn_down.weight", dim, ffn);
  }
  Tokenizer tokenizer = Tokenizer::from_gguf(f);
  if (tokenizer.vocab_size() != c.vocab_size) {
    throw Error(path + ": the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                " tokens but token_embd.weight has " + std::to_string(c.vocab_size) + " rows");
  }
  f.check_intact();  // the norms and the vocabulary above were read from the file
  const MappedFile* mapping = &f.file();
  std::optional<std::string> chat_template = f.get_string_opt("tokenizer.chat_template");
  return Model{path, c, std::move(w), std::move(tokenizer), std::move(file), mapping, std::move(chat_template)};
}

}  // namespace pagoda
