#include "engine/model/model_config.h"

#include <cmath>

#include "pagoda/error.h"

namespace pagoda {

namespace {

void require(bool ok, const std::string& source, const std::string& what) {
  if (!ok) throw Error(source + ": " + what);
}

}  // namespace

const char* architecture_name(Architecture arch) {
  switch (arch) {
    case Architecture::Llama: return "llama";
    case Architecture::Qwen2: return "qwen2";
    case Architecture::Qwen2VL: return "qwen2vl";
    case Architecture::Qwen3: return "qwen3";
    case Architecture::Gemma2: return "gemma2";
    case Architecture::Gemma3: return "gemma3";
    case Architecture::Phi3: return "phi3";
    case Architecture::Qwen2Moe: return "qwen2moe";
    case Architecture::Qwen3Moe: return "qwen3moe";
    case Architecture::Bert: return "bert";
    case Architecture::NomicBert: return "nomic-bert";
    case Architecture::JinaBertV2: return "jina-bert-v2";
  }
  return "?";
}

Architecture parse_architecture(const std::string& name, const std::string& source) {
  std::string known;
  for (Architecture a :
       {Architecture::Llama, Architecture::Qwen2, Architecture::Qwen2VL, Architecture::Qwen3, Architecture::Gemma2,
        Architecture::Gemma3, Architecture::Phi3, Architecture::Qwen2Moe, Architecture::Qwen3Moe, Architecture::Bert,
        Architecture::NomicBert, Architecture::JinaBertV2}) {
    if (name == architecture_name(a)) return a;
    known += (known.empty() ? "" : ", ") + std::string(architecture_name(a));
  }
  throw Error(source + ": general.architecture '" + name + "' is not supported (supported: " + known + ")");
}

float ModelConfig::alibi_slope(int32_t head) const {
  if (alibi_max_bias <= 0.0f) return 1.0f;
  const uint32_t n = 1u << uint32_t(std::floor(std::log2(double(n_heads))));
  const float m0 = std::pow(2.0f, -alibi_max_bias / float(n));
  const float m1 = std::pow(2.0f, -(alibi_max_bias / 2.0f) / float(n));
  const uint32_t h = uint32_t(head);
  return h < n ? std::pow(m0, float(h + 1)) : std::pow(m1, float(2 * (h - n) + 1));
}

void ModelConfig::validate(const std::string& source) const {
  // Upper bounds far beyond any real model keep a corrupt header from asking for terabytes.
  require(dim > 0 && dim <= 65536, source, "embedding length " + std::to_string(dim) + " is out of range");
  require(n_layers > 0 && n_layers <= 1024, source, "block count " + std::to_string(n_layers) + " is out of range");
  require(n_heads > 0 && n_heads <= dim, source, "head count " + std::to_string(n_heads) + " is out of range");
  if (key_length == 0) {
    require(
        dim % n_heads == 0, source,
        "embedding length " + std::to_string(dim) + " is not a multiple of the head count " + std::to_string(n_heads));
  } else {
    require(key_length > 0 && key_length <= 1024, source,
            "key length " + std::to_string(key_length) + " is out of range");
  }
  require(!has_rope() || head_dim() % 2 == 0, source,
          "head dimension " + std::to_string(head_dim()) + " is odd; RoPE rotates pairs");
  require(n_kv_heads > 0 && n_kv_heads <= n_heads && n_heads % n_kv_heads == 0, source,
          "KV head count " + std::to_string(n_kv_heads) + " does not divide the head count " + std::to_string(n_heads));
  require(ffn_dim > 0 && ffn_dim <= 1 << 20, source,
          "feed-forward length " + std::to_string(ffn_dim) + " is out of range");
  require(vocab_size > 0 && vocab_size <= 1 << 24, source,
          "vocabulary size " + std::to_string(vocab_size) + " is out of range");
  require(context_length > 0 && context_length <= 1 << 22, source,
          "context length " + std::to_string(context_length) + " is out of range");
  require(rope_theta > 0.0f && std::isfinite(rope_theta), source, "RoPE frequency base must be positive");
  require(rope_freq_scale > 0.0f && std::isfinite(rope_freq_scale), source, "RoPE frequency scale must be positive");
  require(norm_eps > 0.0f && norm_eps < 1.0f, source, "RMSNorm epsilon is out of range");
  require(rope_dim >= 0 && rope_dim <= head_dim() && rope_dim % 2 == 0, source,
          "rotary dimension count " + std::to_string(rope_dim) + " is not an even number up to the head dimension " +
              std::to_string(head_dim()));
  require(rope_attn_factor > 0.0f && std::isfinite(rope_attn_factor), source, "RoPE attention factor must be positive");
  require(rope_theta_local > 0.0f && std::isfinite(rope_theta_local), source,
          "local RoPE frequency base must be positive");
  require(sliding_window >= 0, source, "sliding window " + std::to_string(sliding_window) + " is negative");
  require(attn_softcap >= 0.0f && std::isfinite(attn_softcap), source, "attention logit soft-capping must be positive");
  require(final_softcap >= 0.0f && std::isfinite(final_softcap), source, "final logit soft-capping must be positive");
  const bool moe_arch = arch == Architecture::Qwen2Moe || arch == Architecture::Qwen3Moe;
  require(!moe_arch || n_experts > 0, source, std::string(architecture_name(arch)) + " needs an expert count above 0");
  require(n_experts >= 0 && n_experts <= 4096, source,
          "expert count " + std::to_string(n_experts) + " is out of range");
  if (n_experts > 0) {
    require(n_experts_used > 0 && n_experts_used <= n_experts, source,
            "experts used per token " + std::to_string(n_experts_used) + " must be between 1 and the expert count " +
                std::to_string(n_experts));
    require(expert_ffn_dim >= 0 && expert_ffn_dim <= 1 << 20, source,
            "expert feed-forward length " + std::to_string(expert_ffn_dim) + " is out of range");
  } else {
    require(n_experts_used == 0, source,
            "experts used per token " + std::to_string(n_experts_used) + " without experts");
  }
  require(!is_encoder() || (n_kv_heads == n_heads && key_length == 0 && n_experts == 0), source,
          std::string(architecture_name(arch)) + " has as many KV heads as heads, of dim / heads, and no experts");
  require(!is_encoder() || (n_token_types > 0 && n_token_types <= 1024), source,
          "token type count " + std::to_string(n_token_types) + " is out of range");
  require(alibi_max_bias >= 0.0f && std::isfinite(alibi_max_bias), source, "ALiBi maximum bias must be positive");
  int32_t sections = 0;
  for (int32_t s : rope_sections) {
    require(s >= 0 && s <= 1 << 16, source, "an M-RoPE section (" + std::to_string(s) + ") is out of range");
    sections += s;
  }
  require(has_mrope() == (sections > 0), source,
          has_mrope() ? "M-RoPE needs rope.dimension_sections with some pairs"
                      : "rope.dimension_sections belong to M-RoPE (qwen2vl) models");
  require(!has_mrope() || head_dim() <= 1024, source, "M-RoPE heads are limited to 1024 values");
  require(sections <= rotated_dims() / 2, source,
          "the M-RoPE sections (" + std::to_string(sections) + " pairs) exceed the " +
              std::to_string(rotated_dims() / 2) + " rotated pairs of a head");
  require(shared_ffn_dim >= 0 && shared_ffn_dim <= 1 << 20, source,
          "shared expert feed-forward length " + std::to_string(shared_ffn_dim) + " is out of range");
  require(!has_shared_expert() || shared_ffn_dim > 0, source,
          "the shared expert's feed-forward length must be above 0");
}

}  // namespace pagoda
