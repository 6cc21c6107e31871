// AVX-512 attention primitives (attention_x86.h) on 16 lanes: up to four query heads at a time;
// scores take positions in fours, each query chunk loaded once for four positions.

#include "kernels/attention_x86.h"

namespace pagoda::kernels::detail {

extern const AttentionKernels attention_avx512 = attention_kernels_of<FusedHeadsAttention<Avx512Lanes, 4, 4>>();

}  // namespace pagoda::kernels::detail
