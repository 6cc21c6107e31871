// The x86 dot products (quant_dot_x86.h, and quant_rows_avx512.h's four-row forms) compiled for avx512.

#include "kernels/quant/quant_rows_avx512.h"

namespace pagoda::kernels::quant {

extern const DotKernels dot_avx512 = make_avx512_kernels<false>();

}  // namespace pagoda::kernels::quant
