#include "engine/model/reference_model.h"

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

// RoPE written out plainly: pair i of each head turns by
// pos · freq_scale · theta^(-2i/head_dim) / factor[i]; its two values are adjacent (llama) or
// head_dim/2 apart (NEOX: qwen2, qwen3).
void rope(float* v, int n_heads, int head_dim, int pos, const ModelConfig& c, const std::vector<float>& factors) {
  const bool neox = c.rope_style() == kernels::RopeStyle::Neox;
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < head_dim / 2; ++i) {
      double freq = double(c.rope_freq_scale) / std::pow(double(c.rope_theta), double(2 * i) / double(head_dim));
      if (!factors.empty()) freq /= double(factors[size_t(i)]);
      const double angle = double(pos) * freq;
      const float cs = float(std::cos(angle)), sn = float(std::sin(angle));
      float* a = v + h * head_dim + (neox ? i : 2 * i);
      float* b = neox ? a + head_dim / 2 : a + 1;
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

}  // namespace

ReferenceModel::ReferenceModel(const Model& model) : model_(model) {
  const ModelConfig& c = model.config;
  x_.resize(c.dim);
  xb_.resize(c.dim);
  xb2_.resize(c.dim);
  q_.resize(c.q_dim());
  att_out_.resize(c.q_dim());
  hb_.resize(c.ffn_dim);
  hb2_.resize(c.ffn_dim);
  att_.resize(c.context_length);
  logits_.resize(c.vocab_size);
  key_cache_.resize(size_t(c.n_layers) * c.context_length * c.kv_dim());
  value_cache_.resize(key_cache_.size());
  for (const LayerWeights& w : model.weights.layers) {
    layers_.push_back({w.attn_q.to_f32(), w.attn_k.to_f32(), w.attn_v.to_f32(), w.attn_output.to_f32(),
                       w.ffn_gate.to_f32(), w.ffn_up.to_f32(), w.ffn_down.to_f32()});
  }
  output_ = model.weights.output.to_f32();
}

const std::vector<float>& ReferenceModel::forward(int32_t token, int32_t pos) {
  const ModelConfig& c = model_.config;
  const ModelWeights& w = model_.weights;
  if (pos != next_pos_) throw Error("ReferenceModel: position " + std::to_string(pos) + " fed out of order");
  if (pos >= c.context_length) throw Error("ReferenceModel: position past the context length");
  if (token < 0 || token >= c.vocab_size) throw Error("ReferenceModel: token id out of range");
  next_pos_ = pos + 1;

  const int dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), head_dim = c.head_dim(), ffn = c.ffn_dim;
  w.token_embd.dequantize_row(token, x_.data());

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    const DenseLayer& dw = layers_[l];
    float* k = key_cache_.data() + (size_t(l) * c.context_length + pos) * kv_dim;
    float* v = value_cache_.data() + (size_t(l) * c.context_length + pos) * kv_dim;

    rmsnorm(xb_.data(), x_.data(), lw.attn_norm.data(), dim, c.norm_eps);
    matvec(q_.data(), xb_.data(), dw.attn_q, dim, q_dim);
    matvec(k, xb_.data(), dw.attn_k, dim, kv_dim);
    matvec(v, xb_.data(), dw.attn_v, dim, kv_dim);
    add(q_.data(), lw.attn_q_bias);
    add(k, lw.attn_k_bias);
    add(v, lw.attn_v_bias);
    if (c.has_qk_norm()) {
      for (int h = 0; h < c.n_heads; ++h) rmsnorm(q_.data() + h * head_dim, q_.data() + h * head_dim, lw.attn_q_norm.data(), head_dim, c.norm_eps);
      for (int h = 0; h < c.n_kv_heads; ++h) rmsnorm(k + h * head_dim, k + h * head_dim, lw.attn_k_norm.data(), head_dim, c.norm_eps);
    }
    rope(q_.data(), c.n_heads, head_dim, pos, c, w.rope_freqs);
    rope(k, c.n_kv_heads, head_dim, pos, c, w.rope_freqs);

    const float scale = 1.0f / std::sqrt(float(head_dim));
    for (int h = 0; h < c.n_heads; ++h) {
      const int kv_head = h / c.group_size();
      const float* qh = q_.data() + h * head_dim;
      for (int t = 0; t <= pos; ++t) {
        const float* kt = key_cache_.data() + (size_t(l) * c.context_length + t) * kv_dim + kv_head * head_dim;
        float score = 0.0f;
        for (int i = 0; i < head_dim; ++i) score += qh[i] * kt[i];
        att_[t] = score * scale;
      }
      softmax(att_.data(), pos + 1);
      float* out = att_out_.data() + h * head_dim;
      std::fill_n(out, head_dim, 0.0f);
      for (int t = 0; t <= pos; ++t) {
        const float* vt = value_cache_.data() + (size_t(l) * c.context_length + t) * kv_dim + kv_head * head_dim;
        for (int i = 0; i < head_dim; ++i) out[i] += att_[t] * vt[i];
      }
    }
    matvec(xb2_.data(), att_out_.data(), dw.attn_output, q_dim, dim);
    for (int i = 0; i < dim; ++i) x_[i] += xb2_[i];

    rmsnorm(xb_.data(), x_.data(), lw.ffn_norm.data(), dim, c.norm_eps);
    matvec(hb_.data(), xb_.data(), dw.ffn_gate, dim, ffn);
    matvec(hb2_.data(), xb_.data(), dw.ffn_up, dim, ffn);
    for (int i = 0; i < ffn; ++i) {
      const float g = hb_[i];
      hb_[i] = g / (1.0f + std::exp(-g)) * hb2_[i];
    }
    matvec(xb_.data(), hb_.data(), dw.ffn_down, ffn, dim);
    for (int i = 0; i < dim; ++i) x_[i] += xb_[i];
  }

  rmsnorm(x_.data(), x_.data(), w.output_norm.data(), dim, c.norm_eps);
  matvec(logits_.data(), x_.data(), output_, dim, c.vocab_size);
  return logits_;
}

}  // namespace pagoda
