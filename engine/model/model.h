#pragma once
// A loaded model: its hyperparameters, its weights as f32, and its tokenizer. Loaders for GGUF
// and llama2.c checkpoints produce the same Model, so everything downstream is format-blind.

#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

// One transformer block. Matrices are row-major [out][in], as GGUF and llama2.c store them.
struct LayerWeights {
  std::vector<float> attn_norm;    // [dim]
  std::vector<float> attn_q;       // [n_heads*head_dim][dim]
  std::vector<float> attn_k;       // [kv_dim][dim]
  std::vector<float> attn_v;       // [kv_dim][dim]
  std::vector<float> attn_output;  // [dim][n_heads*head_dim]
  std::vector<float> ffn_norm;     // [dim]
  std::vector<float> ffn_gate;     // [ffn_dim][dim]
  std::vector<float> ffn_up;       // [ffn_dim][dim]
  std::vector<float> ffn_down;     // [dim][ffn_dim]
};

struct ModelWeights {
  std::vector<float> token_embd;   // [vocab][dim]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [dim]
  std::vector<float> output;       // [vocab][dim]; a copy of token_embd when the file ties them
};

struct Model {
  std::string path;
  ModelConfig config;
  ModelWeights weights;
  Tokenizer tokenizer;
};

// Loads a GGUF file, or a llama2.c checkpoint with its tokenizer.bin (`tokenizer_path`; when
// empty, "tokenizer.bin" beside the checkpoint). The format is told by the file's magic.
// Throws pagoda::Error naming the file and what is wrong.
Model load_model(const std::string& path, const std::string& tokenizer_path = "");

Model load_gguf_model(const std::string& path);
Model load_llama2c_model(const std::string& path, const std::string& tokenizer_path);

}  // namespace pagoda
