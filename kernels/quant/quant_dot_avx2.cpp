// The x86 dot products (quant_dot_x86.h) compiled for avx2.

#include "kernels/quant/quant_dot_x86.h"

namespace pagoda::kernels::quant {

extern const DotKernels dot_avx2 = make_x86_kernels<false>();

}  // namespace pagoda::kernels::quant
