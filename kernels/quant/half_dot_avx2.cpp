// The x86 half-precision dot products (half_dot_x86.h) compiled for avx2.

#include "kernels/quant/half_dot_x86.h"

namespace pagoda::kernels::quant {

extern const DotKernels dot_avx2 = make_x86_kernels();

}  // namespace pagoda::kernels::quant
