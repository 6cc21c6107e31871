#pragma once
// Internal to kernels/quant: activation rows quantized to int8 for the integer kernels
// (interleaved.h), once per call and row, as ggml quantizes them.

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels::quant {

// 32 activations as int8: value ≈ d · q; sum = Σ q (for the offsets and mins).
struct ActBlock32 {
  float d;
  int32_t sum;
  int8_t qs[kQK];
};

// What a weight type's kernel takes as its activation row.
enum class ActFormat { F32, Q8_32, Q8_K };
ActFormat act_format(QuantType weight_type);
// Bytes of one activation row of `cols` values (0 for F32, which uses A's rows in place).
std::size_t act_row_bytes(ActFormat format, int cols);
// Quantizes one row: Q8_32 as ggml's Q8_0/Q8_1 (d = max|x| / 127, q = round(x / d)) with an
// f32 d; Q8_K as ggml's (d = max / −127 by magnitude, q = nearest(x / d) ≤ 127, bsums). With
// `isa` Avx512, Q8_32 rows take the vector code, which gives the same bytes.
void quantize_act_row(ActFormat format, const float* x, int cols, void* out, Isa isa = Isa::Portable);

// activations_avx512.cpp: Q8_32 blocks of `cols` (whole blocks) values, 16 lanes at a time.
void quantize_q8_32_avx512(const float* x, int cols, ActBlock32* out);

}  // namespace pagoda::kernels::quant
