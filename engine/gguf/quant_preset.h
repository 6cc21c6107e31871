#pragma once
// llama-quantize's presets (Q4_K_M, Q8_0, ...) and its choice of each tensor's type under one:
// which tensors are quantized at all, the mixtures' exceptions (the output matrix — or the
// token embedding that doubles as it — in Q6_K; attn_v, ffn_down and for the 2- and 3-bit
// presets attn_output given more bits on the layers llama.cpp picks; attn_v also by the
// model's grouped-query ratio), and the fallbacks for rows that do not fit a type's blocks. Facts from llama.cpp's
// src/llama-quant.cpp; dense models only (the mixture-of-experts exceptions are not applied).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/ggml_types.h"

namespace pagoda {

// ggml's GGML_QNT_VERSION, which quantized files store as general.quantization_version.
inline constexpr uint32_t kGgmlQuantizationVersion = 2;

enum class QuantPreset {
  F16,
  BF16,
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q4_K_M,
  Q5_K_M,
  Q6_K,
  Q2_K,
  Q3_K_S,
  Q3_K_M,
  Q3_K_L,
  IQ4_NL,
  IQ4_XS
};

// "q4_k_m", "Q4_K_M", ... (case-insensitive). Throws pagoda::Error listing the known names.
QuantPreset parse_quant_preset(std::string_view name);
const char* quant_preset_name(QuantPreset preset);  // "Q4_K_M"
// llama.cpp's llama_ftype number, which GGUF stores as general.file_type.
uint32_t quant_preset_file_type(QuantPreset preset);
// The type most matrices get.
GgmlType quant_preset_default_type(QuantPreset preset);

struct QuantTensor {
  std::string name;
  std::vector<uint64_t> shape;  // GGUF order: shape[0] is the row length
  GgmlType type;                // its type in the input file
};

struct QuantChoice {
  GgmlType type;    // what the tensor becomes (its input type when it is not quantized)
  GgmlType wanted;  // what the preset wanted before a row-size fallback (== type otherwise)
  bool fell_back() const { return type != wanted; }
};

// `shape` as ggml holds it, and as llama-quantize writes it: trailing dimensions of 1 dropped
// (ggml_n_dims), at least one kept. bert's cls.output.weight, [dim, 1] in a converted file, is
// [dim] in a quantized one.
std::vector<uint64_t> ggml_shape(std::span<const uint64_t> shape);

// llama.cpp's weight order: tensors outside the blocks first, then block by block; by name
// within each. llama-quantize visits (and writes) tensors in this order, and the _M mixtures
// count attn_v and ffn_down tensors along it. Returns indices into `tensors`.
std::vector<size_t> llama_tensor_order(std::span<const QuantTensor> tensors);

// Each tensor's type under `preset`, index for index. `n_layers` is the model's block count,
// `n_gqa` its query heads per KV head (llama.cpp's n_gqa: Q2_K, IQ4_NL and IQ4_XS give attn_v
// more bits from 4 on).
std::vector<QuantChoice> choose_quant_types(QuantPreset preset, std::span<const QuantTensor> tensors, int n_layers,
                                            int n_gqa = 1);

}  // namespace pagoda
