#pragma once
// Quantizes a whole GGUF model file as llama-quantize does: every metadata key copied
// (general.file_type and general.quantization_version set as llama.cpp sets them), each tensor
// converted to the type quant_preset.h chooses for it with ggml's reference rounding, tensors
// written in llama.cpp's order.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/quant_preset.h"

namespace pagoda {

struct QuantizedTensor {
  std::string name;
  std::vector<uint64_t> shape;
  GgmlType from;   // type in the input
  QuantChoice to;  // type written, and what the preset wanted before a row-size fallback
};

struct QuantizeReport {
  std::vector<QuantizedTensor> tensors;  // in the order written
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data only
};

// Reads `in_path` and writes `out_path`. The input's matrices must be F32, F16 or BF16 where
// they change type (a tensor already of its target type is copied as it is; requantizing a
// quantized tensor is refused, as llama-quantize refuses it by default). Throws pagoda::Error
// naming the file, and the tensor where one is at fault (a non-finite value, say).
QuantizeReport quantize_gguf(const std::string& in_path, const std::string& out_path, QuantPreset preset);

}  // namespace pagoda
