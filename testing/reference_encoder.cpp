#include "testing/reference_encoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "pagoda/error.h"

namespace pagoda {

namespace {

using Rows = std::vector<double>;  // n rows of some width, row-major

// out[i][r] = W[r] · x[i] + bias[r] for each of the n rows of x (width `cols`).
Rows linear(const Rows& x, int n, const std::vector<float>& w, const std::vector<float>& bias, int rows, int cols) {
  Rows out(size_t(n) * rows);
  for (int i = 0; i < n; ++i) {
    const double* xi = x.data() + size_t(i) * cols;
    for (int r = 0; r < rows; ++r) {
      const float* wr = w.data() + size_t(r) * cols;
      double sum = 0.0;
      for (int j = 0; j < cols; ++j) sum += double(wr[j]) * xi[j];
      out[size_t(i) * rows + r] = sum + (bias.empty() ? 0.0 : double(bias[size_t(r)]));
    }
  }
  return out;
}

// ggml_norm then the affine part: (x - mean) / sqrt(variance + eps) * weight + bias, per row.
void layer_norm(Rows& x, int n, int dim, const std::vector<float>& weight, const std::vector<float>& bias, double eps) {
  for (int i = 0; i < n; ++i) {
    double* xi = x.data() + size_t(i) * dim;
    double mean = 0.0;
    for (int j = 0; j < dim; ++j) mean += xi[j];
    mean /= dim;
    double var = 0.0;
    for (int j = 0; j < dim; ++j) var += (xi[j] - mean) * (xi[j] - mean);
    const double scale = 1.0 / std::sqrt(var / dim + eps);
    for (int j = 0; j < dim; ++j) {
      xi[j] = (xi[j] - mean) * scale * double(weight[size_t(j)]) + (bias.empty() ? 0.0 : double(bias[size_t(j)]));
    }
  }
}

// ggml_silu: x·sigmoid(x).
double silu(double x) { return x / (1.0 + std::exp(-x)); }

// NEOX RoPE of every head of each of the n rows (position = row): pair i of the first `rot`
// values of a head, (v[i], v[i + rot/2]), turns by pos · freq_scale · theta^(-2i/rot).
void rope_neox(Rows& x, int n, int n_heads, int head_dim, const ModelConfig& c) {
  const int rot = c.rotated_dims(), half = rot / 2;
  for (int pos = 0; pos < n; ++pos) {
    for (int h = 0; h < n_heads; ++h) {
      double* v = x.data() + (size_t(pos) * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = pos * double(c.rope_freq_scale) / std::pow(double(c.rope_theta), double(2 * i) / rot);
        const double a = v[i], b = v[i + half];
        v[i] = a * std::cos(angle) - b * std::sin(angle);
        v[i + half] = a * std::sin(angle) + b * std::cos(angle);
      }
    }
  }
}

// ggml_gelu: the tanh approximation. ggml's CPU op looks it up in a table indexed by the input
// rounded to f16 (GGML_GELU_FP16), which moves each value by up to 2^-11 relative; the exact
// function is what the model means, and the difference stays far inside the acceptance bounds.
double gelu(double x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * x * (1.0 + 0.044715 * x * x)));
}

// Every token attends to every token (no causal mask): softmax(q·k / √head_dim + bias) · v per
// head, where jina-bert-v2's ALiBi bias is -slope(h)·|i - j| (llama.cpp's mask of -|i - j|
// times ggml's slope) and 0 otherwise.
Rows attention(const Rows& q, const Rows& k, const Rows& v, int n, const ModelConfig& c) {
  const int n_heads = c.n_heads, head_dim = c.head_dim(), width = n_heads * head_dim;
  const double scale = 1.0 / std::sqrt(double(head_dim));
  Rows out(size_t(n) * width, 0.0);
  std::vector<double> p(static_cast<size_t>(n));
  for (int h = 0; h < n_heads; ++h) {
    const double slope = c.alibi_max_bias > 0.0f ? double(c.alibi_slope(h)) : 0.0;
    for (int i = 0; i < n; ++i) {
      const double* qi = q.data() + size_t(i) * width + h * head_dim;
      double max = -INFINITY;
      for (int j = 0; j < n; ++j) {
        const double* kj = k.data() + size_t(j) * width + h * head_dim;
        double dot = 0.0;
        for (int d = 0; d < head_dim; ++d) dot += qi[d] * kj[d];
        p[size_t(j)] = dot * scale - slope * std::abs(i - j);
        max = std::max(max, p[size_t(j)]);
      }
      double sum = 0.0;
      for (double& x : p) sum += (x = std::exp(x - max));
      double* oi = out.data() + size_t(i) * width + h * head_dim;
      for (int j = 0; j < n; ++j) {
        const double* vj = v.data() + size_t(j) * width + h * head_dim;
        for (int d = 0; d < head_dim; ++d) oi[d] += p[size_t(j)] / sum * vj[d];
      }
    }
  }
  return out;
}

void add_rows(Rows& x, const Rows& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

}  // namespace

ReferenceEncoder::ReferenceEncoder(const Model& model) : model_(model) {
  const ModelConfig& c = model.config;
  if (!c.is_encoder()) {
    throw Error(std::string("ReferenceEncoder: ") + architecture_name(c.arch) + " is not an encoder");
  }
  const EncoderWeights& e = model.weights.encoder;
  token_types_ = e.token_types.to_f32();
  if (!e.position_embd.empty()) position_embd_ = e.position_embd.to_f32();
  if (!e.cls.empty()) cls_ = e.cls.to_f32();
  if (!e.cls_output.empty()) cls_output_ = e.cls_output.to_f32();
  for (const LayerWeights& w : model.weights.layers) {
    layers_.push_back({w.attn_q.to_f32(), w.attn_k.to_f32(), w.attn_v.to_f32(), w.attn_output.to_f32(),
                       w.ffn_up.to_f32(), w.ffn_down.to_f32(),
                       w.ffn_gate.empty() ? std::vector<float>{} : w.ffn_gate.to_f32()});
  }
}

std::vector<float> ReferenceEncoder::hidden_states(std::span<const int32_t> tokens) const {
  const ModelConfig& c = model_.config;
  const int n = int(tokens.size()), dim = c.dim, ffn = c.ffn_dim, kv_dim = c.kv_dim();
  if (n == 0) throw Error("ReferenceEncoder: empty sequence");
  if (n > c.context_length) throw Error("ReferenceEncoder: sequence longer than the context length");
  const ModelWeights& w = model_.weights;
  const EncoderWeights& e = w.encoder;

  Rows x(size_t(n) * dim);
  std::vector<float> row(static_cast<size_t>(dim));
  for (int i = 0; i < n; ++i) {
    if (tokens[size_t(i)] < 0 || tokens[size_t(i)] >= c.vocab_size)
      throw Error("ReferenceEncoder: token id " + std::to_string(tokens[size_t(i)]) + " out of range");
    w.token_embd.dequantize_row(tokens[size_t(i)], row.data());
    for (int j = 0; j < dim; ++j) {
      x[size_t(i) * dim + j] = double(row[size_t(j)]) + double(token_types_[size_t(j)]) +
                               (position_embd_.empty() ? 0.0 : double(position_embd_[size_t(i) * dim + j]));
    }
  }
  layer_norm(x, n, dim, e.token_embd_norm, e.token_embd_norm_bias, c.norm_eps);

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    const DenseLayer& d = layers_[size_t(l)];
    Rows q = linear(x, n, d.attn_q, lw.attn_q_bias, c.q_dim(), dim);
    Rows k = linear(x, n, d.attn_k, lw.attn_k_bias, kv_dim, dim);
    const Rows v = linear(x, n, d.attn_v, lw.attn_v_bias, kv_dim, dim);
    if (!lw.attn_q_norm.empty()) layer_norm(q, n, c.q_dim(), lw.attn_q_norm, lw.attn_q_norm_bias, c.norm_eps);
    if (!lw.attn_k_norm.empty()) layer_norm(k, n, kv_dim, lw.attn_k_norm, lw.attn_k_norm_bias, c.norm_eps);
    if (c.has_rope()) {
      rope_neox(q, n, c.n_heads, c.head_dim(), c);
      rope_neox(k, n, c.n_kv_heads, c.head_dim(), c);
    }
    Rows attn = linear(attention(q, k, v, n, c), n, d.attn_output, lw.attn_output_bias, dim, c.q_dim());
    add_rows(attn, x);
    layer_norm(attn, n, dim, lw.attn_output_norm, lw.attn_output_norm_bias, c.norm_eps);
    if (!lw.attn_norm_2.empty()) {
      // jina-bert-v2's second norm re-adds the block's input first, as llama.cpp does.
      add_rows(attn, x);
      layer_norm(attn, n, dim, lw.attn_norm_2, lw.attn_norm_2_bias, c.norm_eps);
    }
    Rows up = linear(attn, n, d.ffn_up, lw.ffn_up_bias, ffn, dim);
    if (d.ffn_gate.empty()) {
      for (double& u : up) u = gelu(u);
    } else {
      // act(gate·x) · (up·x): SiLU for nomic-bert, GELU for jina-bert-v2.
      const Rows gate = linear(attn, n, d.ffn_gate, {}, ffn, dim);
      const bool silu_gate = c.arch == Architecture::NomicBert;
      for (size_t i = 0; i < up.size(); ++i) up[i] *= silu_gate ? silu(gate[i]) : gelu(gate[i]);
    }
    x = linear(up, n, d.ffn_down, lw.ffn_down_bias, dim, ffn);
    add_rows(x, attn);
    layer_norm(x, n, dim, lw.layer_output_norm, lw.layer_output_norm_bias, c.norm_eps);
  }
  return std::vector<float>(x.begin(), x.end());
}

std::vector<float> ReferenceEncoder::pool(std::span<const float> hidden, EncoderPooling pooling) const {
  const int dim = model_.config.dim;
  const int n = int(hidden.size()) / dim;
  if (n == 0 || hidden.size() != size_t(n) * dim) throw Error("ReferenceEncoder: hidden states are not rows of dim");
  auto row = [&](int i) { return hidden.subspan(size_t(i) * dim, size_t(dim)); };
  switch (pooling) {
    case EncoderPooling::Mean: {
      std::vector<double> sum(size_t(dim), 0.0);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < dim; ++j) sum[size_t(j)] += row(i)[size_t(j)];
      std::vector<float> out(static_cast<size_t>(dim));
      for (int j = 0; j < dim; ++j) out[size_t(j)] = float(sum[size_t(j)] / n);
      return out;
    }
    case EncoderPooling::Cls: return {row(0).begin(), row(0).end()};
    case EncoderPooling::Last: return {row(n - 1).begin(), row(n - 1).end()};
    case EncoderPooling::Rank: {
      // RoBERTa's classification head, as llama.cpp's: tanh(cls · x + b) when there is cls,
      // then cls.output's first output (jina-reranker's cls gives the one score itself).
      if (cls_.empty() && cls_output_.empty())
        throw Error("ReferenceEncoder: rank pooling needs the rank head (cls.*), which the model lacks");
      const EncoderWeights& e = model_.weights.encoder;
      Rows h(row(0).begin(), row(0).end());
      int width = dim;
      if (!cls_.empty()) {
        width = int(e.cls.rows);
        h = linear(h, 1, cls_, e.cls_bias, width, dim);
        for (double& x : h) x = std::tanh(x);
      }
      if (cls_output_.empty()) return {float(h[0])};
      const int labels = int(e.cls_output.rows);
      return {float(linear(h, 1, cls_output_, e.cls_output_bias, labels, width)[0])};
    }
  }
  throw Error("ReferenceEncoder: unknown pooling");
}

std::vector<float> ReferenceEncoder::embed(std::span<const int32_t> tokens, EncoderPooling pooling) const {
  const std::vector<float> pooled = pool(hidden_states(tokens), pooling);
  return pooling == EncoderPooling::Rank ? pooled : l2_normalize(pooled);
}

std::vector<float> l2_normalize(std::span<const float> v) {
  double sum = 0.0;
  for (float x : v) sum += double(x) * x;
  const double scale = sum > 0.0 ? 1.0 / std::sqrt(sum) : 0.0;
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = float(v[i] * scale);
  return out;
}

}  // namespace pagoda
