#pragma once
// A LoRA adapter in llama.cpp's GGUF adapter format: `general.type = adapter`,
// `adapter.type = lora`, `adapter.lora.alpha`, and tensor pairs `<base tensor>.lora_a` /
// `.lora_b` for the attention and FFN projections. For a base matrix W of [out][in] (GGUF
// shape {in, out}), lora_a has GGUF shape {in, rank} ([rank][in]) and lora_b {rank, out}
// ([out][rank]); the adapted weight is W + scale·B·A with scale = alpha / rank × the user's
// scale (llama.cpp's rule: alpha 0 means scale = the user's scale).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "engine/model/model_config.h"

namespace pagoda {

enum class LoraProjection : int32_t { Q, K, V, Output, Gate, Up, Down };
inline constexpr int32_t kLoraProjections = 7;

// llama.cpp's tensor name stem of a projection: "attn_q", ..., "ffn_down".
const char* lora_projection_name(LoraProjection p);

// The input and output widths of projection p's base weight in a model of shape `c`: the
// widths a LoRA target of p must have.
struct LoraShape {
  int32_t n_in = 0;
  int32_t n_out = 0;
};
LoraShape lora_projection_shape(const ModelConfig& c, LoraProjection p);

struct LoraTarget {
  int32_t rank = 0;
  int32_t n_in = 0;
  int32_t n_out = 0;
  float scale = 1.0f;    // alpha / rank × user scale, already resolved
  std::vector<float> a;  // [rank][n_in]
  std::vector<float> b;  // [n_out][rank]
  // F16 or BF16 when the file stores both halves in that type (every value of a and b is then
  // exact in it, so the kernels may keep them in 16 bits); otherwise F32.
  GgmlType stored = GgmlType::F32;
};

struct LoraAdapter {
  std::string path;
  float alpha = 0.0f;
  float user_scale = 1.0f;
  // layers[l][p]: the adapter of projection p in block l, if the file has one.
  std::vector<std::array<std::optional<LoraTarget>, kLoraProjections>> layers;
};

// Reads and validates an adapter for a base model of shape `base`. Throws pagoda::Error
// naming the file and what is wrong: not an adapter, not LoRA, another architecture, a lone
// lora_a or lora_b, an unknown or unsupported tensor, a block the base model lacks, shapes
// that do not fit the base model, ranks that disagree, a non-finite alpha, scale or value, no
// tensors at all.
LoraAdapter load_lora_adapter(const std::string& path, const ModelConfig& base, float user_scale = 1.0f);

}  // namespace pagoda
