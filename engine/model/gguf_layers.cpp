// One transformer block from a GGUF file, by llama.cpp's tensor names: attention (separate
// Q/K/V or phi3's fused attn_qkv, qwen2's biases, Q/K norms), Gemma's post-norms, and a dense
// gated FFN (phi3's gate|up fused in ffn_up) or a mixture of experts (3-D expert tensors, one
// view per expert, and qwen2moe's shared expert); or an encoder's block (bert, nomic-bert,
// jina-bert-v2).

#include "engine/model/gguf_layers.h"

#include "pagoda/error.h"

namespace pagoda {

namespace {

std::string shape_string(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Rows [first, first + count) of a matrix view: rows hold whole blocks, so a row range is a
// byte range.
WeightTensor row_range(const WeightTensor& m, int64_t first, int64_t count) {
  WeightTensor part = m;
  part.data = m.data + uint64_t(first) * m.row_bytes();
  part.rows = count;
  return part;
}

// The experts of a 3-D tensor {cols, rows, n_experts}: expert e's [rows][cols] matrix follows
// expert e-1's in the file.
std::vector<WeightTensor> view_experts(const GgufFile& f, const std::string& name, uint64_t rows, uint64_t cols,
                                       uint64_t n_experts) {
  const GgufTensorInfo& t = find_checked(f, name, {cols, rows, n_experts});
  const WeightTensor all{t.type, f.tensor_bytes(t).data(), int64_t(rows * n_experts), int64_t(cols),
                         f.file().maps_file()};
  std::vector<WeightTensor> experts;
  for (uint64_t e = 0; e < n_experts; ++e) experts.push_back(row_range(all, int64_t(e * rows), int64_t(rows)));
  return experts;
}

void read_attention(const GgufFile& f, const ModelConfig& c, const std::string& p, LayerWeights& lw) {
  const uint64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), head_dim = c.head_dim();
  if (f.find_tensor(p + "attn_qkv.weight")) {
    const WeightTensor qkv = view_matrix(f, p + "attn_qkv.weight", q_dim + 2 * kv_dim, dim);
    lw.attn_q = row_range(qkv, 0, int64_t(q_dim));
    lw.attn_k = row_range(qkv, int64_t(q_dim), int64_t(kv_dim));
    lw.attn_v = row_range(qkv, int64_t(q_dim + kv_dim), int64_t(kv_dim));
  } else {
    lw.attn_q = view_matrix(f, p + "attn_q.weight", q_dim, dim);
    lw.attn_k = view_matrix(f, p + "attn_k.weight", kv_dim, dim);
    lw.attn_v = view_matrix(f, p + "attn_v.weight", kv_dim, dim);
  }
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
}

void read_dense_ffn(const GgufFile& f, const ModelConfig& c, const std::string& p, LayerWeights& lw) {
  const uint64_t dim = c.dim, ffn = c.ffn_dim;
  if (!f.find_tensor(p + "ffn_gate.weight") && f.find_tensor(p + "ffn_up.weight")) {
    // phi3: the gate's rows, then the up projection's, in one tensor.
    const WeightTensor gate_up = view_matrix(f, p + "ffn_up.weight", 2 * ffn, dim);
    lw.ffn_gate = row_range(gate_up, 0, int64_t(ffn));
    lw.ffn_up = row_range(gate_up, int64_t(ffn), int64_t(ffn));
  } else {
    lw.ffn_gate = view_matrix(f, p + "ffn_gate.weight", ffn, dim);
    lw.ffn_up = view_matrix(f, p + "ffn_up.weight", ffn, dim);
  }
  lw.ffn_down = view_matrix(f, p + "ffn_down.weight", dim, ffn);
}

void read_experts(const GgufFile& f, const ModelConfig& c, const std::string& p, LayerWeights& lw) {
  const uint64_t dim = c.dim, ffn = c.moe_ffn_dim(), n = c.n_experts;
  if (!f.find_tensor(p + "ffn_gate_inp.weight")) {
    throw Error(f.path() + ": tensor '" + p + "ffn_gate_inp.weight' (the expert router) is missing; " +
                std::to_string(n) + " experts need it");
  }
  lw.ffn_gate_inp = view_matrix(f, p + "ffn_gate_inp.weight", n, dim);
  const auto gate = view_experts(f, p + "ffn_gate_exps.weight", ffn, dim, n);
  const auto up = view_experts(f, p + "ffn_up_exps.weight", ffn, dim, n);
  const auto down = view_experts(f, p + "ffn_down_exps.weight", dim, ffn, n);
  for (uint64_t e = 0; e < n; ++e) lw.experts.push_back({gate[e], up[e], down[e]});
  if (c.has_shared_expert()) {
    const uint64_t shared = c.shared_ffn_dim;
    lw.shared_expert_gate = read_vector(f, p + "ffn_gate_inp_shexp.weight", dim);
    lw.shared_expert = {view_matrix(f, p + "ffn_gate_shexp.weight", shared, dim),
                        view_matrix(f, p + "ffn_up_shexp.weight", shared, dim),
                        view_matrix(f, p + "ffn_down_shexp.weight", dim, shared)};
  }
}

// An optional LayerNorm: its weight and bias when the file has the weight (a bias alone is
// ignored, as llama.cpp builds the norm only on the weight; a missing bias is zero).
void read_optional_norm(const GgufFile& f, const std::string& name, uint64_t n, std::vector<float>& weight,
                        std::vector<float>& bias) {
  if (!f.find_tensor(name + ".weight")) return;
  weight = read_vector(f, name + ".weight", n);
  if (f.find_tensor(name + ".bias")) bias = read_vector(f, name + ".bias", n);
}

// An encoder's block, as llama.cpp's build_bert reads it. bert: biased Q/K/V and output, a
// biased GELU ffn_up/ffn_down. nomic-bert: fused attn_qkv (seen as row views), no biases, a
// gated ffn_gate/ffn_up/ffn_down. jina-bert-v2: biased Q/K/V and output, optional LayerNorms
// of Q and K (over all heads) and a second one after attention (attn_norm_2), a gated FFN whose
// ffn_down alone is biased. All: LayerNorm (weight and bias) after the attention's residual and
// after the FFN's.
LayerWeights read_encoder_layer(const GgufFile& f, const ModelConfig& c, const std::string& p) {
  const uint64_t dim = c.dim, ffn = c.ffn_dim;
  LayerWeights lw;
  if (c.arch == Architecture::NomicBert) {
    const WeightTensor qkv = view_matrix(f, p + "attn_qkv.weight", uint64_t(c.q_dim() + 2 * c.kv_dim()), dim);
    lw.attn_q = row_range(qkv, 0, c.q_dim());
    lw.attn_k = row_range(qkv, c.q_dim(), c.kv_dim());
    lw.attn_v = row_range(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    lw.attn_output = view_matrix(f, p + "attn_output.weight", dim, uint64_t(c.q_dim()));
  } else {
    read_attention(f, c, p, lw);
    lw.attn_output_bias = read_vector(f, p + "attn_output.bias", dim);
  }
  if (c.arch == Architecture::JinaBertV2) {
    read_optional_norm(f, p + "attn_q_norm", dim, lw.attn_q_norm, lw.attn_q_norm_bias);
    read_optional_norm(f, p + "attn_k_norm", dim, lw.attn_k_norm, lw.attn_k_norm_bias);
    read_optional_norm(f, p + "attn_norm_2", dim, lw.attn_norm_2, lw.attn_norm_2_bias);
  }
  lw.attn_output_norm = read_vector(f, p + "attn_output_norm.weight", dim);
  lw.attn_output_norm_bias = read_vector(f, p + "attn_output_norm.bias", dim);
  lw.ffn_up = view_matrix(f, p + "ffn_up.weight", ffn, dim);
  if (c.has_gated_encoder_ffn()) {
    lw.ffn_gate = view_matrix(f, p + "ffn_gate.weight", ffn, dim);
  } else {
    lw.ffn_up_bias = read_vector(f, p + "ffn_up.bias", ffn);
  }
  lw.ffn_down = view_matrix(f, p + "ffn_down.weight", dim, ffn);
  if (c.arch != Architecture::NomicBert) lw.ffn_down_bias = read_vector(f, p + "ffn_down.bias", dim);
  lw.layer_output_norm = read_vector(f, p + "layer_output_norm.weight", dim);
  lw.layer_output_norm_bias = read_vector(f, p + "layer_output_norm.bias", dim);
  return lw;
}

}  // namespace

uint64_t rank_labels(const GgufFile& f, const ModelConfig& c) {
  const std::string key = std::string(architecture_name(c.arch)) + ".classifier.output_labels";
  const size_t labels = f.find(key) ? f.get_string_array(key).size() : 1;
  if (labels == 0 || labels > 64) {
    throw Error(f.path() + ": " + key + " has " + std::to_string(labels) + " labels; a rank head has 1 to 64");
  }
  return labels;
}

EncoderWeights read_encoder_weights(const GgufFile& f, const ModelConfig& c) {
  const uint64_t dim = c.dim;
  EncoderWeights e;
  e.token_types = view_matrix(f, "token_types.weight", uint64_t(c.n_token_types), dim);
  if (c.has_learned_positions())
    e.position_embd = view_matrix(f, "position_embd.weight", uint64_t(c.context_length), dim);
  e.token_embd_norm = read_vector(f, "token_embd_norm.weight", dim);
  e.token_embd_norm_bias = read_vector(f, "token_embd_norm.bias", dim);
  if (c.arch == Architecture::Bert) {
    // Either part may be absent, as llama.cpp reads them: a classifier with no pooler dense
    // scores cls.output · x + b on [CLS] itself.
    if (f.find_tensor("cls.weight")) {
      e.cls = view_matrix(f, "cls.weight", dim, dim);
      e.cls_bias = read_vector(f, "cls.bias", dim);
    }
    if (f.find_tensor("cls.output.weight")) {
      const uint64_t labels = rank_labels(f, c);
      e.cls_output = view_matrix(f, "cls.output.weight", labels, dim);
      e.cls_output_bias = read_vector(f, "cls.output.bias", labels);
    }
  } else if (c.arch == Architecture::JinaBertV2 && (f.find_tensor("cls.weight") || f.find_tensor("cls.bias"))) {
    // jina-reranker-v1: the score is tanh(cls · x + b) itself, with no cls.output.
    e.cls = view_matrix(f, "cls.weight", 1, dim);
    e.cls_bias = read_vector(f, "cls.bias", 1);
  }
  return e;
}

const GgufTensorInfo& find_checked(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& shape) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) throw Error(f.path() + ": tensor '" + name + "' is missing");
  if (t->shape != shape) {
    throw Error(f.path() + ": tensor '" + name + "' has shape " + shape_string(t->shape) + ", expected " +
                shape_string(shape));
  }
  return *t;
}

std::vector<float> read_vector(const GgufFile& f, const std::string& name, uint64_t n) {
  return f.read_f32(find_checked(f, name, {n}));
}

WeightTensor view_matrix(const GgufFile& f, const std::string& name, uint64_t rows, uint64_t cols) {
  // A one-row matrix may be written as ggml holds it, [cols] (llama-quantize's output).
  const GgufTensorInfo* vector = rows == 1 ? f.find_tensor(name) : nullptr;
  const GgufTensorInfo& t =
      vector && vector->shape == std::vector<uint64_t>{cols} ? *vector : find_checked(f, name, {cols, rows});
  return WeightTensor{t.type, f.tensor_bytes(t).data(), int64_t(rows), int64_t(cols), f.file().maps_file()};
}

LayerWeights read_layer(const GgufFile& f, const ModelConfig& c, int32_t layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  if (c.is_encoder()) return read_encoder_layer(f, c, p);
  const uint64_t dim = c.dim;
  LayerWeights lw;
  lw.attn_norm = read_vector(f, p + "attn_norm.weight", dim);
  read_attention(f, c, p, lw);
  lw.ffn_norm = read_vector(f, p + "ffn_norm.weight", dim);
  if (c.has_post_norms()) {
    lw.attn_post_norm = read_vector(f, p + "post_attention_norm.weight", dim);
    lw.ffn_post_norm = read_vector(f, p + "post_ffw_norm.weight", dim);
  }
  if (c.has_experts()) {
    read_experts(f, c, p, lw);
  } else {
    read_dense_ffn(f, c, p, lw);
  }
  return lw;
}

}  // namespace pagoda
