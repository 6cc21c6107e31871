// AVX2 halves of lora_sgmv (lora_sgmv_x86.h): shrink blocks of R rows × 2 rows of A in 2R ymm
// accumulators, expand blocks of R rows × 2 ymm (16 output columns) in 2R.

#include "kernels/lora_sgmv_x86.h"

namespace pagoda::kernels::detail {

const LoraKernels lora_avx2 = lora_kernels_of<Avx2Lanes, 2, 2>();

}  // namespace pagoda::kernels::detail
