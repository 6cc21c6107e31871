#pragma once
// Hyperparameters of a decoder-only transformer of one of the supported architectures, named
// after llama.cpp's GGUF metadata keys (ARCH.* where ARCH is general.architecture).

#include <cstdint>
#include <string>

#include "kernels/rope.h"

namespace pagoda {

// The architectures pagoda runs, by their general.architecture names.
enum class Architecture {
  Llama,  // "llama" (Llama 1–3.x, Mistral, SmolLM2, TinyStories): adjacent-pair RoPE
  Qwen2,  // "qwen2": Q/K/V biases, NEOX RoPE
  Qwen3,  // "qwen3": per-head RMSNorm of Q and K before RoPE, NEOX RoPE, head_dim from key_length
};
const char* architecture_name(Architecture arch);
// The architecture named `name`; throws pagoda::Error naming `source` and `name` when pagoda
// does not support it.
Architecture parse_architecture(const std::string& name, const std::string& source);

struct ModelConfig {
  Architecture arch = Architecture::Llama;
  int32_t dim = 0;             // ARCH.embedding_length
  int32_t n_layers = 0;        // ARCH.block_count
  int32_t n_heads = 0;         // ARCH.attention.head_count
  int32_t n_kv_heads = 0;      // ARCH.attention.head_count_kv
  int32_t ffn_dim = 0;         // ARCH.feed_forward_length
  int32_t vocab_size = 0;      // rows of token_embd.weight
  int32_t context_length = 0;  // ARCH.context_length
  int32_t key_length = 0;      // ARCH.attention.key_length; 0: dim / n_heads
  float rope_theta = 10000.0f; // ARCH.rope.freq_base
  float rope_freq_scale = 1.0f;  // 1 / ARCH.rope.scaling.factor (linear scaling)
  float norm_eps = 1e-5f;      // ARCH.attention.layer_norm_rms_epsilon

  int32_t head_dim() const { return key_length > 0 ? key_length : dim / n_heads; }
  int32_t q_dim() const { return n_heads * head_dim(); }
  int32_t kv_dim() const { return head_dim() * n_kv_heads; }
  int32_t group_size() const { return n_heads / n_kv_heads; }

  // What the architecture implies.
  kernels::RopeStyle rope_style() const {
    return arch == Architecture::Llama ? kernels::RopeStyle::Adjacent : kernels::RopeStyle::Neox;
  }
  bool has_qkv_bias() const { return arch == Architecture::Qwen2; }
  bool has_qk_norm() const { return arch == Architecture::Qwen3; }

  // Throws pagoda::Error, prefixed with `source`, when the shape is impossible or absurd.
  void validate(const std::string& source) const;
};

}  // namespace pagoda
