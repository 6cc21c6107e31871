// AVX-512 GEMM tiles (gemm_x86.h): MR rows × 48 columns in 24 zmm accumulators.

#include "kernels/gemm_x86.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kVectors = 3;  // zmm per panel row: NR = 48
constexpr int kRows = 8;     // MR

}  // namespace

extern const GemmKernels gemm_avx512 = gemm_kernels_of<Avx512Lanes, kVectors>(std::make_integer_sequence<int, kRows>());

}  // namespace pagoda::kernels::detail
