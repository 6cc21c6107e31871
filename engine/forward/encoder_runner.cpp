#include "engine/forward/encoder_runner.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <string>

#include "engine/forward/compute_arena.h"
#include "engine/forward/encoder_rows.h"
#include "engine/forward/pack_weights.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// q·k over `n` floats with eight partial sums combined in a fixed order: vectorizable, and the
// same bits wherever it runs.
float dot(const float* q, const float* k, int32_t n) {
  float lanes[8] = {};
  int32_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int32_t l = 0; l < 8; ++l) lanes[l] += q[d + l] * k[d + l];
  for (; d < n; ++d) lanes[d % 8] += q[d] * k[d];
  return ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
}

// One query row's attention over the `n` keys and values of its sequence ([n][head_dim] each)
// with ALiBi: score j = scale·q·k_j - slope·|i - j| as ggml_soft_max_ext adds llama.cpp's mask,
// then softmax and the weighted sum of the values, each in position order. `scores` holds n.
void alibi_attention(const float* q, const float* keys, const float* values, int32_t n, int32_t head_dim, int32_t i,
                     float scale, float slope, float* scores, float* out) {
  float max = -INFINITY;
  for (int32_t j = 0; j < n; ++j) {
    scores[j] = dot(q, keys + size_t(j) * head_dim, head_dim) * scale + slope * -float(std::abs(i - j));
    max = std::max(max, scores[j]);
  }
  double sum = 0.0;
  for (int32_t j = 0; j < n; ++j) sum += (scores[j] = std::exp(scores[j] - max));
  const float inv = float(1.0 / sum);
  std::fill_n(out, head_dim, 0.0f);
  for (int32_t j = 0; j < n; ++j) {
    const float p = scores[j] * inv;
    const float* v = values + size_t(j) * head_dim;
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
}

}  // namespace

EncoderRunner::EncoderRunner(const Model& model, int threads, bool sole_reader)
    : model_(model), arena_(compute_arena_threads(threads)) {
  const ModelConfig& c = model.config;
  if (!c.is_encoder()) throw Error(model.path + ": " + architecture_name(c.arch) + " is not an encoder");
  const EncoderWeights& e = model.weights.encoder;
  token_type0_.resize(size_t(c.dim));
  e.token_types.dequantize_row(0, token_type0_.data());
  if (!e.position_embd.empty()) positions_ = e.position_embd.to_f32();
  if (c.has_rope()) {
    rope_.emplace(c.context_length,
                  kernels::RopeParams{
                      c.head_dim(), c.rope_theta, c.rope_freq_scale, {}, kernels::RopeStyle::Neox, c.rope_dim, 1.0f});
  }
  for (int32_t h = 0; h < c.n_heads; ++h) alibi_slopes_.push_back(c.alibi_max_bias > 0.0f ? c.alibi_slope(h) : 0.0f);
  arena_.execute([&] {
    layers_.resize(size_t(c.n_layers));
    tbb::parallel_for(0, c.n_layers, [&](int l) {
      const LayerWeights& w = model.weights.layers[size_t(l)];
      PackedLayer& p = layers_[size_t(l)];
      p.qkv = pack_weights({&w.attn_q, &w.attn_k, &w.attn_v}, sole_reader);
      for (const auto* b : {&w.attn_q_bias, &w.attn_k_bias, &w.attn_v_bias})
        p.qkv_bias.insert(p.qkv_bias.end(), b->begin(), b->end());
      p.output = pack_weights({&w.attn_output}, sole_reader);
      // A gated FFN's gate and up in one GEMM: each row's gate values, then its up values.
      p.up = w.ffn_gate.empty() ? pack_weights({&w.ffn_up}, sole_reader)
                                : pack_weights({&w.ffn_gate, &w.ffn_up}, sole_reader);
      p.down = pack_weights({&w.ffn_down}, sole_reader);
    });
    if (!e.cls.empty()) cls_ = pack_weights({&e.cls}, sole_reader);
    if (!e.cls_output.empty()) cls_output_ = pack_weights({&e.cls_output}, sole_reader);
  });
}

void EncoderRunner::validate(std::span<const std::span<const int32_t>> sequences) const {
  const ModelConfig& c = model_.config;
  const int64_t positions = positions_.empty() ? c.context_length : int64_t(positions_.size()) / c.dim;
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

// Each token's row: its embedding + token type 0's row + (bert) its position's row, in that
// order (llama.cpp's inpL = tok + type, then + pos).
void EncoderRunner::embed_tokens(std::span<const std::span<const int32_t>> sequences) {
  const int32_t dim = model_.config.dim;
  const WeightTensor& embd = model_.weights.token_embd;
  tbb::parallel_for(size_t(0), sequences.size(), [&](size_t s) {
    const std::span<const int32_t> tokens = sequences[s];
    for (size_t i = 0; i < tokens.size(); ++i) {
      float* row = x_.data() + (size_t(sequence_start_[s]) + i) * dim;
      embd.dequantize_row(tokens[i], row);
      if (positions_.empty()) {
        for (int32_t j = 0; j < dim; ++j) row[j] = row[j] + token_type0_[size_t(j)];
        continue;
      }
      const float* position = positions_.data() + i * dim;
      for (int32_t j = 0; j < dim; ++j) row[j] = row[j] + token_type0_[size_t(j)] + position[j];
    }
  });
}

// Every row's attention over the rows of its own sequence. Keys and values are first laid out
// head-major, so that one head's keys (and values) of one sequence are one contiguous matrix: the
// GEMMs' operand, ALiBi's rows read in position order, or (with grouped query heads) one f32
// page for the paged kernel.
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
  const bool alibi = model_.config.alibi_max_bias > 0.0f;
  if (!alibi && group == 1) {
    // Each (head, sequence) as two GEMMs: scores = Q·Kᵀ, softmaxed row by row, then P·V. Every
    // output is one multiply-add chain in a fixed order (kernels/gemm.h), over the sequence's
    // own rows only, so it does not depend on the other sequences of the batch.
    const auto sequences = int32_t(sequence_start_.size()) - 1;
    tbb::parallel_for(0, kv_heads * sequences, [&](int32_t t) {
      const int32_t h = t / sequences, s = t % sequences;
      const int32_t first = sequence_start_[size_t(s)], n = sequence_start_[size_t(s) + 1] - first;
      const size_t at = (size_t(h) * rows + first) * head_dim;
      std::vector<float> scores(size_t(n) * size_t(n)), values_t(size_t(head_dim) * size_t(n));
      const kernels::PackedMatrix keys = kernels::PackedMatrix::pack(keys_.data() + at, n, head_dim);
      kernels::matmul(qkv_.data() + size_t(first) * qkv_dim + size_t(h) * head_dim, n, qkv_dim, keys, scores.data(), n);
      for (int32_t i = 0; i < n; ++i) {
        float* row = scores.data() + size_t(i) * size_t(n);
        for (int32_t j = 0; j < n; ++j) row[j] *= scale;
        kernels::softmax(row, n);
      }
      for (int32_t j = 0; j < n; ++j)
        for (int32_t d = 0; d < head_dim; ++d)
          values_t[size_t(d) * size_t(n) + size_t(j)] = values_[at + size_t(j) * head_dim + size_t(d)];
      const kernels::PackedMatrix values = kernels::PackedMatrix::pack(values_t.data(), head_dim, n);
      kernels::matmul(scores.data(), n, n, values, att_.data() + size_t(first) * q_dim + size_t(h) * head_dim, q_dim);
    });
    return;
  }
  const int32_t tasks = kv_heads * rows;
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, tasks, 4), [&](const tbb::blocked_range<int32_t>& range) {
    std::vector<float> scores;
    for (int32_t t = range.begin(); t < range.end(); ++t) {
      const int32_t h = t / rows, r = t % rows;
      const int32_t s = row_sequence_[size_t(r)], first = sequence_start_[size_t(s)];
      const int32_t n = sequence_start_[size_t(s) + 1] - first;
      const size_t at = (size_t(h) * rows + first) * head_dim;
      const auto* k = reinterpret_cast<const std::byte*>(keys_.data() + at);
      const auto* v = reinterpret_cast<const std::byte*>(values_.data() + at);
      const size_t q = size_t(r) * qkv_dim + size_t(h) * group * head_dim;
      if (alibi) {
        // ALiBi's per-position bias is not in the paged kernel; this path is plain and
        // reduces in a fixed order, so it stays batch invariant (group is 1 for encoders).
        scores.resize(size_t(n));
        alibi_attention(qkv_.data() + q, keys_.data() + at, values_.data() + at, n, head_dim, r - first, scale,
                        alibi_slopes_[size_t(h)], scores.data(),
                        att_.data() + size_t(r) * q_dim + size_t(h) * head_dim);
        continue;
      }
      kernels::paged_attention(KvCacheType::F32, qkv_.data() + q, group, head_dim, n, &k, &v, n, scale,
                               att_.data() + size_t(r) * q_dim + size_t(h) * group * head_dim);
    }
  });
}

// What comes between the Q/K/V projection and attention: jina-bert-v2's LayerNorms of Q and of
// K (each over all heads of a row), nomic-bert's RoPE at each row's position in its sequence.
void EncoderRunner::project_qk(const LayerWeights& w, int32_t rows) {
  const ModelConfig& c = model_.config;
  const int32_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  if (!w.attn_q_norm.empty())
    layer_norm_rows(qkv_.data(), qkv_.data(), rows, q_dim, w.attn_q_norm, w.attn_q_norm_bias, c.norm_eps, qkv_dim);
  if (!w.attn_k_norm.empty()) {
    layer_norm_rows(qkv_.data() + q_dim, qkv_.data() + q_dim, rows, kv_dim, w.attn_k_norm, w.attn_k_norm_bias,
                    c.norm_eps, qkv_dim);
  }
  if (!rope_) return;
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      const int32_t position = r - sequence_start_[size_t(row_sequence_[size_t(r)])];
      float* row = qkv_.data() + size_t(r) * qkv_dim;
      rope_->apply(row, c.n_heads, position);
      rope_->apply(row + q_dim, c.n_kv_heads, position);
    }
  });
}

// The FFN's hidden rows into ffn_: bert's GELU(up·x + b), or act(gate·x) · (up·x) with SiLU
// (nomic-bert) or GELU (jina-bert-v2).
void EncoderRunner::feed_forward(const PackedLayer& p, const LayerWeights& w, int32_t rows) {
  const ModelConfig& c = model_.config;
  const int32_t dim = c.dim, ffn = c.ffn_dim;
  if (!c.has_gated_encoder_ffn()) {
    kernels::matmul(x_.data(), rows, dim, p.up, ffn_.data(), ffn);
    add_bias_rows(ffn_.data(), rows, ffn, w.ffn_up_bias);
  } else {
    kernels::matmul(x_.data(), rows, dim, p.up, gate_up_.data(), 2 * ffn);
  }
  const bool silu = c.arch == Architecture::NomicBert;
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      float* out = ffn_.data() + size_t(r) * ffn;
      if (!c.has_gated_encoder_ffn()) {
        kernels::gelu(out, out, ffn);
        continue;
      }
      float* gate = gate_up_.data() + size_t(r) * 2 * ffn;
      if (silu) {
        kernels::swiglu(gate, gate + ffn, out, ffn);
      } else {
        kernels::gelu(gate, gate, ffn);
        for (int32_t j = 0; j < ffn; ++j) out[j] = gate[j] * gate[ffn + j];
      }
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
  if (c.has_gated_encoder_ffn()) gate_up_.resize(size_t(rows) * 2 * ffn);

  const EncoderWeights& e = model_.weights.encoder;
  arena_.execute([&] {
    embed_tokens(sequences);
    layer_norm_rows(x_.data(), x_.data(), rows, dim, e.token_embd_norm, e.token_embd_norm_bias, c.norm_eps);
    for (int32_t l = 0; l < c.n_layers; ++l) {
      const PackedLayer& p = layers_[size_t(l)];
      const LayerWeights& w = model_.weights.layers[size_t(l)];
      kernels::matmul(x_.data(), rows, dim, p.qkv, qkv_.data(), qkv_dim);
      add_bias_rows(qkv_.data(), rows, qkv_dim, p.qkv_bias);
      project_qk(w, rows);
      attention(rows);
      // Post-norm blocks: x = LN(x + attention), then x = LN(x + FFN(x)).
      kernels::matmul(att_.data(), rows, q_dim, p.output, sublayer_.data(), dim);
      add_bias_rows(sublayer_.data(), rows, dim, w.attn_output_bias, x_.data());
      if (w.attn_norm_2.empty()) {
        layer_norm_rows(sublayer_.data(), x_.data(), rows, dim, w.attn_output_norm, w.attn_output_norm_bias,
                        c.norm_eps);
      } else {
        // jina-bert-v2: LN2(LN(x + attention) + x), llama.cpp's attn_norm_2.
        layer_norm_rows(sublayer_.data(), sublayer_.data(), rows, dim, w.attn_output_norm, w.attn_output_norm_bias,
                        c.norm_eps);
        add_bias_rows(sublayer_.data(), rows, dim, {}, x_.data());
        layer_norm_rows(sublayer_.data(), x_.data(), rows, dim, w.attn_norm_2, w.attn_norm_2_bias, c.norm_eps);
      }
      feed_forward(p, w, rows);
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
  if (!has_rank_head()) throw Error("encoder: the model has no rank head (cls): it is not a reranker");
  const int32_t dim = model_.config.dim;
  const EncoderWeights& e = model_.weights.encoder;
  const float* x = rows;
  int32_t width = dim;
  std::vector<float> dense, out;
  arena_.execute([&] {
    if (!e.cls.empty()) {
      width = int32_t(e.cls.rows);  // dim, or 1 when the tanh is the score
      dense.resize(size_t(n) * size_t(width));
      kernels::matmul(rows, n, dim, cls_, dense.data(), width);
      for (int32_t r = 0; r < n; ++r) {
        float* row = dense.data() + size_t(r) * size_t(width);
        for (int32_t j = 0; j < width; ++j) row[j] = std::tanh(row[j] + e.cls_bias[size_t(j)]);
      }
      x = dense.data();
    }
    if (e.cls_output.empty()) {
      for (int32_t r = 0; r < n; ++r) scores[r] = x[size_t(r) * size_t(width)];
      return;
    }
    // The first label's output is the score, as llama-server reads it.
    const auto labels = int32_t(e.cls_output.rows);
    out.resize(size_t(n) * size_t(labels));
    kernels::matmul(x, n, width, cls_output_, out.data(), labels);
    const float bias = e.cls_output_bias.empty() ? 0.0f : e.cls_output_bias[0];
    for (int32_t r = 0; r < n; ++r) scores[r] = out[size_t(r) * size_t(labels)] + bias;
  });
}

}  // namespace pagoda
