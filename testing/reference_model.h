#pragma once
// The oracle: a deliberately plain single-sequence forward pass of every supported
// architecture (contiguous KV cache, scalar loops, no threads). Every faster path is tested against it. It dequantizes
// every matrix to f32 once and computes in f32: the "dequantize-then-fp32" path that the quantized kernels are compared
// with.

#include <array>
#include <cstdint>
#include <vector>

#include "engine/model/model.h"

namespace pagoda {

class ReferenceModel {
 public:
  explicit ReferenceModel(const Model& model);

  // Runs `token` at position `pos` (positions must be fed in order from 0) and returns the
  // logits over the vocabulary.
  const std::vector<float>& forward(int32_t token, int32_t pos);

  // forward(token, pos) with, when `row` is set, its dim floats (an image's row, unscaled) in
  // place of the token's embedding, and for an M-RoPE model the rotary positions `rope`
  // (temporal, height, width, extra) in place of pos.
  const std::vector<float>& forward(int32_t token, int32_t pos, const float* row, const std::array<int32_t, 4>& rope);
  // Runs `count` rows of dim floats (an image's, taken as they are, unscaled) at positions pos …
  // pos + count - 1 in place of token embeddings, and returns the logits at the last. With
  // `bidirectional`, each row attends to every row of the run, later ones too (Gemma 3's images);
  // else causally, as tokens do.
  const std::vector<float>& forward_rows(const float* rows, int32_t count, int32_t pos, bool bidirectional);

  // The last forward's final hidden state after the output norm (dim floats), which the
  // logits are the classifier of: what an embedding pools.
  const std::vector<float>& hidden() const { return x_; }

  // Forgets the cached keys and values so the next forward starts a new sequence at 0.
  void reset() { next_pos_ = 0; }

 private:
  // The model's matrices decoded to f32, [out][in].
  struct DenseFfn {
    std::vector<float> gate, up, down;
  };
  struct DenseLayer {
    std::vector<float> attn_q, attn_k, attn_v, attn_output;
    DenseFfn ffn;
    std::vector<float> router;
    std::vector<DenseFfn> experts;
    DenseFfn shared_expert;
  };

  // Positions pos … pos + count - 1 are next: throws unless they follow the last ones and fit.
  void take_positions(int32_t pos, int32_t count);
  // Layer l's query of x_ at `pos` into q, its key and value into the cache, turned by the
  // rotary positions `rope` (all pos but an M-RoPE model's image rows).
  void layer_inputs(int l, int pos, const std::array<int32_t, 4>& rope, float* q);
  // The rest of layer l on x_: attention of q (at `pos`) over the positions it sees (with
  // span_begin <= pos < span_end, every position of that span as well), the FFN.
  void layer_outputs(int l, const float* q, int pos, int span_begin, int span_end);
  // The output norm of x_ (in place) and the logits.
  const std::vector<float>& logits();
  // out[dim] = the gated FFN (n hidden units) of xb[dim].
  void ffn(const DenseFfn& w, int n, float* out);

  const Model& model_;
  std::vector<DenseLayer> layers_;
  std::vector<float> output_;
  int32_t next_pos_ = 0;
  std::vector<float> x_, xb_, xb2_, q_, att_out_, hb_, hb2_, att_, logits_;
  std::vector<float> key_cache_, value_cache_;  // [layer][pos][kv_dim]
};

}  // namespace pagoda
