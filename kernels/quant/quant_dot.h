#pragma once
// Internal to kernels/quant: the activation encodings and the per-ISA dot products of one
// weight row (in its ggml encoding) with one activation row, which WeightMatrix's matmul
// calls for every output.
//
// The arithmetic of every dot product is fixed here, identically for every ISA, so an output's
// bits depend only on its two rows (not on M, the tile, the thread count or even the ISA):
//  - F16 / BF16 weights with f32 activations: 16 float lanes, lane l accumulating the products
//    of k ≡ l (mod 16) in k order (multiply, then add; the tail pads with 0·0), then reduced
//    16 → 8 (l + l+8), then reduce8 below.
//  - Quantized weights with int8 activations (ActBlock32 for the 32-element types, Q8_K for
//    the K-quants, each quantized per row): 8 int32 lanes per 32 elements, lane l the exact
//    sum of the products of elements 4l … 4l+3 (what vpdpbusd and pmaddubsw+pmaddwd both
//    give); 8 float lanes accumulating float(lane) · (d_w · d_a) per block (K-quants: the
//    exact integer Σ over the super-block of lane · sub-block scale first), then reduce8, then
//    the separate min/offset chain (Q4_1, Q5_1, Q4_K, Q5_K) in block order.
// reduce8(v) = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels::quant {

// 32 activations as int8: value ≈ d · q; sum = Σ q (for the Q4_1 / Q5_1 offsets).
struct ActBlock32 {
  float d;
  int32_t sum;
  int8_t qs[kQK];
};

// What a weight type's dot product takes as its activation row.
enum class ActFormat { F32, Q8_32, Q8_K };
ActFormat act_format(QuantType weight_type);
// Bytes of one activation row of `cols` values (0 for F32, which uses A's rows in place).
std::size_t act_row_bytes(ActFormat format, int cols);
// Quantizes one row: Q8_32 as ggml's Q8_0/Q8_1 (d = max|x| / 127, q = round(x / d)) with an
// f32 d; Q8_K as ggml's (d = max / −127 by magnitude, q = nearest(x / d) ≤ 127, bsums).
void quantize_act_row(ActFormat format, const float* x, int cols, void* out);

// Σ_k W[k]·A[k] for one row of `cols` values.
using DotFn = float (*)(const void* w, const void* act, int cols);
// The same for 4 activation rows at act + r·act_stride bytes (out[r]), bit for bit what DotFn
// gives each row alone; the weight row is decoded once for the four.
using Dot4Fn = void (*)(const void* w, const void* act, std::size_t act_stride, int cols, float* out);
// Four weight rows (w + r·row_bytes) against `na` (1–4) activation rows: out[a·4 + r], bit for
// bit what DotFn gives each pair; activation loads are shared by the weight rows too. Only
// where an ISA has a faster form than DotFn / Dot4Fn (else null).
using Rows4Fn = void (*)(const void* w, std::size_t row_bytes, const void* act, std::size_t act_stride, int na, int cols,
                         float* out);

struct TypeKernels {
  DotFn dot = nullptr;
  Dot4Fn dot4 = nullptr;
  Rows4Fn rows4 = nullptr;
};

struct DotKernels {
  TypeKernels f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k;
};
extern const DotKernels dot_portable, dot_avx2, dot_avx512, dot_avx512vnni;

// The dot products for `isa` (AVX-512 uses VNNI when the CPU has it).
const DotKernels& dot_kernels(Isa isa);
// The dot products for weight `type` (not F32, which goes through PackedMatrix), or nulls.
TypeKernels dot_for(const DotKernels& kernels, QuantType type);

inline float reduce8(const float v[8]) {
  return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

}  // namespace pagoda::kernels::quant
