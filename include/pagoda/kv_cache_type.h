#pragma once
// The element type of the KV cache, as llama.cpp's --cache-type-k/-v spell them. Smaller types
// hold more tokens in the same memory and stream less of it per attention step; f16 is the
// default (as in llama.cpp), f32 keeps keys and values exactly as computed.

#include <optional>
#include <string_view>

namespace pagoda {

enum class KvCacheType {
  F32,   // 4 bytes a value
  F16,   // IEEE half, rounded to nearest even: 2 bytes
  BF16,  // bfloat16, rounded to nearest even: 2 bytes
  Q8_0,  // ggml's Q8_0 blocks along head_dim (32 int8 and an f16 scale: 34 bytes per 32
         // values); head_dim must be a multiple of 32
};

// "f32", "f16", "bf16" or "q8_0".
constexpr const char* kv_cache_type_name(KvCacheType t) {
  switch (t) {
    case KvCacheType::F32: return "f32";
    case KvCacheType::F16: return "f16";
    case KvCacheType::BF16: return "bf16";
    case KvCacheType::Q8_0: return "q8_0";
  }
  return "?";
}

// The type a name (as kv_cache_type_name gives it) stands for, or nullopt.
constexpr std::optional<KvCacheType> parse_kv_cache_type(std::string_view name) {
  for (KvCacheType t : {KvCacheType::F32, KvCacheType::F16, KvCacheType::BF16, KvCacheType::Q8_0}) {
    if (name == kv_cache_type_name(t)) return t;
  }
  return std::nullopt;
}

}  // namespace pagoda
