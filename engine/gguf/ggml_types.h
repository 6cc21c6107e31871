#pragma once
// ggml's tensor element types as GGUF stores them: their sizes, the shapes a tensor may have,
// and conversion between encoded bytes and f32.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/half.h"
#include "kernels/quant/ggml_blocks.h"

namespace pagoda {

// GGUF files and ggml tensor data are little-endian, and pagoda reads and writes them by
// memcpy of native integers and floats.
static_assert(std::endian::native == std::endian::little, "pagoda reads and writes GGUF on little-endian hosts only");

// Tensor element types, numbered as ggml's; their block layouts are in kernels/quant/ggml_blocks.h.
using GgmlType = kernels::QuantType;
const char* ggml_type_name(GgmlType type);  // "F32", "Q4_K", ...
// Whether a tensor in a file may have type `id`: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS. A file with any other type is refused, naming it.
bool ggml_type_supported(uint32_t id);
// "IQ2_XXS (16)": ggml's name for a type id and the id, or the id alone when ggml never used it.
std::string ggml_type_id_string(uint32_t id);

// Bytes that `n_elements` values of `type` take. Throws pagoda::Error when n_elements is not
// a whole number of blocks or the size overflows.
uint64_t ggml_type_bytes(GgmlType type, uint64_t n_elements);

// Throws pagoda::Error "<context>: <problem>" unless a tensor may have `n_dims` dimensions
// (1 to 4, as ggml's GGML_MAX_DIMS).
void ggml_check_n_dims(uint64_t n_dims, const std::string& context);

struct GgmlTensorSize {
  uint64_t n_elements;
  uint64_t n_bytes;
};
// Validates a tensor shape as GGUF stores it (1 to 4 dimensions, none 0, no overflow, rows of
// whole blocks) and returns its sizes. Throws pagoda::Error "<context>: <problem>".
GgmlTensorSize ggml_tensor_size(std::span<const uint64_t> shape, GgmlType type, const std::string& context);

// The scalar f16/bf16 conversions (exact widening, round-to-nearest-even narrowing) are the
// kernels' own, so the file format and the kernels can never disagree on a value.
using kernels::bf16_to_f32;
using kernels::f16_to_f32;
using kernels::f32_to_bf16;
using kernels::f32_to_f16;

// Decodes `dst.size()` values of `type` from `src`, which must hold exactly that many, as
// ggml's reference dequantization does (kernels/quant/dequantize.h).
void dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

// `values` encoded as `type` with ggml's reference rounding (kernels/quant/quantize.h), the
// bytes llama-quantize writes without an importance matrix. Throws pagoda::Error for a type a
// GGUF tensor may not have, a count that is not a whole number of blocks, or a non-finite
// value for a block type.
std::vector<std::byte> encode_tensor(GgmlType type, std::span<const float> values);

}  // namespace pagoda
