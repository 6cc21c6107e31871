// GGUF models of llama.cpp's `llama` architecture: hyperparameters from `llama.*` metadata,
// tensors by llama.cpp's names (`token_embd.weight`, `blk.N.attn_q.weight`, ...).

#include <memory>

#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

int32_t to_i32(uint64_t v, const GgufFile& f, const char* key) {
  if (v > INT32_MAX) throw Error(f.path() + ": " + key + " = " + std::to_string(v) + " is out of range");
  return static_cast<int32_t>(v);
}

ModelConfig read_config(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama") throw Error(f.path() + ": architecture '" + arch + "' is not supported (only 'llama')");
  ModelConfig c;
  c.dim = to_i32(f.get_uint("llama.embedding_length"), f, "llama.embedding_length");
  c.n_layers = to_i32(f.get_uint("llama.block_count"), f, "llama.block_count");
  c.n_heads = to_i32(f.get_uint("llama.attention.head_count"), f, "llama.attention.head_count");
  c.n_kv_heads = to_i32(f.get_uint_opt("llama.attention.head_count_kv").value_or(c.n_heads), f,
                        "llama.attention.head_count_kv");
  c.ffn_dim = to_i32(f.get_uint("llama.feed_forward_length"), f, "llama.feed_forward_length");
  c.context_length = to_i32(f.get_uint("llama.context_length"), f, "llama.context_length");
  c.rope_theta = f.get_float_opt("llama.rope.freq_base").value_or(10000.0f);
  c.norm_eps = f.get_float_opt("llama.attention.layer_norm_rms_epsilon").value_or(1e-5f);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw Error(f.path() + ": tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2) throw Error(f.path() + ": tensor 'token_embd.weight' is not a matrix");
  c.vocab_size = to_i32(embd->shape[1], f, "token_embd.weight rows");
  c.validate(f.path());
  if (auto rope_dims = f.get_uint_opt("llama.rope.dimension_count");
      rope_dims && *rope_dims != uint64_t(c.head_dim())) {
    throw Error(f.path() + ": llama.rope.dimension_count = " + std::to_string(*rope_dims) +
                " but the head dimension is " + std::to_string(c.head_dim()) + "; partial RoPE is not supported");
  }
  if (auto vocab = f.get_uint_opt("llama.vocab_size"); vocab && *vocab != uint64_t(c.vocab_size)) {
    throw Error(f.path() + ": llama.vocab_size = " + std::to_string(*vocab) +
                " but token_embd.weight has " + std::to_string(c.vocab_size) + " rows");
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

// A small tensor (a norm), decoded to f32.
std::vector<float> read_vector(const GgufFile& f, const std::string& name, uint64_t n) {
  return f.read_f32(find_checked(f, name, {n}));
}

// A [rows][cols] matrix as a view into the mapping; GgufFile::open has checked that its bytes
// lie inside the file.
WeightTensor view_matrix(const GgufFile& f, const std::string& name, uint64_t rows, uint64_t cols) {
  const GgufTensorInfo& t = find_checked(f, name, {cols, rows});
  return WeightTensor{t.type, f.tensor_bytes(t).data(), int64_t(rows), int64_t(cols)};
}

}  // namespace

Model load_gguf_model(const std::string& path) {
  auto file = std::make_shared<GgufFile>(GgufFile::open(path));
  const GgufFile& f = *file;
  const ModelConfig c = read_config(f);
  const uint64_t dim = c.dim, q_dim = uint64_t(c.n_heads) * c.head_dim(), kv_dim = c.kv_dim();
  const uint64_t ffn = c.ffn_dim, vocab = c.vocab_size;

  ModelWeights w;
  w.token_embd = view_matrix(f, "token_embd.weight", vocab, dim);
  w.output_norm = read_vector(f, "output_norm.weight", dim);
  w.output = f.find_tensor("output.weight") ? view_matrix(f, "output.weight", vocab, dim) : w.token_embd;
  w.layers.resize(c.n_layers);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& lw = w.layers[l];
    lw.attn_norm = read_vector(f, p + "attn_norm.weight", dim);
    lw.attn_q = view_matrix(f, p + "attn_q.weight", q_dim, dim);
    lw.attn_k = view_matrix(f, p + "attn_k.weight", kv_dim, dim);
    lw.attn_v = view_matrix(f, p + "attn_v.weight", kv_dim, dim);
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
  return Model{path, c, std::move(w), std::move(tokenizer), std::move(file)};
}

}  // namespace pagoda
