#pragma once
// ggml's reference dequantization of every weight type pagoda reads: the same float operations
// in the same order as ggml's dequantize_row_* functions, so the results match llama.cpp's bit
// for bit (used for the token embedding lookup and as the oracle the kernels are tested
// against).

#include <cstdint>

#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels {

// Decodes n values of `type` from `src` (n / block_shape(type).elements whole blocks) into
// dst. Types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K … Q6_K, IQ4_NL, IQ4_XS. Throws
// pagoda::Error for another type or an n that is not a whole number of blocks.
void dequantize_row(QuantType type, const void* src, float* dst, int64_t n);

}  // namespace pagoda::kernels
