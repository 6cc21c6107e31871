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
    case Architecture::Qwen3: return "qwen3";
  }
  return "?";
}

Architecture parse_architecture(const std::string& name, const std::string& source) {
  for (Architecture a : {Architecture::Llama, Architecture::Qwen2, Architecture::Qwen3}) {
    if (name == architecture_name(a)) return a;
  }
  throw Error(source + ": general.architecture '" + name + "' is not supported (supported: llama, qwen2, qwen3)");
}

void ModelConfig::validate(const std::string& source) const {
  // Upper bounds far beyond any real model keep a corrupt header from asking for terabytes.
  require(dim > 0 && dim <= 65536, source, "embedding length " + std::to_string(dim) + " is out of range");
  require(n_layers > 0 && n_layers <= 1024, source, "block count " + std::to_string(n_layers) + " is out of range");
  require(n_heads > 0 && n_heads <= dim, source, "head count " + std::to_string(n_heads) + " is out of range");
  if (key_length == 0) {
    require(dim % n_heads == 0, source, "embedding length " + std::to_string(dim) + " is not a multiple of the head count " + std::to_string(n_heads));
  } else {
    require(key_length > 0 && key_length <= 1024, source, "key length " + std::to_string(key_length) + " is out of range");
  }
  require(head_dim() % 2 == 0, source, "head dimension " + std::to_string(head_dim()) + " is odd; RoPE rotates pairs");
  require(n_kv_heads > 0 && n_kv_heads <= n_heads && n_heads % n_kv_heads == 0, source,
          "KV head count " + std::to_string(n_kv_heads) + " does not divide the head count " + std::to_string(n_heads));
  require(ffn_dim > 0 && ffn_dim <= 1 << 20, source, "feed-forward length " + std::to_string(ffn_dim) + " is out of range");
  require(vocab_size > 0 && vocab_size <= 1 << 24, source, "vocabulary size " + std::to_string(vocab_size) + " is out of range");
  require(context_length > 0 && context_length <= 1 << 22, source, "context length " + std::to_string(context_length) + " is out of range");
  require(rope_theta > 0.0f && std::isfinite(rope_theta), source, "RoPE frequency base must be positive");
  require(rope_freq_scale > 0.0f && std::isfinite(rope_freq_scale), source, "RoPE frequency scale must be positive");
  require(norm_eps > 0.0f && norm_eps < 1.0f, source, "RMSNorm epsilon is out of range");
}

}  // namespace pagoda
