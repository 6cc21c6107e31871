// AVX2 GEMM tiles (gemm_x86.h): MR rows × 16 columns in 12 ymm accumulators (of the 16 registers, the
// rest hold the panel row and the broadcast).

#include "kernels/gemm_x86.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kVectors = 2;  // ymm per panel row: NR = 16
constexpr int kRows = 6;     // MR

}  // namespace

extern const GemmKernels gemm_avx2 = gemm_kernels_of<Avx2Lanes, kVectors>(std::make_integer_sequence<int, kRows>());

}  // namespace pagoda::kernels::detail
