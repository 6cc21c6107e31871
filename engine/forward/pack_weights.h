#pragma once
// The GEMM operand for one or more of a model's [out][in] weight matrices with the same `in`,
// stacked row-wise so that one GEMM computes them all (Q, K and V; gate and up).

#include <initializer_list>

#include "engine/model/weight_tensor.h"
#include "kernels/quant/weight_matrix.h"

namespace pagoda {

// Half-precision rows are read in place from the file's mapping; F32 and quantized ones are
// repacked for the active kernels, after which their mapped pages are released (the repacked
// copy replaces them), or, with `discard`, their pages whatever holds them (a file read into
// memory).
kernels::WeightMatrix pack_weights(std::initializer_list<const WeightTensor*> parts, bool discard = false);

}  // namespace pagoda
