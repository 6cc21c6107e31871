#pragma once
// The oracle for encoders (bert, nomic-bert, jina-bert-v2): a deliberately plain forward pass
// over one whole sequence, scalar loops in double over matrices dequantized to f32 once, as
// llama.cpp's build_bert computes it (src/llama.cpp, 2025-02): token + token type 0 (+ bert's
// position) embeddings and their LayerNorm; per block, non-causal attention (bert and jina:
// with biases; jina: optional LayerNorms of Q and K and ALiBi; nomic: NEOX RoPE), residual,
// LayerNorm (jina: optionally a second one after re-adding the input), the FFN (bert: GELU with
// biases; nomic: SwiGLU; jina: GEGLU, ffn_down biased), residual, LayerNorm. Then pooling as
// llama.cpp's append_pooling, and L2 normalization as llama-embedding's --embd-normalize 2. The
// optimized encoder path is tested against it.

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/model.h"

namespace pagoda {

// How a sequence's hidden states become its output, by llama.cpp's llama_pooling_type numbers
// (the GGUF's ARCH.pooling_type).
enum class EncoderPooling : int32_t {
  Mean = 1,  // the average of every token's row
  Cls = 2,   // the first token's row ([CLS])
  Last = 3,  // the last token's row
  Rank = 4,  // the rank head on the first token's row: one relevance score
};

class ReferenceEncoder {
 public:
  // Throws pagoda::Error unless `model` is an encoder. The Model must outlive this.
  explicit ReferenceEncoder(const Model& model);

  // The final hidden states of `tokens`, one sequence at positions 0..n-1 with token type 0
  // (llama.cpp's hard-coded "sentence A"): n rows of dim floats, row-major. Throws
  // pagoda::Error for an empty sequence, one longer than the context, or an id outside the
  // vocabulary.
  std::vector<float> hidden_states(std::span<const int32_t> tokens) const;

  // `hidden` (n rows of dim) pooled: dim floats for mean, cls and last; one score for rank,
  // which throws pagoda::Error when the model has no rank head. Not normalized.
  std::vector<float> pool(std::span<const float> hidden, EncoderPooling pooling) const;

  // What llama-embedding prints for `tokens` with --embd-normalize 2: pooled, then
  // L2-normalized — except a rank score, which is returned as it is.
  std::vector<float> embed(std::span<const int32_t> tokens, EncoderPooling pooling) const;

 private:
  struct DenseLayer {
    std::vector<float> attn_q, attn_k, attn_v, attn_output, ffn_up, ffn_down, ffn_gate;  // [out][in]
  };

  const Model& model_;
  std::vector<float> token_types_, position_embd_, cls_, cls_output_;
  std::vector<DenseLayer> layers_;
};

// `v` divided by its Euclidean norm (the sum of squares in double), as llama.cpp's
// common_embd_normalize(…, 2); a zero vector stays zero.
std::vector<float> l2_normalize(std::span<const float> v);

}  // namespace pagoda
