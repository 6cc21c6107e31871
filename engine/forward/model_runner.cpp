#include "engine/forward/model_runner.h"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <iterator>
#include <string>

#include "engine/forward/compute_arena.h"
#include "engine/forward/mrope_positions.h"
#include "engine/forward/pack_weights.h"
#include "engine/gguf/ggml_types.h"
#include "kernels/attention.h"
#include "kernels/kv_rows.h"
#include "kernels/ops.h"
#include "kernels/rope.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// Query tokens per attention task: small enough to spread a long prefill chunk over the cores.
constexpr int32_t kAttentionChunk = 16;
// Multiply-adds of a layer's attention below which it runs on the calling thread.
constexpr double kParallelAttentionWork = 64 * 1024;

// The rotation of every position in `layer`, from the model's hyperparameters and frequency
// factors.
kernels::RopeParams rope_params(const Model& model, int32_t layer) {
  const ModelConfig& c = model.config;
  return {c.head_dim(),
          c.layer_rope_theta(layer),
          c.layer_rope_freq_scale(layer),
          model.weights.rope_freqs,
          c.rope_style(),
          c.rotated_dims(),
          c.rope_attn_factor};
}

// x[r][i] += add[r][i] for rows r < n of `dim` values.
void add_rows(float* x, const float* add, int32_t n, int32_t dim) {
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, n, 16), [&](const tbb::blocked_range<int32_t>& r) {
    for (size_t i = size_t(r.begin()) * dim; i < size_t(r.end()) * dim; ++i) x[i] += add[i];
  });
}

}  // namespace

ModelRunner::ModelRunner(const Model& model, int threads, bool sole_reader)
    : model_(model), arena_(compute_arena_threads(threads)), page_pointers_(size_t(arena_.max_concurrency())) {
  const ModelConfig& c = model.config;
  if (c.is_encoder()) {
    // The runner's attention is causal over a KV cache; an encoder's is not, so nothing it
    // computed would be right. EncoderRunner runs encoders.
    throw Error(model.path + ": " + architecture_name(c.arch) +
                " is an encoder, which the decoder's forward pass cannot run (EncoderRunner runs it)");
  }
  // Layers share a table unless their RoPE base or scale differ (Gemma 3's sliding layers).
  for (int32_t l = 0; l < c.n_layers; ++l) {
    int32_t table = -1;
    for (int32_t m = 0; m < l && table < 0; ++m) {
      if (c.layer_rope_theta(m) == c.layer_rope_theta(l) && c.layer_rope_freq_scale(m) == c.layer_rope_freq_scale(l))
        table = layer_rope_[m];
    }
    if (table < 0) {
      table = int32_t(ropes_.size());
      ropes_.emplace_back(c.context_length, rope_params(model, l));
    }
    layer_rope_.push_back(table);
  }
  arena_.execute([&] {
    layers_.resize(c.n_layers);
    tbb::parallel_for(0, c.n_layers, [&](int l) {
      const LayerWeights& w = model.weights.layers[l];
      layers_[l].qkv = pack_weights({&w.attn_q, &w.attn_k, &w.attn_v}, sole_reader);
      if (c.has_qkv_bias()) {
        std::vector<float>& bias = layers_[l].qkv_bias;
        for (const auto* b : {&w.attn_q_bias, &w.attn_k_bias, &w.attn_v_bias})
          bias.insert(bias.end(), b->begin(), b->end());
      }
      layers_[l].output = pack_weights({&w.attn_output}, sole_reader);
      if (c.has_experts()) {
        layers_[l].moe = std::make_unique<MoeFfn>(c, w, sole_reader);
      } else {
        layers_[l].gate_up = pack_weights({&w.ffn_gate, &w.ffn_up}, sole_reader);
        layers_[l].down = pack_weights({&w.ffn_down}, sole_reader);
      }
    });
    // A tied classifier's bytes are the token embedding's, which embed() reads on.
    classifier_ = pack_weights({&model.weights.output},
                               sole_reader && model.weights.output.data != model.weights.token_embd.data);
    if (!model.weights.rank_output.empty()) rank_head_ = pack_weights({&model.weights.rank_output}, sole_reader);
  });
  const WeightTensor& embd = model.weights.token_embd;
  read_embedding_rows_ = embd.mapped && model.file && model.file->maps_file() &&
                         (embd.data != model.weights.output.data || kernels::copied_at_make(embd.type));
}

void ModelRunner::rank_scores(const float* rows, int32_t n, float* scores) {
  const WeightTensor& head = model_.weights.rank_output;
  if (head.empty()) throw Error(model_.path + ": the model has no rank head (cls.output): it is not a reranker");
  const auto labels = int32_t(head.rows);
  rank_logits_.resize(size_t(n) * size_t(labels));
  arena_.execute([&] { kernels::matmul(rows, n, model_.config.dim, rank_head_, rank_logits_.data(), labels); });
  for (int32_t r = 0; r < n; ++r) {
    const float* logits = rank_logits_.data() + size_t(r) * size_t(labels);
    if (labels == 1) {
      scores[r] = logits[0];
      continue;
    }
    const float top = *std::max_element(logits, logits + labels);
    double sum = 0.0;
    for (int32_t j = 0; j < labels; ++j) sum += std::exp(double(logits[j]) - double(top));
    scores[r] = float(std::exp(double(logits[0]) - double(top)) / sum);
  }
}

void ModelRunner::embed(int32_t token, float* out) {
  const WeightTensor& embd = model_.weights.token_embd;
  if (!read_embedding_rows_) {
    embd.dequantize_row(token, out);
  } else {
    embedding_row_.resize(embd.row_bytes());
    const std::span<const std::byte> row = embd.row(token);
    model_.file->read(size_t(row.data() - model_.file->bytes().data()), embedding_row_);
    dequantize(embd.type, embedding_row_, {out, size_t(embd.cols)});
  }
  const float scale = model_.config.embedding_scale();  // Gemma's √dim
  if (scale != 1.0f) {
    for (int64_t i = 0; i < embd.cols; ++i) out[i] *= scale;
  }
}

void ModelRunner::validate(const Batch& batch, const KvView& kv) const {
  const ModelConfig& c = model_.config;
  if (kv.layout.n_layers != c.n_layers || kv.layout.n_kv_heads != c.n_kv_heads || kv.layout.head_dim != c.head_dim()) {
    throw Error("forward: the KV cache layout does not match the model");
  }
  const int32_t tpp = kv.layout.tokens_per_page;
  for (const BatchEntry& e : batch.entries) {
    const int64_t end = int64_t(e.n_cached) + int64_t(e.tokens.size());
    if (e.tokens.empty() || e.n_cached < 0 || !e.block_table) throw Error("forward: an empty or malformed batch entry");
    if (end > c.context_length) {
      throw Error("forward: position " + std::to_string(end - 1) + " is past the context length " +
                  std::to_string(c.context_length));
    }
    const BlockTable& table = *e.block_table;
    if (table.groups() != kv.layout.n_groups() || table.tokens_per_page() != tpp) {
      throw Error("forward: the block table does not match the KV cache layout");
    }
    if (end > table.capacity_tokens())
      throw Error("forward: the block table has no page for position " + std::to_string(end - 1));
    // Attention reads each group's pages from the first one the entry's first token sees.
    for (int32_t g = 0; g < table.groups(); ++g) {
      for (auto i = size_t(table.first_live_page(g, e.n_cached)); i * tpp < size_t(end); ++i) {
        if (table.pages(g)[i] == BlockTable::kHole) {
          throw Error("forward: position " + std::to_string(i * tpp) + " is needed but its page was given back");
        }
      }
    }
    if (e.lora && c.has_experts()) throw Error("forward: LoRA adapters on mixture-of-experts models are not supported");
    for (size_t r = 0; r < e.embeddings.size(); ++r) {
      const EmbeddingRun& run = e.embeddings[r];
      if (run.count <= 0 || !run.rows || run.position < 0 ||
          (r > 0 && run.position < e.embeddings[r - 1].position + e.embeddings[r - 1].count)) {
        throw Error("forward: embedding runs must be non-empty, hold rows, and be sorted and disjoint");
      }
      // Cut across steps, its first queries would miss its later keys.
      const int64_t run_end = int64_t(run.position) + run.count;
      if (run.bidirectional && run.position < end && run_end > e.n_cached &&
          (run.position < e.n_cached || run_end > end)) {
        throw Error("forward: an embedding run that attends both ways must be computed whole in one step");
      }
    }
    for (size_t g = 0; g < e.image_grids.size(); ++g) {
      const ImageGrid& grid = e.image_grids[g];
      const ImageGrid* before = g > 0 ? &e.image_grids[g - 1] : nullptr;
      if (grid.rows <= 0 || grid.cols <= 0 || grid.position < 0 || grid.rows > c.context_length ||
          grid.cols > c.context_length || int64_t(grid.rows) * grid.cols > c.context_length ||
          (before && grid.position < int64_t(before->position) + int64_t(before->rows) * before->cols)) {
        throw Error("forward: image grids must be non-empty, fit the context, and be sorted and disjoint");
      }
    }
    for (int32_t t : e.tokens) {
      if (t < 0 || t >= c.vocab_size)
        throw Error("forward: token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
}

void ModelRunner::prepare(const Batch& batch) {
  tokens_.clear();
  entry_start_.clear();
  mrope_positions_.clear();
  logit_rows_.clear();
  hidden_rows_.clear();
  attention_work_ = 0.0;
  for (int32_t e = 0; e < int32_t(batch.entries.size()); ++e) {
    const BatchEntry& entry = batch.entries[e];
    entry_start_.push_back(int32_t(tokens_.size()));
    for (int32_t i = 0; i < int32_t(entry.tokens.size()); ++i) {
      tokens_.push_back({e, entry.n_cached + i});
      if (model_.config.has_mrope()) mrope_positions_.push_back(mrope_position(entry.image_grids, entry.n_cached + i));
      attention_work_ += 2.0 * (entry.n_cached + i + 1) * model_.config.n_heads * model_.config.head_dim();
    }
    std::vector<int32_t>& rows = entry.hidden ? hidden_rows_ : logit_rows_;
    if (entry.all_logits) {
      for (int32_t r = entry_start_.back(); r < int32_t(tokens_.size()); ++r) rows.push_back(r);
    } else if (entry.needs_logits) {
      rows.push_back(int32_t(tokens_.size()) - 1);
    }
  }
  entry_start_.push_back(int32_t(tokens_.size()));
  attention_chunks_.clear();
  for (size_t e = 0; e + 1 < entry_start_.size(); ++e) {
    // Chunks end at the edges of bidirectional runs, so each chunk's tokens are all in one run
    // or all outside every run; rows are independent, so where chunks end changes no bits.
    const std::span<const EmbeddingRun> runs = batch.entries[e].embeddings;
    auto run = runs.begin();
    for (int32_t t = entry_start_[e]; t < entry_start_[e + 1];) {
      AttentionChunk chunk{t, std::min(t + kAttentionChunk, entry_start_[e + 1])};
      const int32_t position = tokens_[t].position;  // the entry's rows are consecutive positions
      while (run != runs.end() && (!run->bidirectional || run->position + run->count <= position)) ++run;
      if (run != runs.end() && run->position <= position) {
        chunk.bidirectional_begin = run->position;
        chunk.bidirectional_end = run->position + run->count;
        chunk.end = std::min(chunk.end, t + chunk.bidirectional_end - position);
      } else if (run != runs.end()) {
        chunk.end = std::min(chunk.end, t + run->position - position);
      }
      attention_chunks_.push_back(chunk);
      t = chunk.end;
    }
  }

  // Rows grouped by adapter, wherever their entries sit in the batch, so each adapter's rows
  // share its weight loads; the grouping never changes a row's arithmetic.
  lora_entries_.clear();
  for (size_t e = 0; e < batch.entries.size(); ++e)
    if (batch.entries[e].lora) lora_entries_.push_back(int32_t(e));
  std::stable_sort(lora_entries_.begin(), lora_entries_.end(), [&](int32_t a, int32_t b) {
    return std::less<const LoraWeights*>()(batch.entries[a].lora, batch.entries[b].lora);
  });
  lora_rows_.clear();
  lora_segments_.clear();
  lora_stride_ = 0;
  for (int32_t e : lora_entries_) {
    const LoraWeights* lora = batch.entries[e].lora;
    const int32_t begin = int32_t(lora_rows_.size());
    for (int32_t r = entry_start_[e]; r < entry_start_[e + 1]; ++r) lora_rows_.push_back(r);
    if (!lora_segments_.empty() && lora_segments_.back().lora == lora) {
      lora_segments_.back().end = int32_t(lora_rows_.size());
    } else {
      lora_segments_.push_back({begin, int32_t(lora_rows_.size()), lora});
    }
    lora_stride_ = std::max(lora_stride_, lora->max_rank());
  }

  const ModelConfig& c = model_.config;
  const size_t n = tokens_.size();
  lora_tmp_.resize(lora_rows_.size() * size_t(lora_stride_));
  const size_t q_dim = size_t(c.n_heads) * c.head_dim();
  x_.resize(n * c.dim);
  xb_.resize(n * c.dim);
  qkv_.resize(n * (q_dim + 2 * c.kv_dim()));
  att_.resize(n * q_dim);
  ffn_.resize(n * 2 * c.ffn_dim);
  hidden_.resize(n * c.ffn_dim);
  if (c.has_post_norms() || c.has_experts()) sublayer_.resize(n * c.dim);
  final_.resize((logit_rows_.size() + hidden_rows_.size()) * c.dim);
}

void ModelRunner::forward(const Batch& batch, const KvView& kv, std::vector<float>& logits) {
  forward(batch, kv, logits, unused_hidden_);
}

void ModelRunner::forward(const Batch& batch, const KvView& kv, std::vector<float>& logits,
                          std::vector<float>& hidden) {
  if (auto lost = weights_lost(model_)) throw Error(*lost);
  validate(batch, kv);
  prepare(batch);
  const ModelConfig& c = model_.config;
  const int32_t n = int32_t(tokens_.size());
  const int32_t dim = c.dim, ffn = c.ffn_dim, q_dim = c.q_dim();

  double weight_bytes = logit_rows_.empty() ? 0.0 : double(classifier_.encoded_bytes());
  arena_.execute([&] {
    for (int32_t e = 0; e < int32_t(batch.entries.size()); ++e) {
      const BatchEntry& entry = batch.entries[e];
      auto run = entry.embeddings.begin();
      for (size_t i = 0; i < entry.tokens.size(); ++i) {
        float* row = x_.data() + (size_t(entry_start_[e]) + i) * dim;
        const int32_t position = entry.n_cached + int32_t(i);
        while (run != entry.embeddings.end() && run->position + run->count <= position) ++run;
        if (run != entry.embeddings.end() && run->position <= position) {
          std::copy_n(run->rows + size_t(position - run->position) * dim, dim, row);
        } else {
          embed(entry.tokens[i], row);
        }
      }
    }
    for (int32_t l = 0; l < c.n_layers; ++l) {
      const LayerWeights& w = model_.weights.layers[l];
      const PackedLayer& p = layers_[l];
      kernels::rmsnorm_rows(x_.data(), dim, w.attn_norm.data(), xb_.data(), dim, n, dim, c.norm_eps);
      weight_bytes += double(p.qkv.encoded_bytes() + p.output.encoded_bytes());
      kernels::matmul(xb_.data(), n, dim, p.qkv, qkv_.data(), p.qkv.rows());
      apply_lora(l,
                 {{LoraProjection::Q, qkv_.data()},
                  {LoraProjection::K, qkv_.data() + q_dim},
                  {LoraProjection::V, qkv_.data() + q_dim + c.kv_dim()}},
                 xb_.data(), dim, p.qkv.rows());
      attention_layer(batch, kv, l);
      // Gemma normalises each sublayer's output before the residual add; the others add it
      // straight onto x.
      const bool post = c.has_post_norms();
      float* const attn_out = post ? sublayer_.data() : x_.data();
      if (post) kernels::matmul(att_.data(), n, p.output.cols(), p.output, attn_out, dim);
      else kernels::matmul_accumulate(att_.data(), n, p.output.cols(), p.output, attn_out, dim);
      apply_lora(l, {{LoraProjection::Output, attn_out}}, att_.data(), q_dim, dim);
      if (post) {
        kernels::rmsnorm_rows(attn_out, dim, w.attn_post_norm.data(), attn_out, dim, n, dim, c.norm_eps);
        add_rows(x_.data(), attn_out, n, dim);
      }

      kernels::rmsnorm_rows(x_.data(), dim, w.ffn_norm.data(), xb_.data(), dim, n, dim, c.norm_eps);
      if (p.moe) {
        p.moe->forward(xb_.data(), dim, n, sublayer_.data(), dim, moe_scratch_);
        weight_bytes += p.moe->bytes_read(moe_scratch_);
        add_rows(x_.data(), sublayer_.data(), n, dim);
        continue;
      }
      weight_bytes += double(p.gate_up.encoded_bytes() + p.down.encoded_bytes());
      kernels::matmul(xb_.data(), n, dim, p.gate_up, ffn_.data(), 2 * ffn);
      apply_lora(l, {{LoraProjection::Gate, ffn_.data()}, {LoraProjection::Up, ffn_.data() + ffn}}, xb_.data(), dim,
                 2 * ffn);
      tbb::parallel_for(tbb::blocked_range<int32_t>(0, n, 8), [&](const tbb::blocked_range<int32_t>& r) {
        for (int32_t t = r.begin(); t < r.end(); ++t) {
          const float* gate = ffn_.data() + size_t(t) * 2 * ffn;
          if (c.gelu_ffn()) kernels::geglu(gate, gate + ffn, hidden_.data() + size_t(t) * ffn, ffn);
          else kernels::swiglu(gate, gate + ffn, hidden_.data() + size_t(t) * ffn, ffn);
        }
      });
      float* const ffn_out = post ? sublayer_.data() : x_.data();
      if (post) kernels::matmul(hidden_.data(), n, ffn, p.down, ffn_out, dim);
      else kernels::matmul_accumulate(hidden_.data(), n, ffn, p.down, ffn_out, dim);
      apply_lora(l, {{LoraProjection::Down, ffn_out}}, hidden_.data(), ffn, dim);
      if (post) {
        kernels::rmsnorm_rows(ffn_out, dim, w.ffn_post_norm.data(), ffn_out, dim, n, dim, c.norm_eps);
        add_rows(x_.data(), ffn_out, n, dim);
      }
    }

    // The logit rows, then the hidden rows, normed together (row by row); only the first go on
    // through the classifier.
    const int32_t rows = int32_t(logit_rows_.size());
    const int32_t hidden_rows = int32_t(hidden_rows_.size());
    for (int32_t r = 0; r < rows + hidden_rows; ++r) {
      const int32_t from = r < rows ? logit_rows_[r] : hidden_rows_[r - rows];
      std::copy_n(x_.begin() + size_t(from) * dim, dim, final_.begin() + size_t(r) * dim);
    }
    kernels::rmsnorm_rows(final_.data(), dim, model_.weights.output_norm.data(), final_.data(), dim, rows + hidden_rows,
                          dim, c.norm_eps);
    hidden.assign(final_.begin() + ptrdiff_t(rows) * dim, final_.begin() + ptrdiff_t(rows + hidden_rows) * dim);
    logits.resize(size_t(rows) * c.vocab_size);
    kernels::matmul(final_.data(), rows, dim, classifier_, logits.data(), c.vocab_size);
    if (c.final_softcap > 0.0f) {  // Gemma 2
      for (float& z : logits) z = c.final_softcap * std::tanh(z / c.final_softcap);
    }
  });
  last_step_weight_bytes_ = weight_bytes;
  // The file may have been truncated during the step: then it computed on zeros.
  if (auto lost = weights_lost(model_)) throw Error(*lost);
}

void ModelRunner::attention_layer(const Batch& batch, const KvView& kv, int32_t layer) {
  const ModelConfig& c = model_.config;
  const int32_t head_dim = c.head_dim(), group = c.group_size();
  const int32_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), row = q_dim + 2 * kv_dim;
  const int32_t tpp = kv.layout.tokens_per_page;
  const int32_t n = int32_t(tokens_.size());
  const LayerWeights& w = model_.weights.layers[layer];
  const std::vector<float>& bias = layers_[layer].qkv_bias;
  const kernels::RopeTable& rope = ropes_[size_t(layer_rope_[size_t(layer)])];
  const int32_t kv_group = kv.layout.group_of(layer);

  // Per token: the Q/K/V biases (after the LoRA deltas, as llama.cpp adds them), the per-head
  // Q/K norms, RoPE on Q and K, then K and V straight into their page slots.
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, n, 4), [&](const tbb::blocked_range<int32_t>& r) {
    for (int32_t t = r.begin(); t < r.end(); ++t) {
      const TokenRef ref = tokens_[t];
      float* q = qkv_.data() + size_t(t) * row;
      float* k = q + q_dim;
      const float* v = k + kv_dim;
      for (size_t i = 0; i < bias.size(); ++i) q[i] += bias[i];
      if (c.has_qk_norm()) {
        for (int32_t h = 0; h < c.n_heads; ++h)
          kernels::rmsnorm(q + h * head_dim, w.attn_q_norm.data(), q + h * head_dim, head_dim, c.norm_eps);
        for (int32_t h = 0; h < c.n_kv_heads; ++h)
          kernels::rmsnorm(k + h * head_dim, w.attn_k_norm.data(), k + h * head_dim, head_dim, c.norm_eps);
      }
      if (c.has_mrope()) {
        rope.apply_sections(q, c.n_heads, mrope_positions_[size_t(t)], c.rope_sections);
        rope.apply_sections(k, c.n_kv_heads, mrope_positions_[size_t(t)], c.rope_sections);
      } else {
        rope.apply(q, c.n_heads, ref.position);
        rope.apply(k, c.n_kv_heads, ref.position);
      }
      const BlockTable& bt = *batch.entries[ref.entry].block_table;
      const int32_t page = bt.pages(kv_group)[ref.position / tpp];
      const size_t slot = size_t(ref.position % tpp) * kv.layout.row_bytes();
      for (int32_t h = 0; h < c.n_kv_heads; ++h) {  // converted to the cache's element type
        kernels::store_kv_row(kv.layout.dtype, k + h * head_dim, head_dim, kv.block(page, layer, 0, h) + slot);
        kernels::store_kv_row(kv.layout.dtype, v + h * head_dim, head_dim, kv.block(page, layer, 1, h) + slot);
      }
    }
  });

  // One task per (chunk of an entry's query tokens, KV head); each query token attends to its
  // own prefix in position order, the chunk's tokens sharing each block of keys and values.
  const float scale = c.attention_scale();
  const kernels::AttentionVariant variant{c.is_sliding(layer) ? c.sliding_window : 0, c.attn_softcap};
  const int32_t n_items = int32_t(attention_chunks_.size());
  auto attend = [&](const tbb::blocked_range<int32_t>& r) {
    PagePointers& pointers = page_pointers_[size_t(tbb::this_task_arena::current_thread_index())];
    for (int32_t item = r.begin(); item < r.end(); ++item) {
      const AttentionChunk chunk = attention_chunks_[item / c.n_kv_heads];
      const int32_t h = item % c.n_kv_heads;
      const BatchEntry& entry = batch.entries[tokens_[chunk.begin].entry];
      const std::vector<int32_t>& pages = entry.block_table->pages(kv_group);
      // A bidirectional run's queries read on to its last key, which this step has written.
      const int32_t last = std::max(tokens_[chunk.end - 1].position, chunk.bidirectional_end - 1);
      const int32_t n_pages = last / tpp + 1;
      pointers.k.resize(n_pages);
      pointers.v.resize(n_pages);
      // Holes (pages given back, wholly before the chunk's windows) are never read.
      for (int32_t i = 0; i < n_pages; ++i) {
        pointers.k[i] = pages[i] == BlockTable::kHole ? nullptr : kv.block(pages[i], layer, 0, h);
        pointers.v[i] = pages[i] == BlockTable::kHole ? nullptr : kv.block(pages[i], layer, 1, h);
      }
      const float* q = qkv_.data() + size_t(chunk.begin) * row + size_t(h) * group * head_dim;
      float* out = att_.data() + size_t(chunk.begin) * q_dim + size_t(h) * group * head_dim;
      kernels::AttentionVariant chunk_variant = variant;
      chunk_variant.bidirectional_begin = chunk.bidirectional_begin;
      chunk_variant.bidirectional_end = chunk.bidirectional_end;
      kernels::paged_attention_tokens(kv.layout.dtype, q, size_t(row), chunk.end - chunk.begin, group, head_dim,
                                      tokens_[chunk.begin].position + 1, pointers.k.data(), pointers.v.data(), tpp,
                                      scale, out, size_t(q_dim), chunk_variant);
    }
  };
  const tbb::blocked_range<int32_t> all(0, n_items * c.n_kv_heads);
  // A small step's attention (one short sequence, say) costs less than waking the workers.
  if (attention_work_ < kParallelAttentionWork) {
    attend(all);
  } else {
    tbb::parallel_for(all, attend);
  }
}

void ModelRunner::apply_lora(int32_t layer, std::initializer_list<LoraOut> outs, const float* in, int ld_in,
                             int ld_out) {
  if (lora_segments_.empty()) return;
  // One fused pass over every row of every adapter (Punica's SGMV) for all the projections of
  // `in`: each row's delta is computed the same way whatever else is in the batch.
  const size_t n_segments = lora_segments_.size();
  lora_calls_.clear();
  kernels::LoraOutput calls[3];
  assert(outs.size() <= std::size(calls));
  int n_calls = 0;
  for (const LoraOut& o : outs) {
    for (const LoraSegment& seg : lora_segments_)
      lora_calls_.push_back({seg.begin, seg.end, seg.lora->target(layer, o.projection)});
    calls[n_calls++] = {nullptr, o.out, ld_out};
  }
  for (int i = 0; i < n_calls; ++i) calls[i].segments = lora_calls_.data() + size_t(i) * n_segments;
  kernels::lora_sgmv(in, ld_in, lora_rows_.data(), int(n_segments), calls, n_calls, lora_tmp_.data(), lora_stride_);
}

double ModelRunner::flops(const Batch& batch) const {
  const ModelConfig& c = model_.config;
  const double q_dim = double(c.n_heads) * c.head_dim();
  const double ffn_flops =
      layers_.empty() || !layers_[0].moe ? 2.0 * 3.0 * c.dim * c.ffn_dim : layers_[0].moe->row_flops();
  const double per_token_layer = 2.0 * c.dim * (q_dim + 2.0 * c.kv_dim()) + 2.0 * q_dim * c.dim + ffn_flops;
  double total = 0.0;
  for (const BatchEntry& e : batch.entries) {
    for (size_t i = 0; i < e.tokens.size(); ++i) {
      const double ctx = double(e.n_cached) + double(i) + 1.0;
      total += c.n_layers * (per_token_layer + 4.0 * q_dim * ctx);
    }
    const size_t logit_rows = e.hidden ? 0 : e.all_logits ? e.tokens.size() : e.needs_logits ? 1 : 0;
    total += 2.0 * c.dim * c.vocab_size * double(logit_rows);
  }
  return total;
}

}  // namespace pagoda
