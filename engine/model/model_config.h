#pragma once
// Hyperparameters of a Llama-architecture model, named after llama.cpp's GGUF metadata keys.

#include <cstdint>
#include <string>

namespace pagoda {

struct ModelConfig {
  int32_t dim = 0;             // llama.embedding_length
  int32_t n_layers = 0;        // llama.block_count
  int32_t n_heads = 0;         // llama.attention.head_count
  int32_t n_kv_heads = 0;      // llama.attention.head_count_kv
  int32_t ffn_dim = 0;         // llama.feed_forward_length
  int32_t vocab_size = 0;      // rows of token_embd.weight
  int32_t context_length = 0;  // llama.context_length
  float rope_theta = 10000.0f; // llama.rope.freq_base
  float norm_eps = 1e-5f;      // llama.attention.layer_norm_rms_epsilon

  int32_t head_dim() const { return dim / n_heads; }
  int32_t kv_dim() const { return head_dim() * n_kv_heads; }
  int32_t group_size() const { return n_heads / n_kv_heads; }

  // Throws pagoda::Error, prefixed with `source`, when the shape is impossible or absurd.
  void validate(const std::string& source) const;
};

}  // namespace pagoda
