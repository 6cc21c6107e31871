#pragma once
// Quantizing f32 values into ggml's encodings with ggml's reference rounding (the rounding
// llama-quantize uses when it has no importance matrix), so a file pagoda writes holds the
// same bytes as llama.cpp's for the same weights.

#include <cstdint>

#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels {

// Whether quantize_row can write `type`: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS (IQ4_NL as llama-quantize writes it, which
// tries more grids than ggml's quantize_row_iq4_nl_ref).
bool can_quantize(QuantType type);

// Encodes `n` values from `src` as `type` into `dst`, which must hold
// n / block_shape(type).elements blocks. Throws pagoda::Error when `type` cannot be written or
// `n` is not a whole number of blocks. Non-finite inputs are not checked: they give what they
// give in ggml (garbage scales), so callers that care check first.
void quantize_row(QuantType type, const float* src, void* dst, int64_t n);

}  // namespace pagoda::kernels
