// AVX-512 halves of lora_sgmv (lora_sgmv_x86.h): shrink blocks of R rows × 4 rows of A in 4R
// zmm accumulators, expand blocks of R rows × 4 zmm (64 output columns) in 4R.

#include "kernels/lora_sgmv_x86.h"

namespace pagoda::kernels::detail {

const LoraKernels lora_avx512 = lora_kernels_of<Avx512Lanes, 4, 4>();

}  // namespace pagoda::kernels::detail
