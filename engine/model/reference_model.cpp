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

// llama's RoPE on adjacent pairs (x[i], x[i+1]) of each head.
void rope(float* v, int n_heads, int head_dim, int pos, float theta) {
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < head_dim; i += 2) {
      const double freq = 1.0 / std::pow(double(theta), double(i) / double(head_dim));
      const double angle = double(pos) * freq;
      const float c = float(std::cos(angle)), s = float(std::sin(angle));
      float* p = v + h * head_dim + i;
      const float a = p[0], b = p[1];
      p[0] = a * c - b * s;
      p[1] = a * s + b * c;
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
  q_.resize(c.dim);
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

  const int dim = c.dim, kv_dim = c.kv_dim(), head_dim = c.head_dim(), ffn = c.ffn_dim;
  w.token_embd.dequantize_row(token, x_.data());

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    const DenseLayer& dw = layers_[l];
    float* k = key_cache_.data() + (size_t(l) * c.context_length + pos) * kv_dim;
    float* v = value_cache_.data() + (size_t(l) * c.context_length + pos) * kv_dim;

    rmsnorm(xb_.data(), x_.data(), lw.attn_norm.data(), dim, c.norm_eps);
    matvec(q_.data(), xb_.data(), dw.attn_q, dim, dim);
    matvec(k, xb_.data(), dw.attn_k, dim, kv_dim);
    matvec(v, xb_.data(), dw.attn_v, dim, kv_dim);
    rope(q_.data(), c.n_heads, head_dim, pos, c.rope_theta);
    rope(k, c.n_kv_heads, head_dim, pos, c.rope_theta);

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
      float* out = xb_.data() + h * head_dim;
      std::fill_n(out, head_dim, 0.0f);
      for (int t = 0; t <= pos; ++t) {
        const float* vt = value_cache_.data() + (size_t(l) * c.context_length + t) * kv_dim + kv_head * head_dim;
        for (int i = 0; i < head_dim; ++i) out[i] += att_[t] * vt[i];
      }
    }
    matvec(xb2_.data(), xb_.data(), dw.attn_output, dim, dim);
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
