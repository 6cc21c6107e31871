#include "engine/forward/encoder_runner.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <string>

#include "engine/forward/compute_arena.h"
#include "engine/forward/pack_weights.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// Rows per task of the row-wise loops.
constexpr int32_t kRowGrain = 8;

// out[r] = LayerNorm(in[r]) · weight + bias for each of `rows` rows of `dim`, as ggml_norm
// computes it (the mean and the variance summed in double), then ggml_mul and ggml_add.
void layer_norm_rows(const float* in, float* out, int32_t rows, int32_t dim, const std::vector<float>& weight,
                     const std::vector<float>& bias, float eps) {
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      const float* x = in + size_t(r) * dim;
      float* y = out + size_t(r) * dim;
      double sum = 0.0;
      for (int32_t j = 0; j < dim; ++j) sum += x[j];
      const float mean = float(sum / dim);
      double squares = 0.0;
      for (int32_t j = 0; j < dim; ++j) {
        y[j] = x[j] - mean;
        squares += double(y[j]) * y[j];
      }
      const float scale = 1.0f / std::sqrt(float(squares / dim) + eps);
      for (int32_t j = 0; j < dim; ++j) y[j] = y[j] * scale * weight[size_t(j)] + bias[size_t(j)];
    }
  });
}

// x[r][j] += bias[j] (when there is one), then += residual[r][j] (when given).
void add_bias_rows(float* x, int32_t rows, int32_t width, const std::vector<float>& bias,
                   const float* residual = nullptr) {
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      float* row = x + size_t(r) * width;
      if (!bias.empty())
        for (int32_t j = 0; j < width; ++j) row[j] += bias[size_t(j)];
      if (residual) {
        const float* add = residual + size_t(r) * width;
        for (int32_t j = 0; j < width; ++j) row[j] += add[j];
      }
    }
  });
}

}  // namespace

EncoderRunner::EncoderRunner(const Model& model, int threads, bool sole_reader)
    : model_(model), arena_(compute_arena_threads(threads)) {
  const ModelConfig& c = model.config;
  if (!c.is_encoder()) throw Error(model.path + ": " + architecture_name(c.arch) + " is not an encoder");
  const EncoderWeights& e = model.weights.encoder;
  token_type0_.resize(size_t(c.dim));
  e.token_types.dequantize_row(0, token_type0_.data());
  positions_ = e.position_embd.to_f32();
  arena_.execute([&] {
    layers_.resize(size_t(c.n_layers));
    tbb::parallel_for(0, c.n_layers, [&](int l) {
      const LayerWeights& w = model.weights.layers[size_t(l)];
      PackedLayer& p = layers_[size_t(l)];
      p.qkv = pack_weights({&w.attn_q, &w.attn_k, &w.attn_v}, sole_reader);
      for (const auto* b : {&w.attn_q_bias, &w.attn_k_bias, &w.attn_v_bias})
        p.qkv_bias.insert(p.qkv_bias.end(), b->begin(), b->end());
      p.output = pack_weights({&w.attn_output}, sole_reader);
      p.up = pack_weights({&w.ffn_up}, sole_reader);
      p.down = pack_weights({&w.ffn_down}, sole_reader);
    });
    if (has_rank_head()) {
      cls_ = pack_weights({&e.cls}, sole_reader);
      cls_output_ = pack_weights({&e.cls_output}, sole_reader);
    }
  });
}

void EncoderRunner::validate(std::span<const std::span<const int32_t>> sequences) const {
  const ModelConfig& c = model_.config;
  const int64_t positions = int64_t(positions_.size()) / c.dim;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::span<const int32_t> tokens = sequences[s];
    if (tokens.empty()) throw Error("encoder: sequence " + std::to_string(s) + " is empty");
    if (int64_t(tokens.size()) > std::min<int64_t>(c.context_length, positions)) {
      throw Error("encoder: sequence " + std::to_string(s) + " has " + std::to_string(tokens.size()) +
                  " tokens, more than the context length " + std::to_string(c.context_length));
    }
    for (const int32_t id : tokens) {
      if (id < 0 || id >= c.vocab_size)
        throw Error("encoder: token id " + std::to_string(id) + " is outside the vocabulary");
    }
  }
}

// Each token's row: its embedding + token type 0's row + its position's row, in that order
// (llama.cpp's inpL = tok + type, then + pos).
void EncoderRunner::embed_tokens(std::span<const std::span<const int32_t>> sequences) {
  const int32_t dim = model_.config.dim;
  const WeightTensor& embd = model_.weights.token_embd;
  tbb::parallel_for(size_t(0), sequences.size(), [&](size_t s) {
    const std::span<const int32_t> tokens = sequences[s];
    for (size_t i = 0; i < tokens.size(); ++i) {
      float* row = x_.data() + (size_t(sequence_start_[s]) + i) * dim;
      embd.dequantize_row(tokens[i], row);
      const float* position = positions_.data() + i * dim;
      for (int32_t j = 0; j < dim; ++j) row[j] = row[j] + token_type0_[size_t(j)] + position[j];
    }
  });
}

// Every row's attention over the rows of its own sequence. Keys and values are first laid out
// head-major, so that one head's keys of one sequence are contiguous: one f32 "page" for the
// paged kernel, whose per-token result depends only on the query and those rows in order.
void EncoderRunner::attention(int32_t rows) {
  const ModelConfig& c = model_.config;
  const int32_t head_dim = c.head_dim(), q_dim = c.q_dim(), kv_dim = c.kv_dim();
  const int32_t qkv_dim = q_dim + 2 * kv_dim, kv_heads = c.n_kv_heads, group = c.n_heads / c.n_kv_heads;
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      const float* k = qkv_.data() + size_t(r) * qkv_dim + q_dim;
      for (int32_t h = 0; h < kv_heads; ++h) {
        const size_t at = (size_t(h) * rows + r) * head_dim;
        std::copy_n(k + size_t(h) * head_dim, head_dim, keys_.data() + at);
        std::copy_n(k + kv_dim + size_t(h) * head_dim, head_dim, values_.data() + at);
      }
    }
  });
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const int32_t tasks = kv_heads * rows;
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, tasks, 4), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t t = range.begin(); t < range.end(); ++t) {
      const int32_t h = t / rows, r = t % rows;
      const int32_t s = row_sequence_[size_t(r)], first = sequence_start_[size_t(s)];
      const int32_t n = sequence_start_[size_t(s) + 1] - first;
      const size_t at = (size_t(h) * rows + first) * head_dim;
      const auto* k = reinterpret_cast<const std::byte*>(keys_.data() + at);
      const auto* v = reinterpret_cast<const std::byte*>(values_.data() + at);
      const size_t q = size_t(r) * qkv_dim + size_t(h) * group * head_dim;
      kernels::paged_attention(KvCacheType::F32, qkv_.data() + q, group, head_dim, n, &k, &v, n, scale,
                               att_.data() + size_t(r) * q_dim + size_t(h) * group * head_dim);
    }
  });
}

void EncoderRunner::forward(std::span<const std::span<const int32_t>> sequences, std::vector<float>& hidden) {
  if (auto lost = weights_lost(model_)) throw Error(*lost);
  validate(sequences);
  const ModelConfig& c = model_.config;
  const int32_t dim = c.dim, ffn = c.ffn_dim, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  const int32_t qkv_dim = q_dim + 2 * kv_dim;
  sequence_start_.clear();
  row_sequence_.clear();
  int32_t rows = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    sequence_start_.push_back(rows);
    rows += int32_t(sequences[s].size());
    row_sequence_.insert(row_sequence_.end(), sequences[s].size(), int32_t(s));
  }
  sequence_start_.push_back(rows);
  x_.resize(size_t(rows) * dim);
  qkv_.resize(size_t(rows) * qkv_dim);
  keys_.resize(size_t(rows) * kv_dim);
  values_.resize(size_t(rows) * kv_dim);
  att_.resize(size_t(rows) * q_dim);
  sublayer_.resize(size_t(rows) * dim);
  ffn_.resize(size_t(rows) * ffn);

  const EncoderWeights& e = model_.weights.encoder;
  arena_.execute([&] {
    embed_tokens(sequences);
    layer_norm_rows(x_.data(), x_.data(), rows, dim, e.token_embd_norm, e.token_embd_norm_bias, c.norm_eps);
    for (int32_t l = 0; l < c.n_layers; ++l) {
      const PackedLayer& p = layers_[size_t(l)];
      const LayerWeights& w = model_.weights.layers[size_t(l)];
      kernels::matmul(x_.data(), rows, dim, p.qkv, qkv_.data(), qkv_dim);
      add_bias_rows(qkv_.data(), rows, qkv_dim, p.qkv_bias);
      attention(rows);
      // Post-norm blocks: x = LN(x + attention), then x = LN(x + FFN(x)).
      kernels::matmul(att_.data(), rows, q_dim, p.output, sublayer_.data(), dim);
      add_bias_rows(sublayer_.data(), rows, dim, w.attn_output_bias, x_.data());
      layer_norm_rows(sublayer_.data(), x_.data(), rows, dim, w.attn_output_norm, w.attn_output_norm_bias, c.norm_eps);
      kernels::matmul(x_.data(), rows, dim, p.up, ffn_.data(), ffn);
      add_bias_rows(ffn_.data(), rows, ffn, w.ffn_up_bias);
      tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
        for (int32_t r = range.begin(); r < range.end(); ++r) {
          float* row = ffn_.data() + size_t(r) * ffn;
          kernels::gelu(row, row, ffn);
        }
      });
      kernels::matmul(ffn_.data(), rows, ffn, p.down, sublayer_.data(), dim);
      add_bias_rows(sublayer_.data(), rows, dim, w.ffn_down_bias, x_.data());
      layer_norm_rows(sublayer_.data(), x_.data(), rows, dim, w.layer_output_norm, w.layer_output_norm_bias,
                      c.norm_eps);
    }
  });
  hidden.assign(x_.begin(), x_.begin() + ptrdiff_t(rows) * dim);
  // The file may have been truncated during the pass: then it computed on zeros.
  if (auto lost = weights_lost(model_)) throw Error(*lost);
}

void EncoderRunner::rank_scores(const float* rows, int32_t n, float* scores) {
  if (!has_rank_head()) throw Error("encoder: the model has no rank head (cls.output): it is not a reranker");
  const int32_t dim = model_.config.dim;
  const EncoderWeights& e = model_.weights.encoder;
  std::vector<float> dense(size_t(n) * dim);
  arena_.execute([&] {
    kernels::matmul(rows, n, dim, cls_, dense.data(), dim);
    for (int32_t r = 0; r < n; ++r) {
      float* row = dense.data() + size_t(r) * dim;
      for (int32_t j = 0; j < dim; ++j) row[j] = std::tanh(row[j] + e.cls_bias[size_t(j)]);
    }
    kernels::matmul(dense.data(), n, dim, cls_output_, scores, 1);
  });
  const float bias = e.cls_output_bias.empty() ? 0.0f : e.cls_output_bias[0];
  for (int32_t r = 0; r < n; ++r) scores[r] += bias;
}

}  // namespace pagoda
