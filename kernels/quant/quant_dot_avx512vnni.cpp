// The x86 dot products (quant_dot_x86.h) compiled for avx512vnni.

#include "kernels/quant/quant_dot_x86.h"

namespace pagoda::kernels::quant {

extern const DotKernels dot_avx512vnni = make_x86_kernels<true>();

}  // namespace pagoda::kernels::quant
