#pragma once
// The forward pass of an encoder (bert, nomic-bert, jina-bert-v2): whole sequences in, final
// hidden states out, with no KV cache. Every token of a sequence attends to every token of it
// (non-causal), so a sequence is always computed whole in one pass; one call runs many
// sequences together, their tokens stacked into the rows of each GEMM.
//
// Batch invariance: a sequence's hidden states are bit-for-bit the same whatever else is in
// the call and whatever the thread count: each GEMM output depends only on its row (kernels/
// gemm.h, kernels/quant/weight_matrix.h), LayerNorm reduces each row alone in order, RoPE turns
// a row by its position in its sequence from one table, and each token's attention reads its
// own sequence's keys and values in position order (the paged kernel; for ALiBi, which that
// kernel does not add, a plain loop here with the same property).

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <tbb/task_arena.h>

#include "engine/model/model.h"
#include "kernels/quant/weight_matrix.h"
#include "kernels/rope.h"

namespace pagoda {

class EncoderRunner {
 public:
  // Packs the model's matrices for the active kernels. `threads` bounds the task arena (0 = all
  // cores); with `sole_reader` the packed matrices' file bytes are dropped as ModelRunner does.
  // Throws pagoda::Error unless the model is an encoder. The Model must outlive the runner.
  EncoderRunner(const Model& model, int threads = 0, bool sole_reader = false);

  // The final hidden states of each of `sequences` (positions 0..n-1, token type 0, as
  // llama.cpp feeds them): Σn rows of dim floats in `hidden`, sequence after sequence. Throws
  // pagoda::Error for an empty sequence, one longer than the context length, an id outside the
  // vocabulary, or weights lost before or during the pass.
  void forward(std::span<const std::span<const int32_t>> sequences, std::vector<float>& hidden);

  // A reranker's score of each of `n` rows of dim floats (each a sequence's first row): the
  // rank head tanh(cls·x + b) when it has cls, then cls_output's first output (jina-reranker has
  // no cls_output: the one tanh is the score). Throws pagoda::Error without a rank head.
  void rank_scores(const float* rows, int32_t n, float* scores);
  bool has_rank_head() const {
    return !model_.weights.encoder.cls.empty() || !model_.weights.encoder.cls_output.empty();
  }

  const ModelConfig& config() const { return model_.config; }
  int threads() const { return arena_.max_concurrency(); }

 private:
  struct PackedLayer {
    kernels::WeightMatrix qkv;    // [q_dim + 2 kv_dim][dim]
    std::vector<float> qkv_bias;  // [q_dim + 2 kv_dim], or empty (nomic-bert)
    kernels::WeightMatrix output;
    kernels::WeightMatrix up;  // [ffn][dim]; a gated FFN's gate and up: [2 ffn][dim]
    kernels::WeightMatrix down;
  };

  void validate(std::span<const std::span<const int32_t>> sequences) const;
  void embed_tokens(std::span<const std::span<const int32_t>> sequences);
  void project_qk(const LayerWeights& w, int32_t rows);
  void attention(int32_t rows);
  void feed_forward(const PackedLayer& p, const LayerWeights& w, int32_t rows);

  const Model& model_;
  tbb::task_arena arena_;
  std::vector<PackedLayer> layers_;
  std::vector<float> token_type0_;          // [dim]: token type 0's row, added to every token
  std::vector<float> positions_;            // bert: [context_length][dim]; else empty
  std::optional<kernels::RopeTable> rope_;  // nomic-bert
  std::vector<float> alibi_slopes_;         // jina-bert-v2: per head; else zeros
  kernels::WeightMatrix cls_, cls_output_;

  // Per-call scratch, grown on demand and reused.
  std::vector<int32_t> sequence_start_;  // first row of each sequence, and the total at the end
  std::vector<int32_t> row_sequence_;    // each row's sequence
  std::vector<float> x_, qkv_, keys_, values_, att_, sublayer_, ffn_, gate_up_;
};

}  // namespace pagoda
