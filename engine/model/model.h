#pragma once
// A loaded model: its hyperparameters, its weights and its tokenizer. Loaders for GGUF and
// llama2.c checkpoints produce the same Model, so everything downstream is format-blind.
//
// The matrices stay in their file encoding: each is a WeightTensor view into the file, which
// is memory-mapped read-only (MAP_PRIVATE) — or, with MappedFile::Load::Copy, read into
// memory — and kept alive by `storage`. Only the small vectors (norms) are decoded to f32 at
// load. A mapped file truncated after loading turns the weights into zeros (mapping_guard.h);
// weights_lost() then says so, and every forward pass refuses to run.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/gguf/mapped_file.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_tensor.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

// One expert's gated FFN: views into the file's 3-D expert tensors (or a shared expert's own).
struct ExpertWeights {
  WeightTensor gate;  // [expert_ffn][dim]
  WeightTensor up;    // [expert_ffn][dim]
  WeightTensor down;  // [dim][expert_ffn]
};

// One transformer block. Matrices are row-major [out][in], as GGUF and llama2.c store them;
// q_dim = n_heads * head_dim. Vectors an architecture does not have are empty. A fused matrix
// in the file (phi3's attn_qkv, its gate|up ffn_up) is seen as views of its row ranges.
struct LayerWeights {
  std::vector<float> attn_norm;                              // [dim]
  WeightTensor attn_q;                                       // [n_heads*head_dim][dim]
  WeightTensor attn_k;                                       // [kv_dim][dim]
  WeightTensor attn_v;                                       // [kv_dim][dim]
  std::vector<float> attn_q_bias, attn_k_bias, attn_v_bias;  // qwen2: [q_dim], [kv_dim], [kv_dim]
  std::vector<float> attn_q_norm, attn_k_norm;               // qwen3: [head_dim], applied to each head
  WeightTensor attn_output;                                  // [dim][n_heads*head_dim]
  std::vector<float> ffn_norm;                               // [dim]
  WeightTensor ffn_gate;                                     // [ffn_dim][dim]
  WeightTensor ffn_up;                                       // [ffn_dim][dim]
  WeightTensor ffn_down;                                     // [dim][ffn_dim]
  std::vector<float> attn_post_norm, ffn_post_norm;          // gemma: [dim], after attention and after the FFN
  // Mixture of experts (the dense ffn_* are then empty): the router, one view per expert, and
  // qwen2moe's shared expert with its sigmoid gate.
  WeightTensor ffn_gate_inp;              // [n_experts][dim]
  std::vector<ExpertWeights> experts;     // n_experts
  ExpertWeights shared_expert;            // [shared_ffn][dim] ...
  std::vector<float> shared_expert_gate;  // [dim]
  // Encoders: the biases of the output projection and of the FFN (bert: ffn_up and ffn_down,
  // GELU, no gate; jina-bert-v2: ffn_down's; nomic-bert: none), and the LayerNorms (weight,
  // bias) after attention and after the FFN, in place of attn_norm and ffn_norm before them.
  // jina-bert-v2's optional LayerNorms are in attn_q_norm/attn_k_norm ([dim], over all heads)
  // with their biases, and attn_norm_2 after attn_output_norm; empty when the file has none.
  std::vector<float> attn_output_bias;                           // [dim]
  std::vector<float> ffn_up_bias, ffn_down_bias;                 // [ffn_dim], [dim]
  std::vector<float> attn_output_norm, attn_output_norm_bias;    // [dim]
  std::vector<float> layer_output_norm, layer_output_norm_bias;  // [dim]
  std::vector<float> attn_q_norm_bias, attn_k_norm_bias;         // [dim], or empty
  std::vector<float> attn_norm_2, attn_norm_2_bias;              // [dim], or empty
};

// An encoder's embedding side and rank head: what is added to the token's embedding (token
// type 0's row; bert's position's row, empty for nomic-bert and jina-bert-v2), their LayerNorm,
// and the classifier a reranker scores with (cls: dense + tanh, then cls_output, whose first
// output is the score; either may be absent; jina-reranker's cls has one row, whose tanh is the
// score), which embedding models do not have.
struct EncoderWeights {
  WeightTensor token_types;                                  // [n_token_types][dim]
  WeightTensor position_embd;                                // [context_length][dim]
  std::vector<float> token_embd_norm, token_embd_norm_bias;  // [dim]
  WeightTensor cls;                                          // [dim][dim] (jina: [1][dim]), or empty
  std::vector<float> cls_bias;                               // [dim] (jina: [1])
  WeightTensor cls_output;                                   // [n_labels][dim], or empty
  std::vector<float> cls_output_bias;                        // [n_labels]
};

struct ModelWeights {
  WeightTensor token_embd;  // [vocab][dim]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [dim]
  WeightTensor output;             // [vocab][dim]; the same view as token_embd when the file ties them
  // [rotated_dims/2] frequency factors (Llama 3.1's, or Phi-3's LongRoPE long or short set,
  // chosen by the context length), or empty
  std::vector<float> rope_freqs;
  EncoderWeights encoder;  // bert; empty for decoders, which have output_norm and output instead
  // A decoder reranker's head (Qwen3-Reranker: ARCH.pooling_type 4, cls.output.weight): one row
  // per label of ARCH.classifier.output_labels (the lm_head's rows of "yes" and "no"), read from
  // the last position's normed hidden state; the score is the softmax over them, element 0.
  WeightTensor rank_output;  // [n_labels][dim], or empty
};

struct Model {
  std::string path;
  ModelConfig config;
  ModelWeights weights;
  Tokenizer tokenizer;
  // What the views in `weights` point into (the mapped file); copies of a Model share it.
  std::shared_ptr<const void> storage;
  // The file the views read from, owned by `storage`.
  const MappedFile* file = nullptr;
  // The GGUF's tokenizer.chat_template (a llama2.c checkpoint has none).
  std::optional<std::string> chat_template = std::nullopt;
  // tokenizer.chat_template.rerank: a decoder reranker's prompt, with {query} and {document}
  // where the pair goes (Qwen3-Reranker's); absent for other models.
  std::optional<std::string> rerank_template = std::nullopt;
};

// Nothing while the weights are the file's; once the mapped file was truncated under them
// (MappedFile::lost), the error every request on this model fails with from then on.
std::optional<std::string> weights_lost(const Model& model);

// Loads a GGUF file, or a llama2.c checkpoint with its tokenizer.bin (`tokenizer_path`; when
// empty, "tokenizer.bin" beside the checkpoint). The format is told by the file's magic.
// `load`: map the file (the default) or read it into memory (llama.cpp's --no-mmap).
// Throws pagoda::Error naming the file and what is wrong.
Model load_model(const std::string& path, const std::string& tokenizer_path = "",
                 MappedFile::Load load = MappedFile::Load::Map);

Model load_gguf_model(const std::string& path, MappedFile::Load load = MappedFile::Load::Map);
Model load_llama2c_model(const std::string& path, const std::string& tokenizer_path,
                         MappedFile::Load load = MappedFile::Load::Map);

}  // namespace pagoda
