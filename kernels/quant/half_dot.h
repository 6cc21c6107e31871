#pragma once
// Internal to kernels/quant: the per-ISA dot products of one F16 or BF16 weight row (read in
// place from the model's mapping) with f32 activation rows, which WeightMatrix's matmul calls
// for every output of a half-precision part.
//
// The arithmetic is fixed here, identically for every ISA, so an output's bits depend only on
// its two rows (not on M, the tile, the thread count or even the ISA): 16 float lanes, lane l
// accumulating the products of k ≡ l (mod 16) in k order (each a fused multiply-add, one
// rounding; the tail pads with 0·0), then reduced 16 → 8 (l + l+8), then reduce8 below.
// Fused because the GEMM of a prefill is bound by these operations, and FMA does in one what a
// multiply and an add do in two (1B F16 pp512 on Zen 4: 59.5 → 76.6 t/s).
// reduce8(v) = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels::quant {

// Σ_k W[k]·A[k] for one row of `cols` values.
using DotFn = float (*)(const void* w, const void* act, int cols);
// The same for 4 activation rows at act + r·act_stride bytes (out[r]), bit for bit what DotFn
// gives each row alone; the weight row is decoded once for the four.
using Dot4Fn = void (*)(const void* w, const void* act, std::size_t act_stride, int cols, float* out);
// Four weight rows (w + r·row_bytes) against `na` (1–4) activation rows: out[a·4 + r], bit for
// bit what DotFn gives each pair; activation loads are shared by the weight rows too. Only
// where an ISA has a faster form than DotFn / Dot4Fn (else null).
using Rows4Fn = void (*)(const void* w, std::size_t row_bytes, const void* act, std::size_t act_stride, int na,
                         int cols, float* out);

struct TypeKernels {
  DotFn dot = nullptr;
  Dot4Fn dot4 = nullptr;
  Rows4Fn rows4 = nullptr;
};

struct DotKernels {
  TypeKernels f16, bf16;
};
extern const DotKernels dot_portable, dot_avx2, dot_avx512;

const DotKernels& dot_kernels(Isa isa);
// The dot products for weight `type` (F16 or BF16), or nulls.
TypeKernels dot_for(const DotKernels& kernels, QuantType type);

inline float reduce8(const float v[8]) { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }

}  // namespace pagoda::kernels::quant
