// AVX-512 GEMM tiles (gemm_x86.h): 8 rows × 3 zmm (48 columns) in 24 accumulators.

#include "kernels/gemm_x86.h"

namespace pagoda::kernels::detail {

extern const GemmKernels gemm_avx512 = gemm_kernels_of<Avx512Lanes, 3, 8>();

}  // namespace pagoda::kernels::detail
