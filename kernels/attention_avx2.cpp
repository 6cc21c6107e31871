// AVX2 attention primitives (attention_x86.h) on 8 lanes: two query heads at a time, whose
// chains fill AVX2's sixteen registers; a lone head's scores take all 8 positions a pass.

#include "kernels/attention_x86.h"

namespace pagoda::kernels::detail {

extern const AttentionKernels attention_avx2 = attention_kernels_of<FusedHeadsAttention<Avx2Lanes, 2, 8>>();

}  // namespace pagoda::kernels::detail
