#include "testing/reference_model.h"

#include <algorithm>
#include <cmath>

#include "pagoda/error.h"

namespace pagoda {

namespace {

void rmsnorm(float* out, const float* x, const float* weight, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

// out[d] = W[d][n] · x[n]
void matvec(float* out, const float* x, const std::vector<float>& w, int n, int d) {
  for (int i = 0; i < d; ++i) {
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += w[size_t(i) * n + j] * x[j];
    out[i] = sum;
  }
}

void add(float* x, const std::vector<float>& bias) {
  for (size_t i = 0; i < bias.size(); ++i) x[i] += bias[i];
}

// RoPE written out plainly: pair i of the first n = rotated_dims values of each head turns by
// pos · freq_scale · theta^(-2i/n) / factor[i] (theta and scale the layer's), its cos and sin
// times the attention factor; its two values are adjacent (llama) or n/2 apart (NEOX).
// With M-RoPE, pair i takes the position of the section (a run of rope_sections[k] pairs,
// repeating) it falls in.
void rope(float* v, int n_heads, int head_dim, const std::array<int32_t, 4>& positions, int layer, const ModelConfig& c,
          const std::vector<float>& factors) {
  const bool neox = c.rope_style() == kernels::RopeStyle::Neox;
  const int n = c.rotated_dims();
  const std::array<int32_t, 4>& s = c.rope_sections;
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < n / 2; ++i) {
      int section = 0;
      if (c.has_mrope()) {
        const int j = i % (s[0] + s[1] + s[2] + s[3]);
        section = j < s[0] ? 0 : j < s[0] + s[1] ? 1 : j < s[0] + s[1] + s[2] ? 2 : 3;
      }
      const int pos = positions[size_t(section)];
      double freq = double(c.layer_rope_freq_scale(layer)) /
                    std::pow(double(c.layer_rope_theta(layer)), double(2 * i) / double(n));
      if (!factors.empty()) freq /= double(factors[size_t(i)]);
      const double angle = double(pos) * freq;
      const float cs = float(std::cos(angle)) * c.rope_attn_factor, sn = float(std::sin(angle)) * c.rope_attn_factor;
      float* a = v + h * head_dim + (neox ? i : 2 * i);
      float* b = neox ? a + n / 2 : a + 1;
      const float x0 = *a, x1 = *b;
      *a = x0 * cs - x1 * sn;
      *b = x0 * sn + x1 * cs;
    }
  }
}

void softmax(float* x, int n) {
  float max = x[0];
  for (int i = 1; i < n; ++i) max = std::max(max, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// GELU, tanh approximation (Gemma's gelu_pytorch_tanh).
float gelu(float x) {
  const double u = 0.7978845608028654 * (double(x) + 0.044715 * double(x) * x * x);
  return float(0.5 * x * (1.0 + std::tanh(u)));
}

}  // namespace

void ReferenceModel::ffn(const DenseFfn& w, int n, float* out) {
  const int dim = model_.config.dim;
  hb_.resize(size_t(n));
  hb2_.resize(size_t(n));
  matvec(hb_.data(), xb_.data(), w.gate, dim, n);
  matvec(hb2_.data(), xb_.data(), w.up, dim, n);
  for (int i = 0; i < n; ++i) hb_[i] = (model_.config.gelu_ffn() ? gelu(hb_[i]) : silu(hb_[i])) * hb2_[i];
  matvec(out, hb_.data(), w.down, n, dim);
}

ReferenceModel::ReferenceModel(const Model& model) : model_(model) {
  const ModelConfig& c = model.config;
  if (c.is_encoder()) throw Error("ReferenceModel: an encoder has no next token; see ReferenceEncoder");
  x_.resize(c.dim);
  xb_.resize(c.dim);
  xb2_.resize(c.dim);
  q_.resize(c.q_dim());
  att_out_.resize(c.q_dim());
  att_.resize(c.context_length);
  logits_.resize(c.vocab_size);
  key_cache_.resize(size_t(c.n_layers) * c.context_length * c.kv_dim());
  value_cache_.resize(key_cache_.size());
  auto dense = [](const ExpertWeights& e) { return DenseFfn{e.gate.to_f32(), e.up.to_f32(), e.down.to_f32()}; };
  for (const LayerWeights& w : model.weights.layers) {
    DenseLayer d{w.attn_q.to_f32(), w.attn_k.to_f32(), w.attn_v.to_f32(), w.attn_output.to_f32(), {}, {}, {}, {}};
    if (c.has_experts()) {
      d.router = w.ffn_gate_inp.to_f32();
      for (const ExpertWeights& e : w.experts) d.experts.push_back(dense(e));
      if (c.has_shared_expert()) d.shared_expert = dense(w.shared_expert);
    } else {
      d.ffn = dense({w.ffn_gate, w.ffn_up, w.ffn_down});
    }
    layers_.push_back(std::move(d));
  }
  output_ = model.weights.output.to_f32();
}

const std::vector<float>& ReferenceModel::forward(int32_t token, int32_t pos) {
  return forward(token, pos, nullptr, {pos, pos, pos, 0});
}

const std::vector<float>& ReferenceModel::forward(int32_t token, int32_t pos, const float* row,
                                                  const std::array<int32_t, 4>& rope_positions) {
  const ModelConfig& c = model_.config;
  if (token < 0 || token >= c.vocab_size) throw Error("ReferenceModel: token id out of range");
  take_positions(pos, 1);
  if (row) {
    std::copy_n(row, c.dim, x_.data());
  } else {
    model_.weights.token_embd.dequantize_row(token, x_.data());
    for (float& x : x_) x *= c.embedding_scale();
  }
  for (int l = 0; l < c.n_layers; ++l) {
    layer_inputs(l, pos, rope_positions, q_.data());
    layer_outputs(l, q_.data(), pos, 0, 0);
  }
  return logits();
}

const std::vector<float>& ReferenceModel::forward_rows(const float* rows, int32_t count, int32_t pos,
                                                       bool bidirectional) {
  const ModelConfig& c = model_.config;
  take_positions(pos, count);
  const size_t dim = size_t(c.dim), q_dim = size_t(c.q_dim());
  std::vector<float> xs(rows, rows + size_t(count) * dim), qs(size_t(count) * q_dim);
  const int span_end = bidirectional ? pos + count : 0;
  // Layer by layer: every row's key and value first, so that a row can see later ones.
  for (int l = 0; l < c.n_layers; ++l) {
    for (int32_t i = 0; i < count; ++i) {
      std::copy_n(xs.data() + i * dim, dim, x_.data());
      const int32_t p = pos + i;
      layer_inputs(l, p, {p, p, p, 0}, qs.data() + i * q_dim);
    }
    for (int32_t i = 0; i < count; ++i) {
      std::copy_n(xs.data() + i * dim, dim, x_.data());
      layer_outputs(l, qs.data() + i * q_dim, pos + i, bidirectional ? pos : 0, span_end);
      std::copy_n(x_.data(), dim, xs.data() + i * dim);
    }
  }
  std::copy_n(xs.data() + (count - 1) * dim, dim, x_.data());
  return logits();
}

void ReferenceModel::take_positions(int32_t pos, int32_t count) {
  if (pos != next_pos_) throw Error("ReferenceModel: position " + std::to_string(pos) + " fed out of order");
  if (count <= 0 || pos + count > model_.config.context_length)
    throw Error("ReferenceModel: position past the context length");
  next_pos_ = pos + count;
}

void ReferenceModel::layer_inputs(int l, int pos, const std::array<int32_t, 4>& rope_positions, float* q) {
  const ModelConfig& c = model_.config;
  const ModelWeights& w = model_.weights;
  const int dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), head_dim = c.head_dim();
  const LayerWeights& lw = w.layers[l];
  const DenseLayer& dw = layers_[l];
  float* k = key_cache_.data() + (size_t(l) * c.context_length + pos) * kv_dim;
  float* v = value_cache_.data() + (size_t(l) * c.context_length + pos) * kv_dim;

  rmsnorm(xb_.data(), x_.data(), lw.attn_norm.data(), dim, c.norm_eps);
  matvec(q, xb_.data(), dw.attn_q, dim, q_dim);
  matvec(k, xb_.data(), dw.attn_k, dim, kv_dim);
  matvec(v, xb_.data(), dw.attn_v, dim, kv_dim);
  add(q, lw.attn_q_bias);
  add(k, lw.attn_k_bias);
  add(v, lw.attn_v_bias);
  if (c.has_qk_norm()) {
    for (int h = 0; h < c.n_heads; ++h)
      rmsnorm(q + h * head_dim, q + h * head_dim, lw.attn_q_norm.data(), head_dim, c.norm_eps);
    for (int h = 0; h < c.n_kv_heads; ++h)
      rmsnorm(k + h * head_dim, k + h * head_dim, lw.attn_k_norm.data(), head_dim, c.norm_eps);
  }
  rope(q, c.n_heads, head_dim, rope_positions, l, c, w.rope_freqs);
  rope(k, c.n_kv_heads, head_dim, rope_positions, l, c, w.rope_freqs);
}

void ReferenceModel::layer_outputs(int l, const float* q, int pos, int span_begin, int span_end) {
  const ModelConfig& c = model_.config;
  const ModelWeights& w = model_.weights;
  const int dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), head_dim = c.head_dim();
  const LayerWeights& lw = w.layers[l];
  const DenseLayer& dw = layers_[l];

  // A sliding layer sees the last sliding_window positions; a position of a bidirectional span
  // sees the whole span too (transformers' Gemma 3 mask: causal and in the window, or in the
  // same image). Scores may be soft-capped.
  const int window_first = c.is_sliding(l) ? std::max(0, pos - c.sliding_window + 1) : 0;
  const bool in_span = pos >= span_begin && pos < span_end;
  auto visible = [&](int t) { return (t >= window_first && t <= pos) || (in_span && t >= span_begin && t < span_end); };
  const int first = in_span ? std::min(window_first, span_begin) : window_first;
  const int last = in_span ? span_end - 1 : pos;
  const float scale = c.attention_scale();
  for (int h = 0; h < c.n_heads; ++h) {
    const int kv_head = h / c.group_size();
    const float* qh = q + h * head_dim;
    for (int t = first; t <= last; ++t) {
      if (!visible(t)) {
        att_[t] = -INFINITY;
        continue;
      }
      const float* kt = key_cache_.data() + (size_t(l) * c.context_length + t) * kv_dim + kv_head * head_dim;
      float score = 0.0f;
      for (int i = 0; i < head_dim; ++i) score += qh[i] * kt[i];
      score *= scale;
      if (c.attn_softcap > 0.0f) score = c.attn_softcap * std::tanh(score / c.attn_softcap);
      att_[t] = score;
    }
    softmax(att_.data() + first, last + 1 - first);
    float* out = att_out_.data() + h * head_dim;
    std::fill_n(out, head_dim, 0.0f);
    for (int t = first; t <= last; ++t) {
      const float* vt = value_cache_.data() + (size_t(l) * c.context_length + t) * kv_dim + kv_head * head_dim;
      for (int i = 0; i < head_dim; ++i) out[i] += att_[t] * vt[i];
    }
  }
  matvec(xb2_.data(), att_out_.data(), dw.attn_output, q_dim, dim);
  if (c.has_post_norms()) rmsnorm(xb2_.data(), xb2_.data(), lw.attn_post_norm.data(), dim, c.norm_eps);
  for (int i = 0; i < dim; ++i) x_[i] += xb2_[i];

  rmsnorm(xb_.data(), x_.data(), lw.ffn_norm.data(), dim, c.norm_eps);
  std::fill(xb2_.begin(), xb2_.end(), 0.0f);
  if (!c.has_experts()) {
    ffn(dw.ffn, c.ffn_dim, xb2_.data());
  } else {
    // The router's softmax over every expert; the top n_experts_used (ties to the lower
    // index) weighted by their probabilities, divided by their sum when the family does.
    std::vector<float> probs(static_cast<size_t>(c.n_experts)), out(static_cast<size_t>(dim));
    matvec(probs.data(), xb_.data(), dw.router, dim, c.n_experts);
    softmax(probs.data(), c.n_experts);
    std::vector<int> order(static_cast<size_t>(c.n_experts));
    for (int e = 0; e < c.n_experts; ++e) order[size_t(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[size_t(a)] > probs[size_t(b)]; });
    float total = 0.0f;
    for (int k = 0; k < c.n_experts_used; ++k) total += probs[size_t(order[size_t(k)])];
    for (int k = 0; k < c.n_experts_used; ++k) {
      const int e = order[size_t(k)];
      const float weight = c.normalizes_expert_weights() ? probs[size_t(e)] / total : probs[size_t(e)];
      ffn(dw.experts[size_t(e)], c.moe_ffn_dim(), out.data());
      for (int i = 0; i < dim; ++i) xb2_[i] += weight * out[size_t(i)];
    }
    if (c.has_shared_expert()) {
      float g = 0.0f;
      for (int i = 0; i < dim; ++i) g += lw.shared_expert_gate[size_t(i)] * xb_[i];
      const float gate = 1.0f / (1.0f + std::exp(-g));
      ffn(dw.shared_expert, c.shared_ffn_dim, out.data());
      for (int i = 0; i < dim; ++i) xb2_[i] += gate * out[size_t(i)];
    }
  }
  if (c.has_post_norms()) rmsnorm(xb2_.data(), xb2_.data(), lw.ffn_post_norm.data(), dim, c.norm_eps);
  for (int i = 0; i < dim; ++i) x_[i] += xb2_[i];
}

const std::vector<float>& ReferenceModel::logits() {
  const ModelConfig& c = model_.config;
  rmsnorm(x_.data(), x_.data(), model_.weights.output_norm.data(), c.dim, c.norm_eps);
  matvec(logits_.data(), x_.data(), output_, c.dim, c.vocab_size);
  if (c.final_softcap > 0.0f) {
    for (float& z : logits_) z = c.final_softcap * std::tanh(z / c.final_softcap);
  }
  return logits_;
}

}  // namespace pagoda
