// The x86 half-precision dot products (half_dot_x86.h, and half_rows_avx512.h's four-row
// forms) compiled for avx512.

#include "kernels/quant/half_rows_avx512.h"

namespace pagoda::kernels::quant {

extern const DotKernels dot_avx512 = make_avx512_kernels();

}  // namespace pagoda::kernels::quant
