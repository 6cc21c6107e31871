#pragma once
// Hyperparameters of a transformer of one of the supported architectures — decoders, and the
// `bert`, `nomic-bert` and `jina-bert-v2` encoders — named after llama.cpp's GGUF metadata keys
// (ARCH.* where ARCH is general.architecture).

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/rope.h"

namespace pagoda {

// The architectures pagoda runs, by their general.architecture names.
enum class Architecture {
  Llama,       // "llama" (Llama 1–3.x, Mistral, Mixtral with experts, SmolLM2): adjacent-pair RoPE
  Qwen2,       // "qwen2": Q/K/V biases, NEOX RoPE
  Qwen2VL,     // "qwen2vl" (Qwen2-VL, Qwen2.5-VL): qwen2 with multimodal RoPE (M-RoPE), whose
               // pairs turn by an image row's temporal, height or width position
  Qwen3,       // "qwen3": per-head RMSNorm of Q and K before RoPE, NEOX RoPE, head_dim from key_length
  Gemma2,      // "gemma2": embedding ×√dim, post-attention/FFN norms, GeGLU, soft-capping, sliding
               // window on even layers
  Gemma3,      // "gemma3": Gemma 2 without soft-capping, with Q/K norms; every 6th layer global,
               // the others sliding with their own RoPE base
  Phi3,        // "phi3": fused Q/K/V and gate|up, LongRoPE factors
  Qwen2Moe,    // "qwen2moe": qwen2 attention, experts plus a gated shared expert
  Qwen3Moe,    // "qwen3moe": qwen3 attention, experts with normalised top-k weights
  Bert,        // "bert": an encoder (BGE, E5, MiniLM): learned positions and token types,
               // non-causal attention with biases, post-LayerNorms, a GELU FFN with biases
  NomicBert,   // "nomic-bert" (nomic-embed-text): bert with fused Q/K/V and NEOX RoPE instead of
               // learned positions, no biases, a SwiGLU FFN
  JinaBertV2,  // "jina-bert-v2" (jina-embeddings-v2): bert with ALiBi instead of positions,
               // optional LayerNorms of Q, K and after attention, a GEGLU FFN
};
const char* architecture_name(Architecture arch);
// The architecture named `name`; throws pagoda::Error naming `source` and `name` when pagoda
// does not support it.
Architecture parse_architecture(const std::string& name, const std::string& source);

struct ModelConfig {
  Architecture arch = Architecture::Llama;
  int32_t dim = 0;                // ARCH.embedding_length
  int32_t n_layers = 0;           // ARCH.block_count
  int32_t n_heads = 0;            // ARCH.attention.head_count
  int32_t n_kv_heads = 0;         // ARCH.attention.head_count_kv
  int32_t ffn_dim = 0;            // ARCH.feed_forward_length
  int32_t vocab_size = 0;         // rows of token_embd.weight
  int32_t context_length = 0;     // ARCH.context_length
  int32_t key_length = 0;         // ARCH.attention.key_length; 0: dim / n_heads
  float rope_theta = 10000.0f;    // ARCH.rope.freq_base
  float rope_freq_scale = 1.0f;   // 1 / ARCH.rope.scaling.factor (linear scaling)
  float norm_eps = 1e-5f;         // ARCH.attention.layer_norm_rms_epsilon
  int32_t rope_dim = 0;           // ARCH.rope.dimension_count when below head_dim (partial rotary); 0: all
  float rope_attn_factor = 1.0f;  // ARCH.rope.scaling.attn_factor (LongRoPE), multiplies cos and sin
  // The context beyond which LongRoPE's long factors apply (ARCH.rope.scaling.original_context_length).
  int32_t rope_original_context = 0;
  float rope_theta_local = 10000.0f;  // gemma3: the RoPE base of the sliding layers
  int32_t sliding_window = 0;         // ARCH.attention.sliding_window on the sliding layers; 0: none
  float attn_softcap = 0.0f;          // ARCH.attn_logit_softcapping; 0: none
  float final_softcap = 0.0f;         // ARCH.final_logit_softcapping; 0: none
  // Mixture of experts (ARCH.expert_count, expert_used_count, expert_feed_forward_length,
  // expert_shared_feed_forward_length); n_experts 0: a dense FFN of ffn_dim.
  int32_t n_experts = 0;
  int32_t n_experts_used = 0;
  int32_t expert_ffn_dim = 0;
  int32_t shared_ffn_dim = 0;  // qwen2moe's shared expert
  // ARCH.pooling_type, llama.cpp's llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank;
  // -1 when the file does not say (generation models), which embeddings read as last.
  int32_t pooling_type = -1;
  // bert: the rows of token_types.weight (tokenizer.ggml.token_type_count), of which llama.cpp
  // adds row 0 to every token; 0 for decoders.
  int32_t n_token_types = 0;
  // jina-bert-v2: ALiBi's maximum bias (llama.cpp's f_max_alibi_bias, fixed at 8 there: GGUF
  // has no key for it); head h's slope follows from it. 0: no ALiBi.
  float alibi_max_bias = 0.0f;
  // qwen2vl: ARCH.rope.dimension_sections, the rotated pairs per M-RoPE section (temporal,
  // height, width, extra); pair i turns by the position of section k where i mod their sum
  // falls. All 0 without M-RoPE.
  std::array<int32_t, 4> rope_sections{};

  int32_t head_dim() const { return key_length > 0 ? key_length : dim / n_heads; }
  int32_t rotated_dims() const { return rope_dim > 0 ? rope_dim : head_dim(); }
  int32_t q_dim() const { return n_heads * head_dim(); }
  int32_t kv_dim() const { return head_dim() * n_kv_heads; }
  int32_t group_size() const { return n_heads / n_kv_heads; }

  // What the architecture implies.
  kernels::RopeStyle rope_style() const {
    return arch == Architecture::Llama ? kernels::RopeStyle::Adjacent : kernels::RopeStyle::Neox;
  }
  bool has_qkv_bias() const {
    return arch == Architecture::Qwen2 || arch == Architecture::Qwen2VL || arch == Architecture::Qwen2Moe ||
           arch == Architecture::Bert || arch == Architecture::JinaBertV2;
  }
  bool has_qk_norm() const {
    return arch == Architecture::Qwen3 || arch == Architecture::Qwen3Moe || arch == Architecture::Gemma3;
  }
  bool has_mrope() const { return arch == Architecture::Qwen2VL; }
  bool is_gemma() const { return arch == Architecture::Gemma2 || arch == Architecture::Gemma3; }
  // Gemma: the embedding scaled by √dim, RMSNorms after attention and after the FFN, and
  // GELU (tanh approximation) instead of SiLU in the gated FFN.
  bool has_post_norms() const { return is_gemma(); }
  bool gelu_ffn() const { return is_gemma(); }
  float embedding_scale() const { return is_gemma() ? std::sqrt(float(dim)) : 1.0f; }
  bool has_experts() const { return n_experts > 0; }
  bool has_shared_expert() const { return arch == Architecture::Qwen2Moe; }
  // Whether the router's top-k weights are divided by their sum (the softmax over the chosen
  // logits): Mixtral and qwen3moe yes, qwen2moe no, as llama.cpp runs them.
  bool normalizes_expert_weights() const { return arch != Architecture::Qwen2Moe; }
  // Layers that attend within the sliding window: Gemma 2's even ones, all but every 6th of
  // Gemma 3's, every layer of a phi3 that has a window.
  bool is_sliding(int32_t layer) const {
    if (sliding_window <= 0) return false;
    if (arch == Architecture::Gemma2) return layer % 2 == 0;
    if (arch == Architecture::Gemma3) return (layer + 1) % 6 != 0;
    return true;
  }
  // The RoPE base of `layer`: Gemma 3's sliding layers have their own; their scale is 1.
  float layer_rope_theta(int32_t layer) const {
    return arch == Architecture::Gemma3 && is_sliding(layer) ? rope_theta_local : rope_theta;
  }
  float layer_rope_freq_scale(int32_t layer) const {
    return arch == Architecture::Gemma3 && is_sliding(layer) ? 1.0f : rope_freq_scale;
  }
  // What scales q·k: 1/√head_dim, but 1/√(dim/heads) for the 27B Gemmas (Gemma 2's 46
  // layers, Gemma 3's 62), as llama.cpp does: their query_pre_attn_scalar, which GGUF does not carry.
  float attention_scale() const {
    const bool gemma_27b =
        (arch == Architecture::Gemma2 && n_layers == 46) || (arch == Architecture::Gemma3 && n_layers == 62);
    return 1.0f / std::sqrt(float(gemma_27b ? dim / n_heads : head_dim()));
  }
  // ALiBi's slope for `head`, as ggml's soft_max computes it, in float: with n the largest power
  // of two not above n_heads, head h < n has 2^(-max/n)^(h+1); the others fall between those,
  // 2^(-max/2n)^(2(h-n)+1). 1 without ALiBi.
  float alibi_slope(int32_t head) const;
  int32_t moe_ffn_dim() const { return expert_ffn_dim > 0 ? expert_ffn_dim : ffn_dim; }
  // An encoder: every token attends to every other (ARCH.attention.causal false), its output is
  // pooled hidden states rather than logits, and it has no KV cache and no generation.
  bool is_encoder() const {
    return arch == Architecture::Bert || arch == Architecture::NomicBert || arch == Architecture::JinaBertV2;
  }
  // Whether positions enter by RoPE on Q and K: every decoder, and nomic-bert among encoders
  // (bert learns position embeddings, jina-bert-v2 biases its scores by ALiBi).
  bool has_rope() const { return !is_encoder() || arch == Architecture::NomicBert; }
  bool has_learned_positions() const { return arch == Architecture::Bert; }
  // The encoders' FFN: bert's GELU of ffn_up (biased), or a gated one — act(ffn_gate·x) ·
  // (ffn_up·x) — with SiLU (nomic-bert) or GELU (jina-bert-v2).
  bool has_gated_encoder_ffn() const { return arch == Architecture::NomicBert || arch == Architecture::JinaBertV2; }

  // Throws pagoda::Error, prefixed with `source`, when the shape is impossible or absurd.
  void validate(const std::string& source) const;
};

}  // namespace pagoda
