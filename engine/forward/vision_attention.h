#pragma once
// The vision encoders' attention: non-causal multi-head attention within runs of rows (an
// image, or a window of one), and Qwen2-VL's 2-D rotary embedding of the queries and keys.

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/gemm.h"

namespace pagoda {

// Rows [first, first + n) of a call that attend to each other and to nothing else.
struct AttentionSegment {
  int32_t first = 0;
  int32_t n = 0;
};

// What segment_attention allocates, kept between calls.
struct AttentionScratch {
  std::vector<kernels::PackedMatrix> keys, values;  // per (head, segment): K and Vᵀ packed as GEMM operands
};

// out[r] (dim = n_heads · head_dim floats, row stride dim) = softmax(q_r·Kᵀ / √head_dim)·V per head
// over the rows of r's segment, from qkv's rows (row stride 3·dim: Q, then K, then V, each
// head after head). Every segment's rows are covered once. Each output is a fixed function of
// its query and its segment's keys and values, taken in row order (GEMMs whose outputs depend
// only on their rows, a softmax of the row alone), so it does not depend on the other segments
// or on the thread count. Runs in the caller's task arena.
void segment_attention(const float* qkv, int32_t n_heads, int32_t head_dim, std::span<const AttentionSegment> segments,
                       float* out, AttentionScratch& scratch);

// Qwen2-VL's vision RoPE: transformers' VisionRotaryEmbedding(head_dim / 2, θ = 10000) over a
// patch's (row y, column x): frequencies f_i = θ^(-4i / head_dim) for i < head_dim / 4; the
// pair (v[i], v[i + head_dim/2]) of each head turns by y·f_i for i < head_dim/4 and by
// x·f_(i - head_dim/4) for head_dim/4 ≤ i < head_dim/2 (rotate_half over the whole head, cos and
// sin of the angles concatenated twice). ggml's GGML_ROPE_TYPE_VISION with n_dims = head_dim/2,
// sections [head_dim/4] × 4 and positions (y, x, y, x), as llama.cpp calls it, is the same
// rotation: its pairs are (i, i + n_dims), θ^(-2/n_dims) per step, the sections restarting the
// power at head_dim/4 with the second position. Angles are computed in double and rounded
// once, so a row's rotation depends only on its (y, x).
class VisionRope {
 public:
  explicit VisionRope(int32_t head_dim, float theta = 10000.0f);
  // Extends the table to positions 0 … max_position - 1 (per axis).
  void reserve(int32_t max_position);
  // Rotates the n_heads heads of `row` (head_dim values each) to patch (y, x); both < the reserved size.
  void apply(float* row, int32_t n_heads, int32_t y, int32_t x) const;

 private:
  int32_t head_dim_;
  double theta_;
  int32_t positions_ = 0;
  std::vector<float> cos_sin_;  // [position][head_dim / 4][cos, sin]
};

}  // namespace pagoda
