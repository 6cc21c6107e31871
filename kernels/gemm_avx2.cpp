// AVX2 GEMM tiles (gemm_x86.h): 6 rows × 2 ymm (16 columns) in 12 accumulators; of the 16
// registers the rest hold the panel row and the broadcast.

#include "kernels/gemm_x86.h"

namespace pagoda::kernels::detail {

extern const GemmKernels gemm_avx2 = gemm_kernels_of<Avx2Lanes, 2, 6>();

}  // namespace pagoda::kernels::detail
